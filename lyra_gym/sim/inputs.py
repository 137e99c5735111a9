"""What an engine is given besides the trace and the policy: the efficiency table, the progress bar.

:class:`lyra_gym.sim.engine.Engine` takes both as constructor parameters; these are their defaults.
"""

from __future__ import annotations

from typing import Callable, Protocol

from lyra_gym.model.config import SimConfig
from lyra_gym.model.efficiency import EfficiencyTable, builtin_efficiency, load_efficiency


class ProgressBar(Protocol):
    """A bar over a run's jobs: ``update(n)`` after ``n`` more finished, ``close()`` at the end."""

    def update(self, n: int) -> object: ...
    def close(self) -> None: ...


#: Makes the bar of a run of ``total`` jobs.
ProgressFactory = Callable[[int], ProgressBar]


def efficiency_of(config: SimConfig) -> EfficiencyTable:
    """The statistical-efficiency table ``config.efficiency`` names (a JSON file), else the built-in one."""
    return load_efficiency(config.efficiency) if config.efficiency else builtin_efficiency()


def tqdm_bar(total: int) -> ProgressBar:
    """tqdm on stderr, shown after 2 s, cleared at the end (the engine's bar for ``progress=True``)."""
    from tqdm import tqdm

    return tqdm(total=total, delay=2.0, unit="job", leave=False)
