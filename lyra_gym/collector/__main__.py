"""``python -m lyra_gym.collector ...``: the collector without the ``lyra-gym`` CLI (same options as ``lyra-gym profile``)."""

import sys

from lyra_gym.collector.cli import main

sys.exit(main())
