"""kafkatier.cli: the ``kafkatier`` command line (one command, several subcommands).

``kafkatier`` itself is a namespace package whose parts live in the top-level folders
(storage/, sink/, tiering/, cli/); the project's version is kept here.
"""

__version__ = "0.1.0"
