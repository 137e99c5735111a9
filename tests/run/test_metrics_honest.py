"""Issue 40 items 14-16: metrics that lied.

14. ``gpu_usage_effective`` (and the headline ``gpu_usage_effective_overall``) came out above 1:
    capacity was weighted by the mean speed of the trace's models, busy time by each job's own.
    Now each job's GPU-second counts its speed relative to its model's best on the cluster, over
    plain GPU-seconds of capacity: a share, in [0, 1] by construction.
15. Invalid actions of an agent or observation policy were dropped silently: now counted in the
    metrics (``invalid_actions``) and warned about.
16. A preempted job's time back in the queue was in ``queue_total_mean_s`` only (``tiresias``
    showed queue 0 while preempting): the total queued time now has its percentiles too.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lyra_gym.model.config import ClusterConfig, OverheadConfig, ServerGroup, SimConfig
from lyra_gym.model.demand import DemandCurve
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.model.profiles import builtin_profiles
from lyra_gym.run.metrics import best_speeds, invalid_actions_warning
from lyra_gym.run.simulate import build_engine, simulate
from lyra_gym.sim import scheduler as registry
from tests.run.test_metrics_effective import CFG, DEMAND, JOBS, SCRIPT, TWO
from tests.sim.test_engine_overheads import Script, step
from toy import TOY, config, job, run


# ----------------------------------------------------------------------------- 14: effective usage
def _t4_server(**kwargs) -> SimConfig:
    """One training server of 8 T4s, no inference servers, no restart cost, a 1000 s horizon."""
    return SimConfig(cluster=ClusterConfig(training=(ServerGroup(1, "t4", 8),), inference=ServerGroup(0, "t4", 8)),
                     overheads=OverheadConfig(restart_s=0.0), horizon_s=1000.0, **kwargs)


# The issue's case: 8 one-GPU resnet18 jobs fill the server for the whole run; a bert job waits
# behind them. Before, T4 capacity counted mean(speed(resnet18, t4), speed(bert, t4)) =
# mean(0.54, 0.3) while the busy GPUs counted resnet18's 0.54: 1.285 x the busy share.
ISSUE_JOBS = [JobSpec(f"r{i}", 0.0, 1, 1e5, "resnet18", False, 1, 1) for i in range(8)] + [
    JobSpec("zb", 1.0, 1, 100.0, "bert", False, 1, 1)]


@pytest.mark.parametrize("policy", ["fifo", "sjf", "lyra", "tiresias", "pollux"])
def test_a_full_t4_server_is_used_at_most_once(policy):
    m = simulate(ISSUE_JOBS, policy, _t4_server(), seed=0).metrics
    # 8 GPUs x 1000 s busy, each on the cluster's only (so fastest) type: 8000 / 8000
    assert m["makespan_s"] == 1000.0
    assert m["gpu_usage_effective"] == 1.0
    assert m["gpu_usage_effective_overall"] == 1.0
    assert m["gpu_usage_goodput"] == pytest.approx(1.0)


# The toy run of tests/run/test_metrics_effective.py (server 0: training, 4 V100; server 1: inference,
# 4 T4, needed from t = 80). A (fast, 4 V100, 0-60, stalled 0-10): busy 200 GPU-s at speed 1 =
# best(fast) 1 -> 200. B (toy): busy 160 GPU-s on 4 T4 at 0.5 of best(toy) = 1 (the V100) -> 80;
# 120 on 4 V100 -> 120. Capacity: training 4 x 130 = 520 GPU-s + loaned 4 x 80 = 320. Inference
# busy 4 x 50 = 200 GPU-s; all GPUs 8 x 130 = 1040.


def test_effective_usage_counts_each_job_against_its_best_pace_on_the_cluster():
    m = simulate(JOBS, Script(SCRIPT), CFG, seed=0, profiles=TWO, demand=DEMAND).metrics
    assert m["gpu_usage_effective"] == pytest.approx(400 / 840)
    assert m["gpu_usage_goodput"] == pytest.approx(400 / 840)  # E = 1: no noise scale measured
    assert m["gpu_usage_effective_overall"] == pytest.approx((400 + 200) / 1040)
    assert m["gpu_usage_effective"] <= m["gpu_usage_with_loaned"] == pytest.approx(740 / 840)
    assert m["gpu_usage_effective_overall"] <= m["gpu_usage_overall"]


def test_best_speed_is_the_fastest_type_of_the_cluster_for_the_model():
    def best(cfg, jobs=JOBS):
        return best_speeds(build_engine(jobs, Script([]), cfg, 0, TWO, DemandCurve.constant(0)))

    assert best(CFG) == {"fast": 1.0, "toy": 1.0}
    t4_only = SimConfig(cluster=ClusterConfig(training=(ServerGroup(1, "t4", 4),), inference=ServerGroup(0, "v100", 4)))
    assert best(t4_only) == {"fast": 1.0, "toy": 0.5}  # no inference servers: their V100 type does not count
    with_v100s = dataclasses.replace(t4_only, cluster=ClusterConfig(training=(ServerGroup(1, "t4", 4),),
                                                                    inference=ServerGroup(1, "v100", 4)))
    assert best(with_v100s) == {"fast": 1.0, "toy": 1.0}


def test_mid_run_effective_usage_of_running_jobs():
    # Horizon 50: A busy 160 GPU-s (x 1); B busy 40 on T4 (x 0.5) -> 180; capacity 4 x 50 + 4 x 50 = 400
    cfg = dataclasses.replace(CFG, horizon_s=50.0)
    m = simulate(JOBS, Script(SCRIPT), cfg, seed=0, profiles=TWO, demand=DEMAND).metrics
    assert m["gpu_usage_effective"] == pytest.approx(180 / 400)


GPU_TYPES = ("v100", "t4", "a100")
MODELS = tuple(sorted(builtin_profiles().models))
POLICIES = ("fifo", "sjf", "tiresias", "tiresias+loan", "gandiva", "gandiva+loan", "lyra", "lyra-noloan",
            "lyra-noelastic", "pollux", "baseline-min")


@st.composite
def _groups(draw):
    return tuple(ServerGroup(draw(st.integers(1, 2)), draw(st.sampled_from(GPU_TYPES)),
                             draw(st.sampled_from((1, 2, 4, 8)))) for _ in range(draw(st.integers(1, 2))))


@st.composite
def _job(draw, index: int):
    gpus = draw(st.sampled_from((1, 2, 4, 8)))
    elastic = draw(st.booleans())
    lo = draw(st.integers(1, gpus)) if elastic else gpus
    hi = draw(st.sampled_from((gpus, 2 * gpus))) if elastic else gpus
    return JobSpec(f"j{index}", draw(st.floats(0, 3600).map(round)), gpus, draw(st.floats(30, 3600)),
                   draw(st.sampled_from(MODELS)), elastic, lo, hi)


@st.composite
def _run(draw):
    cluster = ClusterConfig(training=draw(_groups()), inference=ServerGroup(
        draw(st.integers(0, 2)), draw(st.sampled_from(GPU_TYPES)), draw(st.sampled_from((4, 8)))))
    cfg = SimConfig(cluster=cluster, horizon_s=draw(st.sampled_from((1800.0, 20_000.0))),
                    allow_mixed_gpu_types=draw(st.booleans()),
                    scaling=draw(st.sampled_from(("fixed-local", "fixed-global", "throughput"))))
    jobs = [draw(_job(i)) for i in range(draw(st.integers(1, 8)))]
    return sorted(jobs, key=lambda j: j.submit_time), cfg, draw(st.sampled_from(POLICIES)), draw(st.integers(0, 3))


#: every share of a capacity in the metrics (goodput is not one: E > 1 below a job's reference batch)
SHARES = ("gpu_usage_training", "gpu_usage_with_loaned", "gpu_usage_overall", "gpu_usage_effective",
          "gpu_usage_effective_overall", "overhead_gpu_share", "preempted_job_share")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_run())
def test_every_usage_share_is_between_0_and_1_on_random_runs(case):
    jobs, cfg, policy, seed = case
    m = simulate(jobs, policy, cfg, seed=seed).metrics
    for key in SHARES:
        assert m[key] is None or 0.0 <= m[key] <= 1.0, (key, m[key])
    if m["makespan_s"] > 0:
        assert m["gpu_usage_effective"] <= m["gpu_usage_with_loaned"]
        assert m["gpu_usage_effective_overall"] <= m["gpu_usage_overall"]


# ----------------------------------------------------------------------------- 15: invalid actions
_ASKED: list[int] = []


def out_of_range_policy():
    """An observation policy (Elastic-v1, one job slot) whose every action is out of range (7 of 5
    levels); counts how often it is asked."""
    def policy(obs):
        _ASKED.append(1)
        return np.array([7])
    policy.env_id = "LyraGym/Elastic-v1"
    policy.env_kwargs = {"num_job_slots": 1, "num_server_slots": 0}
    return policy


def neutral_policy():
    """The same, always the neutral level (2): never invalid."""
    def policy(obs):
        return np.array([2])
    policy.env_id = "LyraGym/Elastic-v1"
    policy.env_kwargs = {"num_job_slots": 1, "num_server_slots": 0}
    return policy


SMALL = [job("a", 0, 2, 100), job("b", 50, 4, 100), job("c", 60, 2, 30)]


def test_invalid_actions_of_an_observation_policy_are_counted_in_the_metrics():
    _ASKED.clear()
    result = run(SMALL, f"policy:{__name__}:out_of_range_policy", config(gpus=4))
    m = result.metrics
    # one dimension (the job slot) per decision the policy was asked, each out of range
    assert len(_ASKED) > 1 and m["invalid_actions"] == len(_ASKED)
    assert invalid_actions_warning({"policy": result.policy, **m}) == (
        f"warning: policy:{__name__}:out_of_range_policy: {len(_ASKED)} invalid actions (out of range or masked), "
        f"each run as the neutral action (a no-op); see invalid_actions in the metrics")
    assert m["jobs_finished"] == 3  # the neutral action is the heuristic's own: every job runs


def test_a_valid_policy_and_a_heuristic_report_no_invalid_action():
    m = run(SMALL, f"policy:{__name__}:neutral_policy", config(gpus=4)).metrics
    assert m["invalid_actions"] == 0 and invalid_actions_warning(m) is None
    assert run(SMALL, "fifo", config(gpus=4)).metrics["invalid_actions"] == 0


def test_the_compare_summary_carries_invalid_actions():
    from lyra_gym.harness.report import summarize_runs

    runs = [run(SMALL, f"policy:{__name__}:out_of_range_policy", config(gpus=4), seed=s) for s in (0, 1)]
    row = summarize_runs(runs)
    assert row["invalid_actions"] == np.mean([r.metrics["invalid_actions"] for r in runs]) > 0
    assert "warning: " in invalid_actions_warning(row) and "(mean over seeds)" in invalid_actions_warning(row)


def test_an_env_episode_reports_its_invalid_actions_in_final_metrics(tmp_path):
    import gymnasium as gym

    trace = tmp_path / "trace.csv"
    trace.write_text("job_id,submit_time,num_gpus,duration,model,elastic,min_gpus,max_gpus\n"
                     + "".join(f"j{i},{i * 600.0},2,300,resnet50,0,,\n" for i in range(12)))
    env = gym.make("LyraGym/Elastic-v1", trace=str(trace), window_s=3600.0, num_job_slots=2).unwrapped
    env.reset(seed=0)
    steps = 0
    while True:
        steps += 1
        _, _, terminated, truncated, info = env.step(np.array([9, 9]))  # both dimensions out of range
        if terminated or truncated:
            break
    assert info["final_metrics"]["invalid_actions"] == 2 * steps == info["invalid_actions_total"]


def test_simulate_counts_the_invalid_actions_the_env_counts():
    """The same out-of-range policy on a test window: the env's episode and ``simulate`` with the
    policy as a scheduler count the same invalid actions."""
    import gymnasium as gym

    from lyra_agents.evaluate import evaluate_scheduler, rollout
    from lyra_agents.observation_policy import load_observation_policy

    env = gym.make("LyraGym/Elastic-v1", trace="small-1d", window_s=3 * 3600.0, num_job_slots=1,
                   num_server_slots=0).unwrapped
    in_env = rollout(env, lambda e, obs: np.array([7]), 0)
    scheduler = load_observation_policy(f"{__name__}:out_of_range_policy")
    in_engine = evaluate_scheduler(scheduler, env, [0])[0]
    assert in_env["invalid_actions"] == in_engine["invalid_actions"] > 0
    assert in_env["jct_mean_s"] == in_engine["jct_mean_s"]


# ----------------------------------------------------------------------------- 16: time queued
def test_tiresias_time_back_in_the_queue_counts_as_queuing():
    # One V100; toy speed 1 sample/s; tiresias with one threshold at 100 GPU-s, ticks of 10 s.
    # A (300 s) runs from 0 and drops to the low queue at 100. B (50 s) arrives at 150 in the top
    # queue and preempts A: B runs 150-200; A runs again at 200 and finishes 350.
    # First-start waits: A 0, B 0. Time queued in all: A 200 - 150 = 50, B 0.
    tiresias = registry.make("tiresias", thresholds=(100.0,), tick_interval=10.0)
    result = run([job("A", 0, 1, 300), job("B", 150, 1, 50)], tiresias, config(gpus=1))
    m = result.metrics
    assert m["preemptions"] == 1
    assert {r["job_id"]: r["queue_total_s"] for r in result.jobs} == {"A": 50.0, "B": 0.0}
    assert (m["queue_mean_s"], m["queue_p95_s"]) == (0.0, 0.0)
    assert (m["queue_total_mean_s"], m["queue_total_p50_s"], m["queue_total_p95_s"], m["queue_total_p99_s"]) == (
        25.0, 25.0, 47.5, 49.5)


def test_scripted_preemption_total_queue_is_as_hand_computed():
    # One 4-V100 server. A (4 GPUs, 100 s: 400 samples) runs 0-30 (120 samples), is preempted for
    # B (4 GPUs, 50 s) which waited 0-30 and runs 30-80; A runs again 80-150.
    script = Script([step(0, A={0: 4}), step(30, A=None, B={0: 4}), step(80, A={0: 4})])
    result = run([job("A", 0, 4, 100), job("B", 0, 4, 50)], script, config(gpus=4))
    m = result.metrics
    assert {r["job_id"]: (r["queue_s"], r["queue_total_s"], r["finish_time"]) for r in result.jobs} == {
        "A": (0.0, 50.0, 150.0), "B": (30.0, 30.0, 80.0)}
    assert (m["queue_mean_s"], m["queue_total_mean_s"], m["queue_total_p95_s"]) == (15.0, 40.0, 49.0)


PREEMPTIVE = [job(f"j{i}", 40.0 * i, 1 + i % 3, 200.0 + 90 * (i % 4), elastic=i % 2 == 1,
                  lo=1 if i % 2 else None, hi=4 if i % 2 else None) for i in range(10)]


@pytest.mark.parametrize("policy", sorted(p for p in registry.available() if ":" not in p))
def test_every_policy_counts_all_time_queued(policy):
    """The total queued time equals the integral of the queue length (the timeline), whoever
    preempts or suspends; the first-start wait is at most it, equal without stops."""
    cfg = config(gpus=4, training=2, inference=1)
    demand = DemandCurve(np.array([0.0, 300.0, 900.0]), np.array([0, 1, 0]))
    result = simulate(PREEMPTIVE, policy, cfg, seed=0, profiles=TOY, demand=demand, record_timeline=True)
    m, rows = result.metrics, result.jobs
    assert m["jobs_unfinished"] == 0
    assert sum(r["queue_total_s"] for r in rows) == pytest.approx(result.timeline.integral("queued"))
    assert m["queue_total_mean_s"] == pytest.approx(np.mean([r["queue_total_s"] for r in rows]))
    assert all(r["queue_total_s"] >= r["queue_s"] for r in rows)
    if m["preemptions"] == m["suspensions"] == 0:
        assert m["queue_total_mean_s"] == pytest.approx(m["queue_mean_s"])



# ----------------------------------------------------------------------------- 15, 16: the command line
# These need lyra_gym/cli/app.py to show ``queue_total_*`` and ``invalid_actions`` in its tables
# (TABLE_KEYS) and to print invalid_actions_warning beside unfinished_warning.
CLI_TRACE = "job_id,submit_time,num_gpus,duration,model,elastic,min_gpus,max_gpus\n" + "".join(
    f"j{i},{i * 60.0},{1 + i % 4},{300 + 60 * i},resnet50,0,,\n" for i in range(8))


def _cli(tmp_path, monkeypatch, *args: str) -> tuple[int, str, str]:
    import contextlib
    import io

    from lyra_gym.cli.app import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "trace.csv").write_text(CLI_TRACE)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*args, "--trace", "trace.csv"])
    return code, out.getvalue(), err.getvalue()


def test_simulate_shows_counts_and_warns_about_invalid_actions_in_one_line(tmp_path, monkeypatch):
    import json

    policy = f"policy:{__name__}:out_of_range_policy"
    code, out, err = _cli(tmp_path, monkeypatch, "simulate", "--policy", policy, "--out", "run")
    count = json.loads((tmp_path / "run" / "metrics.json").read_text())["invalid_actions"]
    assert code == 0 and count > 0
    shown = [line.split()[0] for line in out.splitlines() if line.split()]  # metrics down, one a line
    assert "invalid_actions" in shown and "queue_total_mean_s" in shown
    warned = [line for line in err.splitlines() if "invalid actions" in line]
    assert warned == [f"lyra-gym: warning: {policy}: {count} invalid actions (out of range or masked), each run "
                      f"as the neutral action (a no-op); see invalid_actions in the metrics"]


def test_compare_table_and_summary_show_total_queuing_and_invalid_actions(tmp_path, monkeypatch):
    import json

    policy = f"policy:{__name__}:out_of_range_policy"
    code, out, err = _cli(tmp_path, monkeypatch, "compare", "--policies", f"fifo,{policy}", "--seeds", "0,1",
                          "--out", "cmp", "--no-plots", "--jobs", "1")
    assert code == 0
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.split()}
    assert "queue_total_mean_s" in rows and "queue_total_p95_s" in rows and rows["invalid_actions"][0] == "0"
    summary = {r["policy"]: r for r in json.loads((tmp_path / "cmp" / "summary.json").read_text())}
    assert summary["fifo"]["invalid_actions"] == 0 and summary[policy]["invalid_actions"] > 0
    assert summary["fifo"]["queue_total_p95_s"] is not None
    assert sum("invalid actions (mean over seeds)" in line for line in err.splitlines()) == 1
