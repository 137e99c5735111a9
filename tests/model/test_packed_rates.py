"""The batched goodput path of a new progress part: ``ScalingModel.packed_rates`` and
``ClusterView.goodputs`` give, for every number of workers, the doubles of ``packed_rate`` at the
rule's global batch and of ``ClusterView.goodput`` (the per-worker calls they replace).

Each side runs on its own copy of the profiles (a ScalingModel's memos live on its profile set),
so no answer is read back from the other side's memo.
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path

import numpy as np
import pytest

from lyra_gym.model.efficiency import builtin_efficiency
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.model.profiles import builtin_profiles, load_profiles
from lyra_gym.model.scaling import BATCH_LIMITS, NOISE_SCALE_RULES, SCALING_RULES, ScalingModel
from lyra_gym.run.simulate import build_engine
from lyra_gym.sim import scheduler as registry
from lyra_gym.workloads.tracegen import generate_trace

ROOT = Path(__file__).resolve().parents[2]
PROFILES = {"builtin": builtin_profiles, "pollux-t4": lambda: load_profiles(ROOT / "traces" / "pollux-t4-profile.json")}


def _bits(rates: list[float]) -> bytes:
    return np.array(rates, dtype=np.float64).tobytes()


@pytest.mark.parametrize("profiles_name", PROFILES)
@pytest.mark.parametrize("rule, noise_scale, batch_limit",
                         list(itertools.product(SCALING_RULES, NOISE_SCALE_RULES, BATCH_LIMITS)))
@pytest.mark.sample(6)
def test_packed_rates_are_packed_rate_per_worker(profiles_name, rule, noise_scale, batch_limit):
    profiles = PROFILES[profiles_name]()
    batched, single = (ScalingModel(copy.deepcopy(profiles), builtin_efficiency(), rule, noise_scale, batch_limit)
                       for _ in range(2))
    checked = 0
    for model in profiles.models:
        for gpu_type, gpus, batch_size, part in itertools.product(sorted(profiles.model(model).gpus), (1, 3, 8),
                                                                  (None, 96), (0, 13, 19)):
            spec = JobSpec(f"{model}-{gpus}", 0.0, gpus, 3600.0, model, True, 1, 16, batch_size)
            b0 = single.initial_batch(spec)
            for per_server, chosen in ((8, b0), (4, 2.5 * b0)):
                low = 1 + part % 3
                expected = [single.packed_rate(spec, b0, w, gpu_type, per_server,
                                               single.global_batch(spec, b0, w, chosen), part) for w in range(low, 20)]
                got = batched.packed_rates(spec, b0, low, 20, gpu_type, per_server, chosen, part)
                assert _bits(got) == _bits(expected), (model, gpu_type, gpus, batch_size, part, per_server)
                checked += 1
    assert checked == 3 * 2 * 3 * 2 * sum(len(profiles.model(model).gpus) for model in profiles.models)


@pytest.mark.parametrize("scaling, policy", [("fixed-local", "lyra"), ("fixed-global", "lyra"),
                                             ("throughput", "lyra"), ("adaptive", "pollux")])
@pytest.mark.sample(2)
def test_view_goodputs_are_goodput_per_worker(scaling, policy):
    """At real decision points (Pollux chooses batches under the adaptive rule), for queued and
    running jobs at their progress: every worker count, both GPU types."""
    from lyra_gym.model.config import SimConfig

    jobs = generate_trace("bench-15d", 3)[:120]
    engines = [build_engine(jobs, registry.make(policy), SimConfig(scaling=scaling), 0,
                            copy.deepcopy(builtin_profiles())) for _ in range(2)]
    for engine in engines:
        engine.begin()
    checked = decisions = 0
    while all(engine.next_decision() for engine in engines) and decisions < 40:
        views = [engine.view for engine in engines]
        for job in itertools.chain(views[0].queued_jobs(), views[0].running_jobs()):
            twin = views[1].job(job.id)
            for gpu_type, per_server in (("v100", 8), ("t4", 4)):
                got = views[0].goodputs(job, 1, 24, gpu_type, per_server)
                assert _bits(got) == _bits([views[1].goodput(twin, w, gpu_type, per_server) for w in range(1, 24)])
                checked += 1
        for engine, view in zip(engines, views):
            engine.submit(engine.scheduler.decide(view))
        decisions += 1
    assert checked > 100


def test_progress_bin_is_the_min_of_before():
    """``progress_bin`` without the ``min`` call: the same part for every (done, total), at and
    around each part's edge, past the end, before the start and for no work."""
    from lyra_gym.model.scaling import PROGRESS_BINS, progress_bin

    rng = np.random.default_rng(7)
    totals = [0.0, -1.0, 1.0, 3.0, 7e5, 1e-300, 1e300, *rng.uniform(1.0, 1e9, 40).tolist()]
    for total in totals:
        edges = [total * k / PROGRESS_BINS for k in range(PROGRESS_BINS + 2)]
        dones = [*edges, *np.nextafter(edges, -np.inf).tolist(), *np.nextafter(edges, np.inf).tolist(),
                 *(rng.uniform(-0.1, 1.2, 60) * total).tolist(), -total, 0.0]
        for done in dones:
            before = PROGRESS_BINS - 1 if total <= 0 else min(PROGRESS_BINS - 1, int(done / total * PROGRESS_BINS))
            assert progress_bin(done, total) == before, (done, total)
