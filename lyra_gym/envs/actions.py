"""The environments' action layout: per-dimension masks, the neutral action, decoding to Guidance.

Shared by the environments and by ``lyra_agents.policy_scheduler`` (a trained model run as a
scheduler), so both read an action the same way.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Sequence

import numpy as np

from lyra_gym.model.jobs import JobState
from lyra_gym.sim.scheduler import JOB_LEVELS, NEUTRAL_JOB_LEVEL, NEUTRAL_RETURN_LEVEL, RETURN_LEVELS, Guidance
from lyra_gym.sim.view import JobView

_job_id = attrgetter("id")


class ActionCodec:
    """The env's MultiDiscrete action layout: ``[JOB_LEVELS]*K`` if it controls jobs, then
    ``[B+1] + [RETURN_LEVELS]*M`` if it controls loaning; masks and decoding into Guidance.

    :param k: job slots K. :param m: loaned-server slots M. :param b: borrow levels B.
    """

    def __init__(self, k: int, m: int, b: int, controls_jobs: bool, controls_loaning: bool) -> None:
        self.k, self.m, self.b = k, m, b
        self.controls_jobs, self.controls_loaning = controls_jobs, controls_loaning
        nvec: list[int] = []
        if controls_jobs:
            nvec += [JOB_LEVELS] * k
        if controls_loaning:
            nvec += [b + 1] + [RETURN_LEVELS] * m
        self.nvec = np.array(nvec, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.nvec)[:-1]]).astype(np.int64)
        # a job slot's valid levels as bytes (bool): any, empty slot (hold only), running inelastic job (neutral only)
        self._any = bytes([1] * JOB_LEVELS)
        self._inelastic = bytes(1 if level == NEUTRAL_JOB_LEVEL else 0 for level in range(JOB_LEVELS))
        self._empty = bytes(1 if level == 0 else 0 for level in range(JOB_LEVELS))
        self._loaning: dict[int, bytes] = {}  # loaning part of the masks by number of loaned servers
        self._nvec = self.nvec.tolist()
        self._offsets = self.offsets.tolist()

    def masks(self, slots: Sequence[JobView], server_ids: Sequence[int]) -> np.ndarray:
        """Valid values per dimension, concatenated (a new array). Every value of a dimension is
        executable; a dimension is narrowed to one value only where the others would mean nothing
        (an empty slot; a running inelastic job)."""
        parts = b""
        if self.controls_jobs:
            running, any_level, inelastic = JobState.RUNNING, self._any, self._inelastic
            parts = b"".join([inelastic if job.state is running and not job.spec.elastic else any_level
                              for job in slots]) + self._empty * (self.k - len(slots))
        if self.controls_loaning:
            loaning = self._loaning.get(len(server_ids))
            if loaning is None:
                shown = len(server_ids)
                servers = bytes([1] * RETURN_LEVELS) * shown + bytes(
                    1 if level == NEUTRAL_RETURN_LEVEL else 0 for level in range(RETURN_LEVELS)) * (self.m - shown)
                loaning = self._loaning[shown] = bytes([1] * (self.b + 1)) + servers
            parts += loaning
        return np.frombuffer(bytearray(parts), dtype=bool)

    def neutral(self, slots: Sequence[JobView]) -> np.ndarray:
        """The heuristic's own choice: neutral levels, borrow everything loanable."""
        action: list[int] = []
        if self.controls_jobs:
            action += [NEUTRAL_JOB_LEVEL if i < len(slots) else 0 for i in range(self.k)]
        if self.controls_loaning:
            action += [self.b] + [NEUTRAL_RETURN_LEVEL] * self.m
        return np.array(action, dtype=np.int64)

    def check(self, action: object) -> np.ndarray:
        """``action`` as a 1-D int64 array, or ``ValueError`` saying what is wrong with it.

        An action must be an array (or sequence) of integers (any NumPy integer dtype) of
        exactly ``nvec``'s shape: floats (even whole ones), booleans, strings, objects and
        other shapes (e.g. a batch ``(1, n)``) are errors, as ``MultiDiscrete.contains`` says.
        Values out of a dimension's range are not errors here: :meth:`decode` replaces them.
        """
        expected = f"an integer array of shape {tuple(self.nvec.shape)}"
        try:
            array = np.asarray(action)
        except (TypeError, ValueError) as err:
            raise ValueError(f"action: must be {expected}, got {type(action).__name__} ({err})") from None
        if array.dtype.kind not in "iu":
            raise ValueError(f"action: must be {expected}, got dtype {array.dtype} (cast whole numbers with "
                             f".astype(np.int64))")
        if array.shape != self.nvec.shape:
            raise ValueError(f"action: must be {expected}, got shape {array.shape}")
        if array.dtype == np.uint64:  # keep huge values out of range instead of wrapping negative
            array = np.minimum(array, np.uint64(np.iinfo(np.int64).max))
        return array.astype(np.int64)

    def decode(self, action: np.ndarray, masks: np.ndarray, slots: Sequence[JobView],
               server_ids: Sequence[int]) -> tuple[Guidance, int]:
        """Action -> (Guidance, number of masked values replaced by the neutral one)."""
        values = np.asarray(action, dtype=np.int64).reshape(-1)
        if values.shape != self.nvec.shape:
            raise ValueError(f"action: expected shape {self.nvec.shape}, got {values.shape}")
        vals = values.tolist()
        allowed = np.asarray(masks, dtype=bool).tobytes()
        invalid = 0
        neutral = None
        for i, (value, size, offset) in enumerate(zip(vals, self._nvec, self._offsets)):
            if not (0 <= value < size and allowed[offset + value]):
                if neutral is None:
                    neutral = self.neutral(slots).tolist()
                vals[i] = neutral[i]
                invalid += 1
        guidance = Guidance()
        pos = 0
        if self.controls_jobs:
            guidance.job_levels = dict(zip(map(_job_id, slots), vals))  # slot i's job id -> vals[i]
            pos = self.k
        if self.controls_loaning:
            guidance.borrow_fraction = vals[pos] / self.b
            guidance.return_levels = dict(zip(server_ids, vals[pos + 1:]))  # server j -> vals[pos + 1 + j]
        return guidance, invalid
