"""Old path of :mod:`lyra_gym.workloads.realtraces` (moved by issue 28), an alias kept for one
release (the package's own names; import its submodules from the new path)."""

from lyra_gym._moved import alias
from lyra_gym.workloads import realtraces as _module

alias(__name__, _module)
