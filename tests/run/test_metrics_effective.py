"""Hand-computed honest metrics: effective usage, stall share, reclaim disruptions.

Profile ``TWO`` (below): model ``toy`` as in tests/toy.py (1 sample/s per V100,
0.5 per T4: speed(toy, t4) = 0.5) with a 20 s restart; model ``fast`` runs as
fast on a T4 as on a V100 (speed(fast, t4) = 1.0) with a 10 s restart. Both
have free all-reduce and speed 1 on the reference V100, so a job's effective
GPU-seconds equal its samples of work. With jobs of both models in the trace,
the capacity speed of a T4 is mean(0.5, 1.0) = 0.75.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lyra_gym.model.demand import DemandCurve
from lyra_gym.model.profiles import parse_profiles
from lyra_gym.run.metrics import JOB_COLUMNS, best_speeds, summarize, unfinished_warning
from lyra_gym.run.simulate import simulate
from lyra_gym.sim.engine import Engine
from tests.sim.test_engine_overheads import Script, step
from toy import config, job

_FREE = {"allreduce_intra_s": 0.0, "allreduce_inter_s": 0.0}
TWO = parse_profiles({
    "format": "lyra-gym-profiles/1",
    "metadata": {"reference_gpu": "v100"},
    "models": {
        "toy": {"local_batch": 1, "restart_overhead_s": 20, "gpus": {
            "v100": {"step_compute_s": 1.0, **_FREE}, "t4": {"step_compute_s": 2.0, **_FREE}}},
        "fast": {"local_batch": 1, "restart_overhead_s": 10, "gpus": {
            "v100": {"step_compute_s": 1.0, **_FREE}, "t4": {"step_compute_s": 1.0, **_FREE}}},
    },
})

# Server 0: training, 4 V100. Server 1: inference, 4 T4, needed by inference from t = 80.
# A (fast, 4 GPUs, 50 s -> 200 samples) on server 0: restart to 10, 4/s -> done at 60.
# B (toy, elastic 2..4, 2 GPUs x 100 s -> 200 samples) on loaned server 1 (2 T4 = 1/s):
#   restart 0..20; at 10 scaled out to 4 T4 (2/s) inside its restart: stalled until
#   max(20, 10 + 30) = 40; 2/s from 40 to 80 -> 80 samples. At 80 inference reclaims
#   server 1; B is moved to server 0 (free since 60; 4 V100 = 4/s): a migration (20 s)
#   and a reclaim disruption, stalled until 100; 120 samples at 4/s -> done at 130.
JOBS = [job("A", 0, 4, 50, model="fast"), job("B", 0, 2, 100, elastic=True, lo=2, hi=4)]
DEMAND = DemandCurve(np.array([0.0, 80.0]), np.array([0, 1]))
SCRIPT = [step(0, borrow=[1], A={0: 4}, B={1: 2}), step(10, B={1: 4}), step(80, give_back=[1], B={0: 4})]
CFG = config(gpus=4, inference=1, restart=None, rescale=30.0, migrate_s=20.0)

# GPU-seconds over [0, 130]:
#                       held                     stalled                   busy   effective
# A  (4 V100, 0-60)     240                      0-10: 40                  200    200 x 1.0
# B  (2 T4, 0-10)        20                      0-10: 20                    0      0
#    (4 T4, 10-80)      280                      10-40: 120                160    160 x 0.5 = 80
#    (4 V100, 80-130)   200                      80-100: 80                120    120 x 1.0
# total                 740                      260                       480    400
# effective: busy GPU-s x the job's speed on its GPUs / its model's speed on the cluster's fastest
# GPU type for it (issue 40 item 14), so every share is at most its unweighted twin.
# capacity (plain GPU-s): training 4 x 130 = 520; loaned server 4 x 80 = 320.
# inference busy: server 1 serves 80-130: 4 x 50 = 200 GPU-s, each counting 1.
# all GPUs: 8 x 130 = 1040.


def _simulate(cfg=CFG):
    return simulate(JOBS, Script(SCRIPT), cfg, seed=0, profiles=TWO, demand=DEMAND)


def test_toy_run_is_as_hand_computed():
    result = _simulate()
    rows = {r["job_id"]: r for r in result.jobs}
    assert rows["A"]["finish_time"] == pytest.approx(60)
    assert rows["B"]["finish_time"] == pytest.approx(130)
    m = result.metrics
    assert m["makespan_s"] == 130 and m["scale_outs"] == 1 and m["migrations"] == 1


def test_effective_usage_weights_gpu_types_and_excludes_stalls():
    m = _simulate().metrics
    assert m["gpu_usage_effective"] == pytest.approx(400 / (520 + 320))
    assert m["gpu_usage_effective_overall"] == pytest.approx((400 + 200) / 1040)
    # the unweighted keys are unchanged: (240 + 200 training + 300 loaned) / (520 + 4 x 80)
    assert m["gpu_usage_with_loaned"] == pytest.approx(740 / 840)
    assert m["gpu_usage_overall"] == pytest.approx((740 + 200) / (8 * 130))


def test_overhead_share_counts_gpu_seconds_held_while_stalled():
    assert _simulate().metrics["overhead_gpu_share"] == pytest.approx(260 / 740)


def test_best_speed_is_each_model_on_its_fastest_gpu_type_in_the_cluster():
    engine = Engine(JOBS, Script(SCRIPT), CFG, TWO, DEMAND, np.random.default_rng(0))
    assert best_speeds(engine) == {"fast": 1.0, "toy": 1.0}
    only_toy = Engine(JOBS[1:], Script([]), CFG, TWO, DEMAND, np.random.default_rng(0))
    assert best_speeds(only_toy) == {"toy": 1.0}


def test_a_move_off_a_reclaimed_server_is_a_reclaim_disruption():
    result = _simulate()
    assert result.metrics["reclaim_disruptions"] == 1
    assert "reclaim_disruptions" in JOB_COLUMNS
    assert {r["job_id"]: r["reclaim_disruptions"] for r in result.jobs} == {"A": 0, "B": 1}


def test_summarize_mid_run_integrates_running_jobs_without_changing_them():
    # Horizon 50: A holds 4 V100 0-50 (stalled 0-10): held 200, busy 160. B holds 2 T4 0-10
    # (stalled) and 4 T4 10-50 (stalled to 40): held 20 + 160 = 180, busy 40 -> effective 20.
    # Capacity: 4 x 50 training + 4 x 50 loaned = 400 GPU-s.
    cfg = dataclasses.replace(CFG, horizon_s=50.0)
    engine = Engine(JOBS, Script(SCRIPT), cfg, TWO, DEMAND, np.random.default_rng(0)).run()
    state = [(j.work_done, j.last_update, j.attained_gpu_s, j.busy_gpu_s) for j in engine.jobs]
    m = summarize(engine)
    assert m["jobs_unfinished"] == 2
    assert m["gpu_usage_effective"] == pytest.approx((160 + 20) / 400)
    assert m["overhead_gpu_share"] == pytest.approx((380 - 200) / 380)
    assert [(j.work_done, j.last_update, j.attained_gpu_s, j.busy_gpu_s) for j in engine.jobs] == state
    assert summarize(engine) | {"sim_wall_s": 0} == m | {"sim_wall_s": 0}
    assert unfinished_warning(m) == ("warning: 2 of 2 jobs unfinished at the end of the run; "
                                     "JCT and queuing statistics cover finished jobs only")
    assert unfinished_warning(_simulate().metrics) is None
    row = {"policy": "script", "seeds": 2, "jobs_total": 2, "jobs_unfinished": 0.5}  # a compare summary row
    assert unfinished_warning(row) == ("warning: script: 0.5 of 2 jobs unfinished at the end of the run "
                                       "(mean over seeds); JCT and queuing statistics cover finished jobs only")


# --- reclaim disruptions: scaled in, moved, preempted; once per job per plan ---------------
# Server 0: training, 8 V100. Servers 1, 2: inference, 8 T4 each, both needed from t = 100.
# S (elastic 2..4) on {0: 2, 1: 2}; M (2) on {1: 2}; P (4) on {1: 2, 2: 2}; Q (2) on {0: 2}.
RECLAIM_JOBS = [job("S", 0, 4, 1000, elastic=True, lo=2, hi=4), job("M", 0, 2, 1000),
                job("P", 0, 4, 1000), job("Q", 0, 2, 1000)]
RECLAIM_DEMAND = DemandCurve(np.array([0.0, 100.0]), np.array([0, 2]))
# S spans GPU types: allowed explicitly, whatever the config default
RECLAIM_CFG = dataclasses.replace(config(gpus=8, inference=2), horizon_s=200.0, allow_mixed_gpu_types=True)
RECLAIM_START = step(0, borrow=[1, 2], S={0: 2, 1: 2}, M={1: 2}, P={1: 2, 2: 2}, Q={0: 2})


def _disruptions(result):
    return {r["job_id"]: r["reclaim_disruptions"] for r in result.jobs}


def test_answered_reclaim_counts_each_disrupted_job_once():
    # At 100 the scheduler returns both servers: S scaled in to {0: 2}, M moved to {0: 2}
    # (a migration too), P preempted (it lost workers on two returned servers: still one).
    script = Script([RECLAIM_START, step(100, give_back=[1, 2], S={0: 2}, M={0: 2}, P=None)])
    cfg = RECLAIM_CFG
    result = simulate(RECLAIM_JOBS, script, cfg, seed=0, profiles=TWO, demand=RECLAIM_DEMAND)
    m = result.metrics
    assert (m["scale_ins"], m["migrations"], m["preemptions"]) == (1, 1, 1)
    assert m["reclaim_disruptions"] == 3 and m["inference_violations"] == 0
    assert _disruptions(result) == {"S": 1, "M": 1, "P": 1, "Q": 0}


def test_default_rule_reclaim_counts_disruptions_too():
    # Nobody answers: at 100 the engine returns both servers itself (2 violations). S keeps
    # its 2 training workers (scale-in); M and P are preempted.
    script = Script([RECLAIM_START])
    cfg = RECLAIM_CFG
    result = simulate(RECLAIM_JOBS, script, cfg, seed=0, profiles=TWO, demand=RECLAIM_DEMAND)
    m = result.metrics
    assert (m["scale_ins"], m["preemptions"], m["inference_violations"]) == (1, 2, 2)
    assert m["reclaim_disruptions"] == 3
    assert _disruptions(result) == {"S": 1, "M": 1, "P": 1, "Q": 0}


def test_goodput_usage_equals_effective_without_efficiency():
    m = _simulate().metrics  # neither model has a measured noise scale: E = 1 throughout
    assert m["gpu_usage_goodput"] == pytest.approx(m["gpu_usage_effective"])


@pytest.mark.parametrize("scaling, factor", [("fixed-local", 2 / 3), ("fixed-global", 1.0), ("throughput", 1.0)])
def test_goodput_usage_charges_statistical_efficiency(tmp_path, scaling, factor):
    """Toy ``lin`` (tests/model/test_scaling.py), phi = 2, B0 = 2: on 4 GPUs under fixed-local the batch
    is 4, so each GPU-second is worth E = (2 + 2) / (2 + 4) = 2/3 of one at B0."""
    from tests.model.test_scaling import LIN, Fixed, efficiency_file

    cfg = dataclasses.replace(config(training=1, gpus=4, rescale=0.0), scaling=scaling,
                              efficiency=efficiency_file(tmp_path))
    jobs = [job("J", 0, 2, 100, model="lin", elastic=True, lo=1, hi=4)]
    m = simulate(jobs, Fixed(4), cfg, seed=0, profiles=LIN, demand=DemandCurve.constant(0)).metrics
    assert m["gpu_usage_effective"] > 0
    assert m["gpu_usage_goodput"] == pytest.approx(factor * m["gpu_usage_effective"])
