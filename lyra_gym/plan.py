"""Old path of :mod:`lyra_gym.sim.plan` (moved by issue 28), an alias kept for one release."""

from lyra_gym._moved import alias
from lyra_gym.sim import plan as _module

alias(__name__, _module)
