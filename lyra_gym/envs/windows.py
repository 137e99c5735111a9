"""Episodes as windows of one trace: train windows early, test windows later (disjoint in time)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lyra_gym.trace import JobSpec


@dataclass(frozen=True)
class Window:
    """Jobs submitted in [start_s, start_s + length_s), simulated with ``seed``."""

    split: str
    index: int
    start_s: float
    length_s: float
    seed: int

    def jobs(self, trace: Sequence[JobSpec]) -> list[JobSpec]:
        end = self.start_s + self.length_s
        return [j for j in trace if self.start_s <= j.submit_time < end]


class WindowSampler:
    """Splits a trace's time span: train windows start in the first ``1 - test_fraction``,
    test windows tile the rest. Train windows start on a ``stride_s`` grid.

    :param trace: the whole trace (any order).
    :param length_s: window length, seconds.
    :param test_fraction: share of the trace's span reserved for test windows (0-1).
    :param stride_s: grid of train window starts, seconds.
    """

    def __init__(self, trace: Sequence[JobSpec], length_s: float, test_fraction: float = 0.2,
                 stride_s: float = 3600.0) -> None:
        if length_s <= 0:
            raise ValueError(f"window_s: must be > 0, got {length_s}")
        if not 0 < test_fraction < 1:
            raise ValueError(f"test_fraction: must be in (0, 1), got {test_fraction}")
        span = max((j.submit_time for j in trace), default=0.0)
        self.split_s = span * (1 - test_fraction)
        self.length_s = length_s
        self.train_starts = np.arange(0.0, max(self.split_s - length_s, 0.0) + 1e-9, stride_s)
        self.test_starts = np.arange(self.split_s, max(span - length_s, self.split_s) + 1e-9, length_s)
        if len(self.test_starts) == 0 or self.split_s - length_s < 0:
            raise ValueError(
                f"window_s: {length_s} s windows do not fit the trace's {span:.0f} s span with "
                f"test_fraction {test_fraction}; use a longer trace or shorter windows")

    def train(self, rng: np.random.Generator) -> Window:
        """A random train window and simulation seed."""
        i = int(rng.integers(len(self.train_starts)))
        return Window("train", i, float(self.train_starts[i]), self.length_s, int(rng.integers(2**31)))

    def test(self, index: int) -> Window:
        """Test window ``index`` (wraps around); its seed is fixed so every policy sees the same run."""
        i = index % len(self.test_starts)
        return Window("test", i, float(self.test_starts[i]), self.length_s, 1_000_000 + index)

    @property
    def num_test(self) -> int:
        return len(self.test_starts)
