"""Issue 23 item 7, "starvation left": on mixed clusters every policy runs what ``lyra`` runs.

Two reproducers that failed before the fix, and a property over small random mixed clusters:

- ``pollux``/``pollux+loan`` sized an elastic job to a training pool of two GPU types (2 V100 +
  12 A100 GPUs) that no one job could use together, so its placement failed at every decision.
- ``tiresias+loan``, ``gandiva+loan`` and ``pollux+loan`` borrowed inference servers but never
  spanned training and loaned servers, so a job larger than either never started where
  ``allow_mixed_gpu_types`` lets ``lyra`` run it there.

Jobs use the built-in profiles (which hold V100, A100 and T4 speeds); inference demand is a
constant, so whether a job can run does not depend on when servers are reclaimed.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lyra_baselines.placement import UnrunnableJobWarning
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.model.demand import DemandCurve
from lyra_gym.model.feasibility import capacity, check_feasibility
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.run.simulate import simulate
from lyra_gym.sim import scheduler as registry

POLICIES = registry.available()
LOANING = ("tiresias+loan", "gandiva+loan", "pollux+loan")


def cluster(training: tuple[ServerGroup, ...], inference: ServerGroup = ServerGroup(0, "t4", 4),
            mixed: bool = False, placement: str = "spread") -> SimConfig:
    return SimConfig(cluster=ClusterConfig(training=training, inference=inference),
                     allow_mixed_gpu_types=mixed, placement=placement)


def run(jobs, policy: str, cfg: SimConfig, idle_servers_needed: int = 0) -> tuple[set[str], set[str]]:
    """(finished job ids, job ids the policy warned it can never start)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = simulate(jobs, policy, cfg, seed=0, demand=DemandCurve.constant(idle_servers_needed))
    warned = {m.group(1) for w in caught if issubclass(w.category, UnrunnableJobWarning)
              for m in [re.search(r"job '([^']*)'", str(w.message))] if m}
    return {r["job_id"] for r in result.jobs if r["finished"]}, warned


def borrows(policy: str) -> bool:
    """Does ``policy`` borrow inference servers at all? (Every loaning policy holds a ``Loaning``.)"""
    return bool(getattr(getattr(registry.make(policy), "loaning", None), "enabled", False))


# --- reproducers ----------------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["pollux", "pollux+loan", "lyra", "fifo"])
def test_an_elastic_job_wider_than_any_one_gpu_type_runs_on_one(policy):
    # 2 V100 + 12 A100 training GPUs, types may not mix; one elastic job of 8 GPUs (4..16). Pollux
    # used to size it for the 14 GPUs of both types and then find no one type to place it on.
    cfg = cluster((ServerGroup(1, "v100", 2), ServerGroup(3, "a100", 4)))
    jobs = [JobSpec("j0", 0.0, 8, 600.0, "resnet50", True, 4, 16)]
    assert run(jobs, policy, cfg) == ({"j0"}, set())


@pytest.mark.parametrize("policy", [*LOANING, "lyra"])
@pytest.mark.parametrize("elastic", [False, True])
def test_a_job_larger_than_training_and_loaned_pools_spans_both_where_types_may_mix(policy, elastic):
    # 8 V100 training GPUs and 8 idle T4 inference GPUs: a job of 12 (elastic: 10..16) fits only
    # on both together, which allow_mixed_gpu_types permits (at the T4s' pace).
    cfg = cluster((ServerGroup(2, "v100", 4),), ServerGroup(2, "t4", 4), mixed=True)
    jobs = [JobSpec("j0", 0.0, 12, 600.0, "resnet50", elastic, 10 if elastic else 12, 16 if elastic else 12)]
    assert run(jobs, policy, cfg) == ({"j0"}, set())


@pytest.mark.parametrize("policy", [*LOANING, "lyra"])
def test_a_job_larger_than_the_training_pool_runs_on_loaned_gpus_instead(policy):
    cfg = cluster((ServerGroup(1, "v100", 4),), ServerGroup(4, "t4", 4))
    jobs = [JobSpec("j0", 0.0, 12, 600.0, "resnet50", False, 12, 12)]
    assert run(jobs, policy, cfg) == ({"j0"}, set())


@pytest.mark.parametrize("policy", ["tiresias", "gandiva", "pollux"])
def test_a_job_that_needs_loaned_gpus_is_warned_about_by_a_policy_that_never_borrows(policy):
    cfg = cluster((ServerGroup(2, "v100", 4),), ServerGroup(2, "t4", 4), mixed=True)
    jobs = [JobSpec("small", 0.0, 4, 60.0, "resnet50", False, 4, 4),
            JobSpec("big", 10.0, 12, 60.0, "resnet50", False, 12, 12)]
    assert run(jobs, policy, cfg) == ({"small"}, {"big"})


def test_a_job_too_large_for_one_type_is_warned_about_where_types_may_not_mix():
    cfg = cluster((ServerGroup(1, "v100", 4), ServerGroup(1, "a100", 4)), ServerGroup(1, "t4", 4))
    jobs = [JobSpec("j0", 0.0, 6, 60.0, "resnet50", False, 6, 6)]
    for policy in (*LOANING, "tiresias", "gandiva", "pollux"):
        assert run(jobs, policy, cfg) == (set(), {"j0"}), policy


# --- property -------------------------------------------------------------------------------
@st.composite
def mixed_clusters(draw):
    """(config, jobs, inference servers needed): 1-3 training GPU types, 0-3 T4 inference servers
    (a constant number of them serving), 1-4 short jobs that fit the cluster. A job's requested
    size needs loaned servers exactly when its minimum does, so policies that run jobs at their
    requested size (fifo, tiresias, gandiva, ...) and those that start them at their minimum
    (lyra, pollux) face the same question: can it run without, or with, loaned servers?"""
    types = draw(st.lists(st.sampled_from(["v100", "a100", "t4"]), min_size=1, max_size=3, unique=True))
    training = tuple(ServerGroup(draw(st.integers(1, 2)), t, draw(st.sampled_from([2, 4]))) for t in types)
    inference = ServerGroup(draw(st.integers(0, 3)), "t4", draw(st.sampled_from([2, 4])))
    cfg = cluster(training, inference, mixed=draw(st.booleans()),
                  placement=draw(st.sampled_from(["spread", "consolidated"])))
    serving = draw(st.integers(0, inference.count))
    idle = replace(cfg, cluster=replace(cfg.cluster, inference=replace(inference, count=inference.count - serving)))
    with_loans, training_only = capacity(idle)  # the most GPUs one job may span (feasibility's rule)
    jobs = []
    for i in range(draw(st.integers(1, 4))):
        n = draw(st.integers(1, with_loans))
        elastic = draw(st.booleans())
        lo = draw(st.integers(1 if n <= training_only else training_only + 1, n)) if elastic else n
        hi = draw(st.integers(n, with_loans + 2)) if elastic else n
        jobs.append(JobSpec(f"j{i}", float(draw(st.integers(0, 300))), n, float(draw(st.integers(60, 600))),
                            draw(st.sampled_from(["resnet50", "bert", "ncf"])), elastic, lo, hi))
    return cfg, jobs, serving


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixed_clusters())
@pytest.mark.slow
def test_every_policy_finishes_what_lyra_finishes_or_warns(case):
    """Every policy finishes each job ``lyra`` finishes, or warned that it can never start it; a
    policy that never borrows is not asked to where a job needs loaned servers (the command line
    warns about those traces, ``lyra_gym/model/feasibility.py``; fifo and sjf then block behind it)."""
    cfg, jobs, serving = case
    needs_loan = bool(check_feasibility(jobs, cfg).needs_loan)
    by_lyra, _ = run(jobs, "lyra", cfg, serving)
    for policy in POLICIES:
        if needs_loan and not borrows(policy):
            continue
        finished, warned = run(jobs, policy, cfg, serving)
        assert by_lyra <= finished | warned, (policy, sorted(by_lyra - finished - warned))
