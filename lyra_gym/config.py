"""Old path of :mod:`lyra_gym.model.config` (moved by issue 28), an alias kept for one release."""

from lyra_gym._moved import alias
from lyra_gym.model import config as _module

alias(__name__, _module)
