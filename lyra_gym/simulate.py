"""Old path of :mod:`lyra_gym.run.simulate` (moved by issue 28), an alias kept for one release."""

from lyra_gym._moved import alias
from lyra_gym.run import simulate as _module

alias(__name__, _module)
