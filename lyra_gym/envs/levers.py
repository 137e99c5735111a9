"""The ``-v2`` guided environments' action side (issue 38 items 1 and 3): job slots that cover the
running jobs, a PREEMPT value per job slot, exact masks, and which decision points need no agent.

Shared by the ``-v2`` environments (``cluster_env_v2.py``) and ``lyra_agents.policy_scheduler``
(a ``-v2`` model run as a scheduler), so both read an action the same way.

Slots (:func:`lever_slots`): running jobs first claim up to K slots (every one of them can be
preempted), the queued jobs fill the rest in the heuristic's admission order; laid out as
queued jobs, then running elastic jobs, then running inelastic jobs (start order).

Masks (:class:`LeverCodec`), per job slot: queued 0..4; running elastic 0..4 and PREEMPT;
running inelastic the neutral level and PREEMPT; empty 0. The borrow level is free only when a
server is loanable (else every level borrows nothing: only B); a loaned server's return level
only while a reclaim is pending (else it is never read: only the neutral level).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from lyra_gym.envs.actions import action_layout, check_action
from lyra_gym.envs.observation import job_slots_counted, server_slots
from lyra_gym.sim.scheduler import JOB_LEVELS, NEUTRAL_JOB_LEVEL, NEUTRAL_RETURN_LEVEL, RETURN_LEVELS, Guidance
from lyra_gym.sim.view import ClusterView, JobView

#: The job slot value that preempts a running job (sends it back to the queue).
PREEMPT = JOB_LEVELS
#: Values of a ``-v2`` job slot: the levels 0..4 and PREEMPT.
LEVER_JOB_VALUES = JOB_LEVELS + 1

#: (queued, running elastic, running inelastic) job slots shown.
SlotCounts = tuple[int, int, int]


def lever_slots(view: ClusterView, k: int) -> tuple[list[JobView], SlotCounts, int, int]:
    """(slots, their counts, running jobs unseen, queued jobs unseen): the running jobs claim up
    to ``k`` slots (elastic ones first, then inelastic ones, start order), the queued jobs the
    rest (admission order, :func:`~lyra_gym.envs.observation.job_slots_counted`)."""
    num_queued = view.num_queued
    elastic: list[JobView] = []
    inelastic: list[JobView] = []
    for job in view.running_jobs():
        (elastic if job.request.elastic else inelastic).append(job)
    num_running = len(elastic) + len(inelastic)
    shown_running = min(num_running, k)
    room = k - shown_running
    queued = job_slots_counted(view, room)[0][:min(num_queued, room)] if room and num_queued else []
    n_elastic = min(len(elastic), shown_running)
    slots = queued + elastic[:n_elastic] + inelastic[:shown_running - n_elastic]
    counts = (len(queued), n_elastic, shown_running - n_elastic)
    return slots, counts, num_running - shown_running, num_queued - len(queued)


class LeverPoint(NamedTuple):
    """One decision point as a ``-v2`` env (and a ``-v2`` model run as a scheduler) sees it."""

    slots: list[JobView]
    server_ids: list[int]
    masks: np.ndarray  # read-only (kept by the codec)
    single: bool  # every dimension has one valid value: committed without asking the agent
    running_unseen: int
    queued_unseen: int


def lever_point(view: ClusterView, codec: LeverCodec) -> LeverPoint:
    """The slots, server slots and masks of the decision point ``view`` is at."""
    slots, counts, running_unseen, queued_unseen = lever_slots(view, codec.k)
    server_ids = server_slots(view, codec.m)
    masks, single = codec.masks(counts, len(server_ids), view.num_loanable > 0, view.reclaim_pending > 0)
    return LeverPoint(slots, server_ids, masks, single, running_unseen, queued_unseen)


class LeverCodec:
    """The ``-v2`` MultiDiscrete layout: ``[6]*K`` if it controls jobs, then ``[B+1] + [3]*M`` if
    it controls loaning; exact masks, the neutral action and decoding into Guidance.

    :param k: job slots K. :param m: loaned-server slots M. :param b: borrow levels B.
    """

    def __init__(self, k: int, m: int, b: int, controls_jobs: bool, controls_loaning: bool) -> None:
        self.k, self.m, self.b = k, m, b
        self.controls_jobs, self.controls_loaning = controls_jobs, controls_loaning
        self.nvec, self.offsets = action_layout(LEVER_JOB_VALUES, k, m, b, controls_jobs, controls_loaning)
        self._shape = self.nvec.shape

        def valid(size: int, values: Sequence[int]) -> bytes:
            return bytes(1 if value in values else 0 for value in range(size))

        levels = range(JOB_LEVELS)
        self._queued = valid(LEVER_JOB_VALUES, levels)
        self._elastic = valid(LEVER_JOB_VALUES, [*levels, PREEMPT])
        self._inelastic = valid(LEVER_JOB_VALUES, [NEUTRAL_JOB_LEVEL, PREEMPT])
        self._empty = valid(LEVER_JOB_VALUES, [0])
        self._borrow = (valid(b + 1, [b]), valid(b + 1, range(b + 1)))  # by: a server is loanable
        self._server = (valid(RETURN_LEVELS, [NEUTRAL_RETURN_LEVEL]), valid(RETURN_LEVELS, range(RETURN_LEVELS)))
        self._kept: dict[tuple, tuple[np.ndarray, bool]] = {}  # masks' key -> (masks, one value everywhere)

    def masks(self, counts: SlotCounts, servers: int, loanable: bool, reclaim: bool) -> tuple[np.ndarray, bool]:
        """(valid values per dimension, concatenated: a read-only array kept per arguments; whether
        every dimension has exactly one valid value). ``counts``: :func:`lever_slots`' counts;
        ``servers``: loaned-server slots shown; ``loanable``: a server can be borrowed now;
        ``reclaim``: a reclaim is pending."""
        key = (counts, servers, loanable, reclaim)
        kept = self._kept.get(key)
        if kept is None:
            parts = b""
            single = True
            if self.controls_jobs:
                queued, elastic, inelastic = counts
                parts = (self._queued * queued + self._elastic * elastic + self._inelastic * inelastic
                         + self._empty * (self.k - queued - elastic - inelastic))
                single = not (queued or elastic or inelastic)
            if self.controls_loaning:
                server = self._server[reclaim]
                parts += self._borrow[loanable] + server * servers + self._server[0] * (self.m - servers)
                single = single and not loanable and not (reclaim and servers)
            kept = self._kept[key] = (np.frombuffer(parts, dtype=bool), single)  # read-only: the bytes are
        return kept

    def neutral(self, slots: Sequence[JobView]) -> np.ndarray:
        """The heuristic's own choice with ``slots`` shown: neutral levels, no preemption, borrow
        everything loanable, neutral return levels."""
        shown = len(slots)
        action: list[int] = []
        if self.controls_jobs:
            action += [NEUTRAL_JOB_LEVEL] * shown + [0] * (self.k - shown)
        if self.controls_loaning:
            action += [self.b] + [NEUTRAL_RETURN_LEVEL] * self.m
        return np.array(action, dtype=np.int64)

    def check(self, action: object) -> np.ndarray:
        """``action`` as a 1-D int64 array, or ``ValueError`` (:func:`~lyra_gym.envs.actions.check_action`)."""
        return check_action(action, self._shape)

    def decode(self, action: np.ndarray, masks: np.ndarray, slots: Sequence[JobView],
               server_ids: Sequence[int]) -> tuple[Guidance, int]:
        """Action -> (Guidance, number of values out of range or masked, each replaced by the
        neutral one). PREEMPT on a running job puts it in ``Guidance.preempt`` (its level neutral)."""
        values = np.asarray(action, dtype=np.int64).reshape(-1)
        if values.shape != self._shape:
            raise ValueError(f"action: expected shape {self.nvec.shape}, got {values.shape}")
        in_range = (values >= 0) & (values < self.nvec)
        ok = in_range & masks[self.offsets + np.where(in_range, values, 0)]
        invalid = int(ok.size - np.count_nonzero(ok))
        if invalid:
            values = np.where(ok, values, self.neutral(slots))
        vals = values.tolist()
        guidance = Guidance()
        pos = 0
        if self.controls_jobs:
            levels = dict(zip([job.id for job in slots], vals))  # slot i's job id -> vals[i]
            preempt = [job_id for job_id, value in levels.items() if value == PREEMPT]
            if preempt:
                for job_id in preempt:
                    levels[job_id] = NEUTRAL_JOB_LEVEL
                guidance.preempt = frozenset(preempt)
            guidance.job_levels = levels
            pos = self.k
        if self.controls_loaning:
            guidance.borrow_fraction = vals[pos] / self.b
            guidance.return_levels = dict(zip(server_ids, vals[pos + 1:]))  # server j -> vals[pos + 1 + j]
        return guidance, invalid


__all__ = ["LEVER_JOB_VALUES", "PREEMPT", "LeverCodec", "LeverPoint", "SlotCounts", "lever_point", "lever_slots"]
