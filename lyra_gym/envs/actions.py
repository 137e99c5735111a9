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
_UINT64 = np.dtype(np.uint64)


class ActionCodec:
    """The env's MultiDiscrete action layout: ``[JOB_LEVELS]*K`` if it controls jobs, then
    ``[B+1] + [RETURN_LEVELS]*M`` if it controls loaning; masks and decoding into Guidance.

    :param k: job slots K. :param m: loaned-server slots M. :param b: borrow levels B.
    """

    def __init__(self, k: int, m: int, b: int, controls_jobs: bool, controls_loaning: bool) -> None:
        self.k, self.m, self.b = k, m, b
        self.controls_jobs, self.controls_loaning = controls_jobs, controls_loaning
        self.nvec, self.offsets = action_layout(JOB_LEVELS, k, m, b, controls_jobs, controls_loaning)
        # a job slot's valid levels as bytes (bool): any, empty slot (hold only), running inelastic job (neutral only)
        self._any = bytes([1] * JOB_LEVELS)
        self._inelastic = bytes(1 if level == NEUTRAL_JOB_LEVEL else 0 for level in range(JOB_LEVELS))
        self._empty = bytes(1 if level == 0 else 0 for level in range(JOB_LEVELS))
        # the loaning dimensions': the borrow level (any), a loaned server (any), an empty server slot (neutral)
        self._borrow = bytes([1] * (b + 1))
        self._server = bytes([1] * RETURN_LEVELS)
        self._no_server = bytes(1 if level == NEUTRAL_RETURN_LEVEL else 0 for level in range(RETURN_LEVELS))
        self._checks = self._derive_checks()
        self._loaning: dict[int, bytes] = {}  # loaning part of the masks by number of loaned servers
        self._counted: dict[tuple[int, int, int], np.ndarray] = {}  # masks_counted's answers by its arguments
        self._nvec = self.nvec.tolist()
        self._offsets = self.offsets.tolist()
        self._shape = self.nvec.shape

    def _derive_checks(self) -> tuple | None:
        """The counted check's constants, read from the bytes the masks are made of: the valid range
        (low, high) of a free job slot, the borrow level and a loaned server's level; the one valid
        value of a running inelastic job's slot, an empty job slot and an empty server slot, as lists
        to compare whole slices with. None when a kind is not of that shape (a gap in a range, more
        than one value where one is expected): every value is then read from the mask."""
        free, borrow, server = (_valid_range(part) for part in (self._any, self._borrow, self._server))
        singles = [_valid_range(part) for part in (self._inelastic, self._empty, self._no_server)]
        if free is None or borrow is None or server is None or any(r is None or r[1] - r[0] != 1 for r in singles):
            return None
        inelastic, empty, no_server = (r[0] for r in singles if r is not None)
        return free, borrow, server, [inelastic] * self.k, [empty] * self.k, [no_server] * self.m

    def _loaning_part(self, shown: int) -> bytes:
        """The loaning dimensions' valid values with ``shown`` loaned servers in the slots."""
        loaning = self._loaning.get(shown)
        if loaning is None:
            loaning = self._loaning[shown] = self._borrow + self._server * shown + self._no_server * (self.m - shown)
        return loaning

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
            parts += self._loaning_part(len(server_ids))
        return np.frombuffer(bytearray(parts), dtype=bool)

    def masks_counted(self, shown: int, inelastic: int, servers: int) -> np.ndarray:
        """:meth:`masks` of ``shown`` job slots whose last ``inelastic`` hold running inelastic jobs
        (and no other does) and ``servers`` loaned-server slots, as
        :func:`lyra_gym.envs.observation.job_slots_counted` orders and counts them: the same
        values, in one read-only array kept per counts (copy it to change it)."""
        key = (shown, inelastic, servers)
        masks = self._counted.get(key)
        if masks is None:
            parts = b""
            if self.controls_jobs:
                parts = self._any * (shown - inelastic) + self._inelastic * inelastic + self._empty * (self.k - shown)
            if self.controls_loaning:
                parts += self._loaning_part(servers)
            masks = self._counted[key] = np.frombuffer(parts, dtype=bool)  # read-only: the bytes are
        return masks

    def _counted_valid(self, vals: list[int], counts: tuple[int, int, int]) -> bool:
        """True when every value of ``vals`` is valid under ``masks_counted(*counts)``, tested a slice
        at a time against the valid values read from the bytes the mask is made of (``_checks``);
        False when one is not, or without those constants (decode then reads value by value)."""
        checks = self._checks
        if checks is None:
            return False  # read value by value
        free, borrow, server, inelastic_only, empty_only, no_server_only = checks
        shown, inelastic, servers = counts
        pos = 0
        if self.controls_jobs:
            waiting = vals[:shown - inelastic]  # queued and running elastic jobs
            if waiting and (min(waiting) < free[0] or max(waiting) >= free[1]):
                return False
            if vals[shown - inelastic:shown] != inelastic_only[:inelastic] or \
                    vals[shown:self.k] != empty_only[:self.k - shown]:
                return False  # a running inelastic job's slot, an empty slot: one value each
            pos = self.k
        if self.controls_loaning:
            if not borrow[0] <= vals[pos] < borrow[1]:
                return False
            loaned = vals[pos + 1:pos + 1 + servers]
            if loaned and (min(loaned) < server[0] or max(loaned) >= server[1]):
                return False
            if vals[pos + 1 + servers:] != no_server_only[:self.m - servers]:
                return False  # an empty server slot: one value
        return True

    def neutral(self, slots: Sequence[JobView]) -> np.ndarray:
        """The heuristic's own choice: neutral levels, borrow everything loanable."""
        action: list[int] = []
        if self.controls_jobs:
            action += [NEUTRAL_JOB_LEVEL if i < len(slots) else 0 for i in range(self.k)]
        if self.controls_loaning:
            action += [self.b] + [NEUTRAL_RETURN_LEVEL] * self.m
        return np.array(action, dtype=np.int64)

    def check(self, action: object) -> np.ndarray:
        """``action`` as a 1-D int64 array, or ``ValueError`` saying what is wrong with it
        (:func:`check_action`)."""
        return check_action(action, self._shape)

    def decode(self, action: np.ndarray, masks: np.ndarray, slots: Sequence[JobView],
               server_ids: Sequence[int], counts: tuple[int, int, int] | None = None) -> tuple[Guidance, int]:
        """Action -> (Guidance, number of masked values replaced by the neutral one).

        ``counts``: where ``masks`` is the array ``masks_counted(*counts)`` returned, those counts
        (the values are then tested a slice at a time, :meth:`_counted_valid`; the same answer);
        any other ``masks`` is read value by value."""
        values = np.asarray(action, dtype=np.int64)
        if values.ndim != 1:  # (check's arrays are 1-D already)
            values = values.reshape(-1)
        if values.shape != self._shape:
            raise ValueError(f"action: expected shape {self.nvec.shape}, got {values.shape}")
        vals = values.tolist()
        invalid = 0
        if counts is None or masks is not self._counted.get(counts) or not self._counted_valid(vals, counts):
            allowed = np.asarray(masks, dtype=bool).tobytes()
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


def check_action(action: object, shape: tuple[int, ...]) -> np.ndarray:
    """``action`` as a 1-D int64 array of ``shape``, or ``ValueError`` saying what is wrong with it.

    An action must be an array (or sequence) of integers (any NumPy integer dtype) of
    exactly that shape: floats (even whole ones), booleans, strings, objects and other
    shapes (e.g. a batch ``(1, n)``) are errors, as ``MultiDiscrete.contains`` says.
    Values out of a dimension's range are not errors here: decoding replaces them.
    """
    expected = f"an integer array of shape {tuple(shape)}"
    try:
        array = np.asarray(action)
    except (TypeError, ValueError) as err:
        raise ValueError(f"action: must be {expected}, got {type(action).__name__} ({err})") from None
    dtype = array.dtype
    if dtype.kind not in "iu":
        raise ValueError(f"action: must be {expected}, got dtype {dtype} (cast whole numbers with "
                         f".astype(np.int64))")
    if array.shape != shape:
        raise ValueError(f"action: must be {expected}, got shape {array.shape}")
    if dtype == _UINT64:  # keep huge values out of range instead of wrapping negative
        array = np.minimum(array, np.uint64(np.iinfo(np.int64).max))
    return array.astype(np.int64)


def action_layout(job_values: int, k: int, m: int, b: int, controls_jobs: bool,
                  controls_loaning: bool) -> tuple[np.ndarray, np.ndarray]:
    """(nvec, offsets) of a guided env's MultiDiscrete action: ``[job_values]*K`` if it controls
    jobs, then ``[B+1] + [RETURN_LEVELS]*M`` if it controls loaning; offsets of each dimension's
    first value in the concatenated masks."""
    nvec: list[int] = []
    if controls_jobs:
        nvec += [job_values] * k
    if controls_loaning:
        nvec += [b + 1] + [RETURN_LEVELS] * m
    array = np.array(nvec, dtype=np.int64)
    return array, np.concatenate([[0], np.cumsum(array)[:-1]]).astype(np.int64)


def _valid_range(allowed: bytes) -> tuple[int, int] | None:
    """(low, high) where a dimension's valid values ``allowed`` (one byte per value) are exactly
    low .. high - 1; None when they are not one such range."""
    valid = [value for value, ok in enumerate(allowed) if ok]
    if not valid or valid[-1] - valid[0] + 1 != len(valid):
        return None
    return valid[0], valid[-1] + 1
