"""Heuristic schedulers for lyra-gym: the package's face.

``from lyra_baselines import LyraScheduler`` gives a scheduler class (``LyraReferenceScheduler``:
Lyra's two phases read plainly, the place to start reading); the registry finds the same
classes by name (``lyra_gym.make("lyra")``, entry points ``lyra_gym.schedulers`` in pyproject.toml).
The modules behind them (``lyra_baselines.lyra``, ``.pollux``, ...) are internal. Each class is
imported on first use (PEP 562), so importing the package, or one scheduler, loads no other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lyra_gym.lazy_face import lazy_face

if TYPE_CHECKING:  # what type checkers and editors see; at run time __getattr__ imports them
    from lyra_baselines.fifo import FifoScheduler
    from lyra_baselines.fifo_fast import FastFifoScheduler
    from lyra_baselines.gandiva import GandivaLoanScheduler, GandivaScheduler
    from lyra_baselines.lyra import (
        BaselineMinScheduler,
        BaselineScheduler,
        LyraBackfillScheduler,
        LyraNoElasticScheduler,
        LyraNoLoanScheduler,
        LyraScheduler,
    )
    from lyra_baselines.lyra_reference import LyraReferenceScheduler
    from lyra_baselines.pollux import PolluxLoanScheduler, PolluxScheduler
    from lyra_baselines.sjf import SjfScheduler
    from lyra_baselines.tiresias import TiresiasLoanScheduler, TiresiasScheduler

#: Class name -> the module that defines it (imported on first use of the name).
_FACE = {
    "FifoScheduler": "lyra_baselines.fifo",
    "FastFifoScheduler": "lyra_baselines.fifo_fast",
    "SjfScheduler": "lyra_baselines.sjf",
    **dict.fromkeys(("LyraScheduler", "LyraBackfillScheduler", "LyraNoLoanScheduler", "LyraNoElasticScheduler",
                     "BaselineScheduler", "BaselineMinScheduler"), "lyra_baselines.lyra"),
    "LyraReferenceScheduler": "lyra_baselines.lyra_reference",
    **dict.fromkeys(("TiresiasScheduler", "TiresiasLoanScheduler"), "lyra_baselines.tiresias"),
    **dict.fromkeys(("GandivaScheduler", "GandivaLoanScheduler"), "lyra_baselines.gandiva"),
    **dict.fromkeys(("PolluxScheduler", "PolluxLoanScheduler"), "lyra_baselines.pollux"),
}

__all__ = [
    "BaselineMinScheduler", "BaselineScheduler", "FastFifoScheduler", "FifoScheduler", "GandivaLoanScheduler",
    "GandivaScheduler",
    "LyraBackfillScheduler", "LyraNoElasticScheduler", "LyraNoLoanScheduler", "LyraReferenceScheduler",
    "LyraScheduler", "PolluxLoanScheduler", "PolluxScheduler", "SjfScheduler", "TiresiasLoanScheduler",
    "TiresiasScheduler",
]


# A scheduler class, imported from its module on first use and kept here.
__getattr__, __dir__ = lazy_face(globals(), _FACE)
