"""Lyra's switches, declared once: the fast ``lyra`` (``baselines/lyra.py``) and the plain
``lyra-reference`` (``baselines/lyra_reference.py``) both subclass :class:`LyraSwitches`, so the
two take the same parameters (names, defaults, ranges, help texts, order) and admit a job at the
same base demand.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lyra_baselines.knapsack import DEFAULT_EXACT_LIMIT
from lyra_baselines.loaning import Loaning, loan_param, reclaim_rule_param
from lyra_gym.sim.params import MAX_S, MIN_TICK_S, check_fields, param
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.scheduler import Guidance, Scheduler
from lyra_gym.sim.view import ClusterView, JobView

__all__ = ["HOLD_EWMA", "LyraSwitches"]

LOANED_RULES = ("speed", "overflow")
FLEX_HORIZONS = ("queue", "completion")
FIXED_SIZES = ("requested", "min")
VALUE_RATES = ("goodput", "throughput")
HOLD_EWMA = 0.1  # weight of the newest observed hold of extra workers (assumption)
MAX_SERVERS = 100_000  # servers: the most reserve_servers (a count beyond any cluster)
MAX_EXACT_LIMIT = 10**8  # DP cells: the most knapsack_exact_limit (the exact DP's time grows with it)


@dataclass
class LyraSwitches(Scheduler):
    """Lyra's switches (a subclass decides with them).

    :param loan: borrow idle inference servers (default True).
    :param elastic: scale elastic jobs above their minimum (default True).
    :param fixed_size: with ``elastic=False``, run elastic jobs at their ``"requested"`` size
        (default) or at their ``"min"``.
    :param reclaim_rule: ``"cost"`` (default) or ``"random"``.
    :param reserve_servers: loanable servers left unborrowed (default 0).
    :param backfill: admit later jobs past one that does not fit (default False).
    :param loaned_rule: ``"speed"`` (default): a job goes onto loaned GPUs only when it is expected
        to finish sooner there than by waiting for training GPUs; ``"overflow"``: whenever it does
        not fit on training GPUs (the rule before speed awareness; measured in the README).
    :param move_back: move a job from loaned to free training GPUs when that pays after the
        migration stall (default True).
    :param flex_horizon: how long the knapsack assumes extra workers are held: ``"queue"``
        (default): until the first job waiting for that GPU type would get its GPUs (from the
        release timeline); when none waits, the smoothed observed holding time (at least
        ``round_s``; to completion before any was observed); ``"completion"``: always to completion.
    :param value_rate: ``"goodput"`` (default: the engine's rate, ``baselines/lyra.py``'s module
        docstring) or ``"throughput"`` (the profile's samples/s, the paper-literal reading).
    :param knapsack_exact_limit: DP cells above which the greedy solver is used (default 400,000).
    :param round_s: seconds between knapsack rounds (default 60 s, assumption: the paper does not
        give its round length; Pollux re-optimises every 60 s); with ``elastic`` it is also the
        scheduler's tick, so a round happens on a quiet cluster too. Between rounds phase 2 also
        runs whenever an elastic job is admitted, flexible workers are displaced, or servers are
        borrowed or returned.
    """

    #: shortest-remaining-first admission, the release timeline, loaning and the knapsack's values
    reads = frozenset({"remaining_work", "remaining_time_at", "total_work", "expected_finish"})

    loan: bool = loan_param(True)
    elastic: bool = param(True, "scale elastic jobs above their minimum")
    fixed_size: str = param("requested", "with elastic=false: run elastic jobs at their requested or min size",
                            choices=FIXED_SIZES)
    reclaim_rule: str = reclaim_rule_param()
    reserve_servers: int = param(0, "loanable servers left unborrowed", lo=0, hi=MAX_SERVERS, unit="servers")
    backfill: bool = param(False, "admit later jobs past one that does not fit")
    loaned_rule: str = param("speed", "onto loaned GPUs when it finishes sooner there (speed), or whenever "
                             "training GPUs are full (overflow)", choices=LOANED_RULES)
    move_back: bool = param(True, "move a job from loaned to free training GPUs when that pays")
    flex_horizon: str = param("queue", "how long the knapsack assumes extra workers are held",
                              choices=FLEX_HORIZONS)
    value_rate: str = param("goodput", "rate of the remaining-time estimates and knapsack values",
                            choices=VALUE_RATES)
    knapsack_exact_limit: int = param(DEFAULT_EXACT_LIMIT, "DP cells above which the greedy knapsack is used",
                                      lo=0, hi=MAX_EXACT_LIMIT, unit="cells")
    round_s: float = param(60.0, "seconds between knapsack rounds (the tick when elastic)", lo=MIN_TICK_S,
                           hi=MAX_S, unit="s")
    loaning: Loaning = field(init=False)

    def __post_init__(self) -> None:
        check_fields(self)
        self.loaning = Loaning(enabled=self.loan, reserve_servers=self.reserve_servers, reclaim_rule=self.reclaim_rule)
        self.reset(np.random.default_rng(0))

    @property
    def tick_interval(self) -> float | None:  # type: ignore[override]
        """A tick every ``round_s`` when elastic: a cluster with no event for a whole round still
        gets its knapsack round."""
        return self.round_s if self.elastic else None

    def decide(self, view: ClusterView) -> Plan:
        """Lyra unguided: :meth:`decide_guided` under an empty ``Guidance``."""
        return self.decide_guided(view, Guidance())

    def base_demand(self, job: JobView) -> int:
        """GPUs ``job`` is admitted at: an elastic job's minimum when Lyra scales it (or runs it at its
        minimum), else its requested size."""
        if job.spec.elastic and (self.elastic or self.fixed_size == "min"):
            return job.spec.min_gpus
        return job.spec.num_gpus
