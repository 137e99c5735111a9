"""The ``lyra-gym`` command line: :func:`main` parses the arguments and runs a subcommand.

The subcommands live in :mod:`lyra_gym.cli.app`; ``python -m lyra_gym.cli`` runs the same.
"""

from lyra_gym.cli.app import TRUST_ENV, main

__all__ = ["TRUST_ENV", "main"]
