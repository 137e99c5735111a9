"""Old path of :mod:`lyra_gym.workloads.presets_calibrated` (moved by issue 28), an alias kept for one release."""

from lyra_gym._moved import alias
from lyra_gym.workloads import presets_calibrated as _module

alias(__name__, _module)
