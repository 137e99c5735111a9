"""Headroom per scenario (agents/headroom.py): the isolated-job bound by hand and against real
runs, and the per-scenario summary from benchmark rows."""

from __future__ import annotations

import json
import math

import pytest

from lyra_agents.headroom import headroom, headroom_table, isolated_jct
from lyra_gym.model.config import config_from_dict
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.model.profiles import builtin_profiles, load_profiles
from lyra_gym.run.simulate import simulate
from lyra_gym.workloads.tracegen import generate_trace

# one model: 10 samples per step per worker; a V100 step 1 s of compute plus a ring all-reduce of
# 0.5 s x 2(n-1)/n inside a server; a T4 step 2 s; 10 s to (re)start
PROFILE = {"format": "lyra-gym-profiles/1", "metadata": {"reference_gpu": "v100"}, "models": {"resnet50": {
    "local_batch": 10, "restart_overhead_s": 10,
    "gpus": {"v100": {"step_compute_s": 1.0, "allreduce_intra_s": 0.5, "allreduce_inter_s": 1.0},
             "t4": {"step_compute_s": 2.0, "allreduce_intra_s": 0.5, "allreduce_inter_s": 1.0}}}}}


def _config(tmp_path, **extra):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(PROFILE))
    data = {"cluster": {"training": [{"count": 1, "gpu_type": "v100", "gpus_per_server": 8}],
                        "inference": {"count": 1, "gpu_type": "t4", "gpus_per_server": 8}},
            "scaling": "throughput", "profiles": str(path), **extra}
    return config_from_dict(data), load_profiles(path)


JOBS = [JobSpec("a", 0.0, 1, 100.0, "resnet50", False, 1, 1),
        JobSpec("b", 5.0, 2, 100.0, "resnet50", True, 1, 4)]


def test_isolated_bound_of_two_jobs_by_hand(tmp_path):
    config, profiles = _config(tmp_path)
    # a: 1 V100 is its only size: 100 s of work at the reference rate, plus the 10 s start
    # b: work = 100 s x its 2-GPU rate 2 x 10 / (1 + 0.5) = 1333.3 samples; fastest on 4 V100s of
    #    one server: 4 x 10 / (1 + 2 x 3/4 x 0.5) = 22.857 samples/s, so 58.33 s, plus 10 s
    a, b = isolated_jct(JOBS, config, profiles)
    assert a == pytest.approx(110.0)
    assert b == pytest.approx(10.0 + 100.0 * (20 / 1.5) / (40 / 1.75))
    # a given restart overhead replaces the profile's
    config, profiles = _config(tmp_path, overheads={"restart_s": 0.0})
    assert isolated_jct(JOBS, config, profiles)[0] == pytest.approx(100.0)


def test_isolated_bound_is_not_computed_under_adaptive_batches(tmp_path):
    config, profiles = _config(tmp_path, scaling="adaptive")
    assert all(math.isnan(v) for v in isolated_jct(JOBS, config, profiles))


@pytest.mark.parametrize("policy", ["lyra", "pollux", "fifo", "gandiva"])
def test_no_job_finishes_faster_than_its_isolated_bound(policy):
    jobs = [j for j in generate_trace("small-1d", 3) if j.submit_time < 6 * 3600]
    config = config_from_dict({"cluster": {"training": [{"count": 2, "gpu_type": "v100"},
                                                        {"count": 1, "gpu_type": "a100"}]}})
    bound = isolated_jct(jobs, config, builtin_profiles())
    result = simulate(jobs, policy, config, seed=1, profiles=builtin_profiles())
    jct = {row["job_id"]: row["jct_s"] for row in result.jobs}
    order = sorted(jobs, key=lambda j: j.submit_time)
    assert all(jct[j.job_id] is None or jct[j.job_id] >= b - 1e-6 for j, b in zip(order, bound))


def _row(policy, seed, window, vs_lyra, kind="window"):
    return {"kind": kind, "policy": policy, "run": "", "scenario": "s", "trace_seed": seed, "window": window,
            "jct_mean_s": 100.0 * vs_lyra, "jct_vs_lyra": vs_lyra}


def test_headroom_by_hand():
    rows = [_row("lyra", 0, 0, 1.0), _row("lyra", 1, 0, 1.0),
            _row("a", 0, 0, 0.9), _row("a", 1, 0, 1.2),
            _row("b", 0, 0, 1.1), _row("b", 1, 0, 0.8),
            _row("random", 0, 0, 1.5), _row("random", 1, 0, 1.5),
            _row("isolated-bound", 0, 0, 0.5, "bound"), _row("isolated-bound", 1, 0, 0.7, "bound")]
    (entry,) = headroom(rows, ["lyra", "a", "b"])
    assert entry["spread"] == pytest.approx({"lyra": 1.0, "a": 1.05, "b": 0.95})
    assert (entry["best"], entry["units"]) == ("b", 2)
    assert entry["best_vs_lyra"] == pytest.approx(0.95) and entry["worst_vs_lyra"] == pytest.approx(1.05)
    assert entry["per_window_best"] == pytest.approx((0.9 + 0.8) / 2)  # hindsight: a on seed 0, b on seed 1
    assert entry["isolated_bound"] == pytest.approx(0.6)
    text = headroom_table([entry])
    assert "0.850" in text and "0.600" in text and "random" not in text
