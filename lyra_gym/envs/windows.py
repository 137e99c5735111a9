"""Episodes as windows of one trace: train windows early, test windows later (disjoint in time)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lyra_gym.model.jobspec import JobSpec

#: Most train (or test) windows a sampler lays out; each start is a float64 in an array.
MAX_WINDOWS = 1_000_000


@dataclass(frozen=True)
class Window:
    """Jobs submitted in [start_s - warmup_s, start_s + length_s), simulated with ``seed``.

    With ``warmup_s > 0`` the window starts warm: the jobs submitted in the ``warmup_s`` before
    ``start_s`` run under the heuristic until ``start_s``, so the cluster is as loaded as the
    heuristic leaves it (the environments' ``warmup_s``)."""

    split: str
    index: int
    start_s: float
    length_s: float
    seed: int
    warmup_s: float = 0.0

    def jobs(self, trace: Sequence[JobSpec]) -> list[JobSpec]:
        """The window's jobs, warm-up jobs included, in trace order."""
        first, end = self.start_s - self.warmup_s, self.start_s + self.length_s
        return [j for j in trace if first <= j.submit_time < end]


class WindowSampler:
    """Splits a trace's time span: train windows start in the first ``1 - test_fraction``,
    test windows tile the rest. Train windows start on a ``stride_s`` grid.

    :param trace: the whole trace (any order).
    :param length_s: window length, seconds.
    :param test_fraction: share of the trace's span reserved for test windows (0-1).
    :param stride_s: grid of train window starts, seconds.
    :param warmup_s: seconds of warm-up before every window (:class:`Window`), default 0.

    An episode needs at least one decision, so a train window must hold a job submitted in
    ``[start_s, start_s + length_s)`` (warm-up jobs do not count: the agent decides nothing
    before ``start_s``): grid starts whose window holds none (a gap in the trace, or windows
    shorter than the gaps between submissions) are left out of :attr:`train_starts`. Test
    windows keep tiling the test part (their indices and seeds stay fixed for paired
    comparisons); one that holds no job starts finished (``env.done`` after ``reset``, as
    ``agents/evaluate.py`` expects). If no train window, or no test window, holds a job, the
    constructor raises ``ValueError`` naming ``window_s``.

    More than :data:`MAX_WINDOWS` train or test windows (a very long trace, or tiny windows)
    is a ``ValueError`` naming ``window_s`` and the trace's span, not a MemoryError.
    """

    def __init__(self, trace: Sequence[JobSpec], length_s: float, test_fraction: float = 0.2,
                 stride_s: float = 3600.0, warmup_s: float = 0.0) -> None:
        if not math.isfinite(length_s) or length_s <= 0:
            raise ValueError(f"window_s: must be a finite number > 0, got {length_s}")
        if not 0 < test_fraction < 1:
            raise ValueError(f"test_fraction: must be in (0, 1), got {test_fraction}")
        if not math.isfinite(stride_s) or stride_s <= 0:
            raise ValueError(f"stride_s: must be a finite number > 0, got {stride_s}")
        if not math.isfinite(warmup_s) or warmup_s < 0:
            raise ValueError(f"warmup_s: must be a finite number >= 0, got {warmup_s}")
        self.warmup_s = float(warmup_s)
        span = max((j.submit_time for j in trace), default=0.0)
        self.split_s = span * (1 - test_fraction)
        self.length_s = length_s
        for what, extent, step in (("train", self.split_s - length_s, stride_s),
                                   ("test", span - length_s - self.split_s, length_s)):
            if extent / step + 1 > MAX_WINDOWS:
                raise ValueError(
                    f"window_s: the trace's {span:.0f} s span with {length_s:g} s windows (train starts every "
                    f"{stride_s:g} s) makes about {extent / step + 1:.3g} {what} windows, more than "
                    f"MAX_WINDOWS={MAX_WINDOWS:,}; use longer windows or a shorter trace")
        train_starts = np.arange(0.0, max(self.split_s - length_s, 0.0) + 1e-9, stride_s)
        self.test_starts = np.arange(self.split_s, max(span - length_s, self.split_s) + 1e-9, length_s)
        if len(self.test_starts) == 0 or self.split_s - length_s < 0:
            raise ValueError(
                f"window_s: {length_s} s windows do not fit the trace's {span:.0f} s span with "
                f"test_fraction {test_fraction}; use a longer trace or shorter windows")
        submits = np.sort(np.fromiter((j.submit_time for j in trace), dtype=np.float64, count=len(trace)))
        self.train_starts = train_starts[_holds_a_job(submits, train_starts, length_s)]
        for what, starts, kept in (("train", train_starts, self.train_starts),
                                   ("test", self.test_starts, self.test_starts[_holds_a_job(
                                       submits, self.test_starts, length_s)])):
            if len(kept) == 0:
                raise ValueError(
                    f"window_s: none of the {len(starts)} {what} windows of {length_s:g} s holds a job "
                    f"(the trace has {len(submits)} jobs over {span:.0f} s), so an episode would have no "
                    f"decision to make; use longer windows")

    def train(self, rng: np.random.Generator) -> Window:
        """A random train window (its ``index``: the position in :attr:`train_starts`, the grid
        starts whose window holds a job) and simulation seed."""
        i = int(rng.integers(len(self.train_starts)))
        return Window("train", i, float(self.train_starts[i]), self.length_s, int(rng.integers(2**31)),
                      self.warmup_s)

    def test(self, index: int) -> Window:
        """Test window ``index``, ``0 <= index < num_test`` (else ``ValueError``); its seed is fixed
        (``1_000_000 + index``) so every policy sees the same run."""
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)) \
                or not 0 <= index < len(self.test_starts):
            raise ValueError(f"window: must be an integer in [0, {len(self.test_starts) - 1}] "
                             f"({len(self.test_starts)} test windows), got {index!r}")
        i = int(index)
        return Window("test", i, float(self.test_starts[i]), self.length_s, 1_000_000 + i, self.warmup_s)

    @property
    def num_test(self) -> int:
        return len(self.test_starts)


def _holds_a_job(sorted_submits: np.ndarray, starts: np.ndarray, length_s: float) -> np.ndarray:
    """Per start: does ``[start, start + length_s)`` hold a submit time? (``sorted_submits`` sorted.)"""
    first = np.searchsorted(sorted_submits, starts, side="left")
    end = np.searchsorted(sorted_submits, starts + length_s, side="left")
    return end > first
