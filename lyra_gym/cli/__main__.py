"""``python -m lyra_gym.cli``: the ``lyra-gym`` command."""

import sys

from lyra_gym.cli.app import main

sys.exit(main())
