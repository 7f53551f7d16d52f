"""kafkatier.cli.run: ``kafkatier run``, the whole pipeline on one machine.

``command`` is the subcommand; ``pipeline`` its steps: a generated stream (``source``) through
the Spark job with two sinks (``job``), the sidecar, then restore, replay and the ``checks`` and
``verify`` against the stream's model, summed up by ``report``.
"""
