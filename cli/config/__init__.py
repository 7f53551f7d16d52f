"""kafkatier.cli.config: the one configuration file every command reads.

``loader`` reads and checks it; ``run`` holds the ``run.*`` keys of ``kafkatier run``;
``remote`` opens the remote store it names, starting the embedded S3 server when asked.
"""
