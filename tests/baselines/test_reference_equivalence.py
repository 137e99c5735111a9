"""``lyra`` equals ``lyra-reference`` plan for plan, at every decision (issue 41 items 1 and 3).

One harness (:class:`Twin`): the engine runs the fast ``lyra``; at every decision the reference
(``baselines/lyra_reference.py``: the plain algorithm over the public view) is asked first on the
same view, and both plans must be the same: allocations, borrowed and returned servers, batch
sizes. Cases: hypothesis workloads on random clusters x Lyra's switches x knowledge modes x
scaling rules, the golden traces, guided runs with random :class:`Guidance`, every guided env id
(the twin as the env's heuristic), and named cases (:data:`NAMED`: generated traces on clusters
that reach each shortcut: the lazy move-back line, the kept release book and rates under each
knowledge mode, phase 2's settle, the greedy knapsack, two training types, each scaling rule).
Deliberately broken fast paths (a stale cache, a wrong tie-break, a bound above its key, a blind
settle) fail it. A new shortcut in the fast path needs no new test file: it runs under this
harness; an edge case it needs is one more entry of :data:`NAMED`.
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass, field, replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lyra_baselines.lyra as lyra_module
import lyra_baselines.lyra_estimates as lyra_estimates
import lyra_baselines.lyra_line as lyra_line
import lyra_baselines.lyra_rates as lyra_rates
import lyra_baselines.lyra_rebalance as lyra_rebalance
from lyra_baselines.lyra import LyraScheduler
from lyra_baselines.lyra_reference import LyraReferenceScheduler
from lyra_gym.model.config import ClusterConfig, OverheadConfig, ServerGroup, SimConfig
from lyra_gym.model.demand import DemandCurve
from lyra_gym.model.knowledge import KnowledgeConfig
from lyra_gym.model.profiles import builtin_profiles
from lyra_gym.model.scaling import SCALING_RULES
from lyra_gym.run.simulate import simulate
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.scheduler import JOB_LEVELS, RETURN_LEVELS, Guidance, Scheduler
from lyra_gym.sim.view import ClusterView
from lyra_gym.workloads.tracegen import generate_trace
from toy import TOY, job


class PlanMismatch(AssertionError):
    """The fast plan differs from the reference's at one decision."""


def plan_fields(plan: Plan) -> dict:
    """What a plan decides, comparable with ==: allocations, loaning, batches."""
    return {"allocations": {j: dict(a) for j, a in plan.allocations.items()},
            "borrow": tuple(plan.borrow), "give_back": tuple(plan.give_back),
            "suspend": tuple(plan.suspend), "batch_sizes": dict(plan.batch_sizes)}


@dataclass
class Twin(Scheduler):
    """Runs ``fast``; asks ``reference`` the same at every decision and compares the plans.
    ``guide(view, rng) -> Guidance`` draws the guidance of each decision (None: none)."""

    fast: LyraScheduler
    reference: LyraReferenceScheduler
    guide: object = None
    overrule: bool = False  # every 5th plan replaced by :func:`overruled`
    decisions: int = 0
    changed: int = 0  # decisions whose plan changed something
    draws: np.random.Generator = field(default_factory=lambda: np.random.default_rng(7))
    name = "lyra-twin"

    @property
    def reads(self):  # type: ignore[override]
        return self.fast.reads

    @property
    def tick_interval(self) -> float | None:  # type: ignore[override]
        return self.fast.tick_interval

    def reset(self, rng: np.random.Generator) -> None:
        self.reference.reset(copy.deepcopy(rng))  # the same draws (reclaim_rule="random")
        self.fast.reset(rng)

    def decide(self, view: ClusterView) -> Plan:
        guidance = self.guide(view, self.draws) if callable(self.guide) else Guidance()
        return self.decide_guided(view, guidance)

    def decide_guided(self, view: ClusterView, guidance: Guidance) -> Plan:
        expected = plan_fields(self.reference.decide_guided(view, guidance))
        plan = self.fast.decide_guided(view, guidance)
        got = plan_fields(plan)
        self.decisions += 1
        if got != expected:
            raise PlanMismatch(f"decision {self.decisions} at t={view.now}: fast {got} != reference {expected}")
        current = plan_fields(view.current_plan())
        self.changed += got != current
        return overruled(view) if self.overrule and self.decisions % 5 == 0 else plan


def overruled(view: ClusterView) -> Plan:
    """The allocations as they are, less the first job running on a loaned server (stopped): a
    change the engine makes that Lyra did not plan (it learns of it from the view alone)."""
    plan, loaned = view.current_plan(), set(view.loaned_servers())
    stopped = next((j.id for j in view.running_jobs() if not loaned.isdisjoint(j.allocation)), None)
    if stopped is not None:
        plan.allocations.pop(stopped)
    return plan


def twin(**switches) -> Twin:
    return Twin(LyraScheduler(**switches), LyraReferenceScheduler(**switches))


# ------------------------------------------------------------------ workloads and clusters
@st.composite
def workloads(draw, max_jobs: int = 14):
    """Toy jobs (elastic and inelastic, bursts) and an inference demand that moves."""
    n = draw(st.integers(1, max_jobs))
    jobs, t = [], 0.0
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.0, 5.0, 60.0, 400.0]))
        gpus = draw(st.sampled_from([1, 2, 3, 4, 6, 8]))
        duration = draw(st.sampled_from([10.0, 90.0, 300.0, 2000.0]))
        if draw(st.booleans()):
            lo, hi = draw(st.integers(1, gpus)), draw(st.integers(gpus, 8))
            jobs.append(job(f"e{i}", t, gpus, duration, elastic=True, lo=lo, hi=hi))
        else:
            jobs.append(job(f"j{i}", t, gpus, duration))
    steps = draw(st.lists(st.integers(0, 4), min_size=1, max_size=8))
    return jobs, DemandCurve(times_s=[300.0 * k for k in range(len(steps))], servers=steps)


@st.composite
def clusters(draw) -> SimConfig:
    """One or two training GPU types, one or two inference types, either placement rule."""
    training = [ServerGroup(draw(st.integers(1, 3)), "v100", draw(st.sampled_from([2, 4])))]
    if draw(st.booleans()):
        training.append(ServerGroup(draw(st.integers(1, 2)), "t4", 4))
    inference = ServerGroup(draw(st.integers(1, 4)), "t4", 4)
    return SimConfig(
        cluster=ClusterConfig(training=tuple(training), inference=inference),
        overheads=OverheadConfig(rescale_s=draw(st.sampled_from([0.0, 30.0])), restart_s=20.0,
                                 migrate_s=draw(st.sampled_from([5.0, 45.0]))),
        placement=draw(st.sampled_from(["spread", "consolidated"])),
        allow_mixed_gpu_types=draw(st.booleans()),
        scaling=draw(st.sampled_from(SCALING_RULES)),
        knowledge=KnowledgeConfig(mode=draw(st.sampled_from(["oracle", "estimate", "history"]))),
    )


@st.composite
def lyra_switches(draw) -> dict:
    return dict(backfill=draw(st.booleans()), loaned_rule=draw(st.sampled_from(["speed", "overflow"])),
                move_back=draw(st.booleans()), flex_horizon=draw(st.sampled_from(["queue", "completion"])),
                value_rate=draw(st.sampled_from(["goodput", "throughput"])),
                reclaim_rule=draw(st.sampled_from(["cost", "random"])), elastic=draw(st.booleans()),
                fixed_size=draw(st.sampled_from(["requested", "min"])), loan=draw(st.booleans()),
                round_s=draw(st.sampled_from([30.0, 60.0])),
                knapsack_exact_limit=draw(st.sampled_from([400_000, 10])))


def run_twin(jobs, demand, config: SimConfig, switches: dict, guide=None) -> Twin:
    checked = twin(**switches)
    checked.guide = guide
    simulate(jobs, checked, config, seed=0, profiles=TOY, demand=demand)
    return checked


def random_guidance(view: ClusterView, rng: np.random.Generator) -> Guidance:
    """Random job levels, borrow fraction and return levels (preempt: ``test_guided_preempt``)."""
    jobs = [*view.queued_jobs(), *view.running_jobs()]
    levels = {j.id: int(rng.integers(JOB_LEVELS)) for j in jobs if rng.random() < 0.5}
    fraction = float(rng.choice([0.0, 0.5, 1.0])) if rng.random() < 0.3 else None
    returns = {s: int(rng.integers(RETURN_LEVELS)) for s in view.loaned_servers() if rng.random() < 0.5}
    return Guidance(job_levels=levels, borrow_fraction=fraction, return_levels=returns)


def _examples(n: int):
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------ the harness
@_examples(60)
@given(case=workloads(), config=clusters(), switches=lyra_switches())
def test_lyra_equals_the_reference_at_every_decision(case, config, switches):
    jobs, demand = case
    run_twin(jobs, demand, config, switches)


@_examples(25)
@given(case=workloads(), config=clusters(), switches=lyra_switches())
def test_guided_lyra_equals_the_reference(case, config, switches):
    jobs, demand = case
    run_twin(jobs, demand, config, switches, guide=random_guidance)


def _guide_with_preempt(view: ClusterView, rng: np.random.Generator) -> Guidance:
    running = [j.id for j in view.running_jobs()]
    preempt = frozenset(j for j in running if rng.random() < 0.2)
    return replace(random_guidance(view, rng), preempt=preempt)


FAST_READS_PREEMPT = ".preempt" in inspect.getsource(lyra_module)  # (issue 38 item 1 adds it)


@pytest.mark.skipif(not FAST_READS_PREEMPT, reason="the fast lyra does not read Guidance.preempt yet (issue 38)")
@_examples(25)
@given(case=workloads(), config=clusters(), switches=lyra_switches())
def test_guided_preempt_equals_the_reference(case, config, switches):
    jobs, demand = case
    run_twin(jobs, demand, config, switches, guide=_guide_with_preempt)


@pytest.mark.parametrize("case", ["default", pytest.param("workload-6-t4", marks=pytest.mark.slow),
                                  pytest.param("lyra-15d-day1", marks=pytest.mark.slow)])
def test_golden_traces_plan_for_plan(case):
    """The golden results' traces and configs (``test_golden_results.py``), every decision."""
    from tests.run.test_golden_results import _case

    jobs, config = _case(case)
    checked = twin()
    simulate(jobs, checked, config, seed=0)
    assert checked.decisions > 1000 and checked.changed > 400


@pytest.mark.slow
@_examples(400)
@given(case=workloads(max_jobs=30), config=clusters(), switches=lyra_switches())
def test_larger_sweep(case, config, switches):
    jobs, demand = case
    run_twin(jobs, demand, config, switches, guide=random_guidance if len(jobs) % 2 else None)


DEFAULT_CONFIG = SimConfig(
    cluster=ClusterConfig(training=(ServerGroup(2, "v100", 4),), inference=ServerGroup(3, "t4", 4)),
    overheads=OverheadConfig(rescale_s=30.0, restart_s=20.0, migrate_s=45.0))
BUSY = [job(f"e{i}", 10.0 * i, 4, 900.0, elastic=True, lo=1, hi=8) if i % 2 else job(f"j{i}", 10.0 * i, 3, 600.0)
        for i in range(12)]
BUSY_DEMAND = DemandCurve(times_s=[0.0, 300.0, 900.0, 1500.0], servers=[0, 3, 1, 2])


def test_the_harness_sees_real_decisions():
    """The named busy case loans, reclaims, admits and rescales: the comparison is not vacuous."""
    checked = run_twin(BUSY, BUSY_DEMAND, DEFAULT_CONFIG, {})
    assert checked.decisions > 20 and checked.changed > 10


# ------------------------------------------------------------------ named cases
# Conditions the per-shortcut test files built by hand (the lazy move-back line, the kept release
# book, the quiet-decision set-up, phase 2's settle, the knapsack rows, the kept rates), now run
# under the one harness on generated traces: each case says what it reaches.
LOADED = ClusterConfig(training=(ServerGroup(5, "v100", 8),), inference=ServerGroup(6, "t4", 8))
SPARE = ClusterConfig(training=(ServerGroup(6, "v100", 8),), inference=ServerGroup(4, "t4", 8))
CROWDED = ClusterConfig(training=(ServerGroup(10, "v100", 8),), inference=ServerGroup(4, "t4", 8))
TWO_TYPES = ClusterConfig(training=(ServerGroup(3, "v100", 8), ServerGroup(3, "a100", 8)),
                          inference=ServerGroup(4, "t4", 8))
_estimate, _history = KnowledgeConfig(mode="estimate"), KnowledgeConfig(mode="history")

#: name -> (trace seed, jobs, cluster, SimConfig changes, Lyra switches, overrule)
NAMED = {
    # long queues, loaning, move-backs: most move-back candidates rest in the lazy line; kept releases
    "loaded": (3, 120, LOADED, {}, {}, False),
    # the same with every 5th plan overruled: the kept state follows changes Lyra did not plan
    # (move-back candidates: every job on loaned GPUs, not only those Lyra put there)
    "loaded-overruled": (3, 120, LOADED, {}, {}, True),
    "overruled-no-move-back": (3, 120, LOADED, {}, {"move_back": False}, True),  # (the kept running jobs, releases)
    "loaded-rigid": (3, 120, LOADED, {}, {"elastic": False}, False),
    "loaded-no-move-back": (3, 120, LOADED, {}, {"move_back": False}, False),
    "loaded-throughput": (3, 120, LOADED, {}, {"value_rate": "throughput"}, False),
    # believed work that moves while an allocation stays: rates by the true part, timelines now
    "estimate": (3, 120, LOADED, {"knowledge": _estimate}, {}, False),
    "history": (3, 120, LOADED, {"knowledge": _history}, {}, False),
    "estimate-rigid": (3, 120, LOADED, {"knowledge": _estimate}, {"elastic": False}, False),
    "estimate-biased": (3, 120, LOADED, {"knowledge": KnowledgeConfig(mode="estimate", sigma=2.0, bias=0.7)},
                        {}, False),
    # phase 1 displaces flexible workers that keep as many elsewhere: settle and kept workers
    "displaced-extras": (1, 120, CROWDED, {}, {}, False),
    # every knapsack by the greedy: the ample shortcut, the spare GPUs per cell
    "greedy-knapsack": (7, 120, SPARE, {}, {"knapsack_exact_limit": 0}, False),
    "completion-horizon": (7, 120, SPARE, {}, {"flex_horizon": "completion"}, False),
    # two training types: the multi-type fallbacks of admission and rebalance
    "two-training-types": (3, 120, TWO_TYPES, {}, {}, False),
    # each scaling rule: kept reference rates, goodput rows grown from the least size asked
    **{f"scaling-{rule}": (5, 120, SPARE, {"scaling": rule}, {}, False) for rule in SCALING_RULES},
}


#: variants of a default case (a switch or a knowledge setting more): under -m slow
SLOW_NAMED = {"loaded-rigid", "loaded-no-move-back", "loaded-throughput", "estimate-rigid", "estimate-biased",
              "completion-horizon"}
def _marks(name: str) -> list:
    return [pytest.mark.slow] * (name in SLOW_NAMED)


def run_named(name: str) -> Twin:
    seed, n, cluster, changes, switches, overrule = NAMED[name]
    checked = twin(**switches)
    checked.overrule = overrule
    simulate(generate_trace("bench-15d", seed)[:n], checked, SimConfig(cluster=cluster, **changes), seed=0)
    return checked


@pytest.mark.parametrize("name", [pytest.param(name, marks=_marks(name)) for name in NAMED])
@pytest.mark.sample(3)
def test_named_case_plan_for_plan(name):
    checked = run_named(name)
    assert checked.decisions > 200 and checked.changed > 80


def test_runs_sharing_one_profile_set_plan_for_plan():
    """Windows run one after another on one profile set (as the benchmark's are): later runs start
    with the rates earlier ones kept, and still plan as the reference."""
    shared, trace = builtin_profiles(), generate_trace("bench-15d", 3)
    config = SimConfig(cluster=LOADED)
    for jobs in (trace[:60], trace[60:120], trace[:60]):
        checked = twin()
        simulate(jobs, checked, config, seed=0, profiles=shared)
        assert checked.changed > 25


def test_a_job_our_reclaim_stops_restarts_in_the_same_decision():
    """By hand: training server 0 and loaned server 1 (2 V100s each), no move-back. a (100 s) runs on
    0, b (1000 s) on 1. At 200 s inference wants server 1 back with nothing queued: b stops and moves
    to server 0 in that very decision (45 s migration): 1000 - 200 = 800 s left, done at 1045 s."""
    from toy import config as toy_config
    from toy import jct

    demand = DemandCurve(np.array([0.0, 200.0]), np.array([0, 1]))
    cfg = toy_config(training=1, gpus=2, inference=1, inference_gpu="v100")
    checked = twin(move_back=False, loaned_rule="overflow")
    result = simulate([job("a", 0, 2, 100), job("b", 0, 2, 1000)], checked, cfg, seed=0, profiles=TOY,
                      demand=demand)
    assert jct(result, "b") == pytest.approx(200 + 45 + 800)


ENV_TWINS: list[Twin] = []


def env_twin(**switches) -> Twin:
    """The env's heuristic (``heuristic="test_reference_equivalence:env_twin"``): a twin per episode."""
    ENV_TWINS.append(twin(**switches))
    return ENV_TWINS[-1]


def env_twin_without_move_back() -> Twin:
    return env_twin(move_back=False)


@pytest.mark.parametrize("env_id, heuristic", [
    ("LyraGym/Cluster-v1", "env_twin"), ("LyraGym/Loaning-v1", "env_twin"), ("LyraGym/Elastic-v1", "env_twin"),
    ("LyraGym/Alloc-v1", "env_twin_without_move_back"), ("LyraGym/Alloc-v1", "env_twin")])
@pytest.mark.sample(3)
def test_guided_envs_plan_for_plan(env_id, heuristic):
    """Random valid actions in each env: the agent's levels (Alloc-v1: its own plans, the
    heuristic's proposals compared) reach the twin at every decision, episodes after episodes."""
    import gymnasium as gym

    import lyra_gym  # noqa: F401  (registers the envs)

    ENV_TWINS.clear()
    env = gym.make(env_id, heuristic=f"{__name__}:{heuristic}", window_s=2 * 3600.0)
    env.reset(seed=3)
    rng = np.random.default_rng(3)
    nvec = getattr(env.action_space, "nvec", None)
    bounds = np.cumsum(nvec)[:-1] if nvec is not None else []
    for _ in range(250):
        masks = np.split(np.asarray(env.unwrapped.action_masks(), dtype=bool), bounds)
        action = [rng.choice(np.flatnonzero(m)) for m in masks]
        _, _, terminated, truncated, _ = env.step(np.array(action) if nvec is not None else action[0])
        if terminated or truncated:
            env.reset()
    assert sum(t.decisions for t in ENV_TWINS) > 50  # (Alloc-v1: several sub-actions a decision)


# ------------------------------------------------------------------ broken fast paths fail it
STALE_CASE = [job("j0", 60.0, 2, 2000.0), job("j1", 60.0, 2, 2000.0), job("j2", 460.0, 2, 300.0),
              job("j3", 460.0, 8, 2000.0), job("j4", 860.0, 1, 90.0), job("j5", 865.0, 6, 300.0),
              job("j6", 1265.0, 1, 300.0), job("j7", 1325.0, 8, 2000.0), job("j8", 1325.0, 4, 90.0),
              job("j9", 1325.0, 8, 90.0), job("e10", 1330.0, 1, 2000.0, elastic=True, lo=1, hi=8),
              job("e11", 1730.0, 1, 300.0, elastic=True, lo=1, hi=8)]


def test_a_stale_cache_fails_the_harness(monkeypatch):
    """Release timelines kept per allocation under a knowledge mode, whose believed finish moves
    while the allocation stays (the stale cache found late once): the harness fails."""
    monkeypatch.setattr(lyra_estimates.ReleaseTracker, "_sync_believed",
                        lambda self, view, allocations: self._sync_all(view, allocations))
    config = replace(DEFAULT_CONFIG, knowledge=KnowledgeConfig(mode="estimate"))
    run_twin(STALE_CASE, BUSY_DEMAND, config, {"elastic": False, "loan": False})  # a run it does not change passes
    with pytest.raises(PlanMismatch):
        run_twin(STALE_CASE, BUSY_DEMAND, config, {})


def test_a_bound_above_the_key_fails_the_loaded_case(monkeypatch):
    """The lazy move-back line's bounds up to 20 % of the work above the key: a candidate that is
    due rests (the defect ``test_lyra_admission_line.py`` guarded)."""
    monkeypatch.setattr(lyra_line, "MARGIN", -0.2)
    with pytest.raises(PlanMismatch):
        run_named("loaded")


def test_a_settle_blind_to_short_servers_fails_the_displaced_case(monkeypatch):
    """Phase 2's settle skipping the jobs on servers phase 1 took flexible GPUs from (the defect
    ``test_lyra_rebalance_settle.py`` guarded)."""
    settle = lyra_rebalance.settle

    def blind(d, gpu_type, typed, choice):
        touched, d.touched = d.touched, set()  # no server looks short
        try:
            settle(d, gpu_type, typed, choice)
        finally:
            d.touched = touched

    monkeypatch.setattr(lyra_rebalance, "settle", blind)
    with pytest.raises(PlanMismatch):
        run_named("displaced-extras")


def test_a_wrong_tie_break_fails_the_harness(monkeypatch):
    """Equal remaining times in the admission line broken by the later job first."""
    original = lyra_rates.LyraRates.queued_line

    def later_first(self, view, jobs):
        return [(t, -i, j) for t, i, j in original(self, view, jobs)]

    monkeypatch.setattr(lyra_rates.LyraRates, "queued_line", later_first)
    with pytest.raises(PlanMismatch):
        run_twin(BUSY, BUSY_DEMAND, DEFAULT_CONFIG, {})


def test_registered_as_lyra_reference():
    """``lyra-reference`` runs by name (its entry point; registered here too, the same class, for a
    checkout not re-installed) and gives lyra's results."""
    from lyra_gym.sim.scheduler import register

    register("lyra-reference", LyraReferenceScheduler)
    by_name = simulate(BUSY, "lyra-reference", DEFAULT_CONFIG, seed=0, profiles=TOY, demand=BUSY_DEMAND)
    fast = simulate(BUSY, "lyra", DEFAULT_CONFIG, seed=0, profiles=TOY, demand=BUSY_DEMAND)
    assert by_name.jobs == fast.jobs
