"""tools/confident_deviations.py: the gate by hand, the table by hand, one-line errors, and the
gated policy against the plain policy and the expert simulated here (margin 0 and above every gap)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tools.confident_deviations import deviation_rows, gated, gated_scheduler, main, table

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "agents" / "pretrained" / "cluster-v2-pollux"
NEG = -np.inf


def test_the_gate_keeps_neutral_unless_the_best_value_leads_it_by_more_than_the_margin():
    log_probs = np.log(np.array([[0.5, 0.3, 0.2],     # neutral 1: best 0 leads by log(5/3) = 0.51
                                 [0.1, 0.1, 0.8],     # neutral 2 is the best: kept at any margin
                                 [0.9, 0.1, 1.0]]))   # neutral 1: best 0 leads by log 9 = 2.20 ...
    log_probs[2, 2] = NEG                             # ... value 2 masked
    neutral = np.array([1, 2, 1])
    assert gated(log_probs, neutral, 0.0).tolist() == [0, 2, 0]
    assert gated(log_probs, neutral, 0.6).tolist() == [1, 2, 0]
    assert gated(log_probs, neutral, 2.3).tolist() == [1, 2, 1]
    tied = np.array([[np.log(0.5), np.log(0.5), NEG]])
    assert gated(tied, np.array([1]), 0.0).tolist() == [1]  # a tie is no lead


def test_the_table_gives_each_margin_its_statistics(tmp_path):
    path = tmp_path / "dev.csv"
    path.write_text("margin,trace_seed,window,deviations,jct_policy_s,jct_expert_s,ratio\n"
                    "0.0,0,0,10,8,10,0.8\n0.0,1,0,20,10,10,1.0\n2.0,0,0,0,10,10,1.0\n2.0,1,0,0,10,10,1.0\n")
    lines = table(path).splitlines()
    # mean of (0.8, 1.0): 0.9, bootstrap samples' means 0.8 / 0.9 / 1.0 (paired_interval's example)
    assert lines[2].startswith("| 0 | 2 | 15.0 |") and lines[2].endswith("| 0.900 [0.800, 1.000] |")
    assert lines[3] == "| 2 | 2 | 0.0 | 1.000 [1.000, 1.000] | 1.000 [1.000, 1.000] |"


@pytest.mark.parametrize("argv", [[], ["run", "--out", "x.csv", "--margins", "0,a"],
                                  ["run", "--out", "x.csv", "--margins", "1,1"],
                                  ["run", "--out", "x.csv", "--margins", "-1"],
                                  [str(ROOT / "agents" / "pretrained" / "cluster-history-extras"), "--out", "x.csv"]])
def test_bad_options_and_a_model_that_is_not_masked_ppo_are_one_line_errors(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "error:" in err and "Traceback" not in err
    assert not (tmp_path / "x.csv").exists()


def push_preempt(agent, nats: float) -> None:
    """Raise every job slot's PREEMPT logit of ``agent``'s policy by ``nats``: a policy that deviates."""
    import torch

    from lyra_gym.envs.levers import LEVER_JOB_VALUES, PREEMPT

    bias = agent.model.policy.pi[-1].bias
    with torch.no_grad():
        bias[PREEMPT:agent.config.num_job_slots * LEVER_JOB_VALUES:LEVER_JOB_VALUES] += nats


@pytest.mark.slow
def test_margin_zero_is_the_plain_policy_and_a_margin_above_every_gap_is_the_expert():
    from lyra_agents.policy_scheduler import load_policy_scheduler
    from lyra_agents.suite import get_suite
    from lyra_gym.run.simulate import load_profile_set, simulate

    scenario = get_suite("v1").get("history")
    trace = scenario.build_trace(0)
    window = scenario.test_windows(trace)[0]
    config = scenario.sim_config()
    profiles = load_profile_set(config)

    def run(agent):
        if not isinstance(agent, str):
            agent.start_window(window)
        metrics = simulate(window.jobs(trace), agent, config, seed=window.seed, profiles=profiles).metrics
        return {k: v for k, v in metrics.items() if k != "sim_wall_s"}

    expert = run("pollux+loan")
    plain = load_policy_scheduler(SHIPPED)
    push_preempt(plain, 6.0)
    pushed = run(plain)
    assert pushed["preemptions"] > expert["preemptions"]  # the pushed policy deviates
    for margin, reference in ((0.0, pushed), (1000.0, expert)):
        agent = gated_scheduler(str(SHIPPED), margin)
        push_preempt(agent, 6.0)
        assert run(agent) == reference
        assert (agent.deviations > 0) == (margin == 0.0)
    between = gated_scheduler(str(SHIPPED), 1.0)
    push_preempt(between, 6.0)
    assert 0 < run(between)["preemptions"] < pushed["preemptions"]

    # the command's rows: the shipped policy (no push) and the expert on the same unit
    rows = deviation_rows(str(SHIPPED), "history", [0.0, 1000.0], trace_seeds=1, windows=1)
    shipped = run(load_policy_scheduler(SHIPPED))
    assert [(r["margin"], r["trace_seed"], r["window"]) for r in rows] == [(0.0, 0, 0), (1000.0, 0, 0)]
    assert rows[0]["jct_policy_s"] == round(shipped["jct_mean_s"], 3)
    assert rows[1]["jct_policy_s"] == rows[1]["jct_expert_s"] == round(expert["jct_mean_s"], 3)
    assert rows[1]["deviations"] == 0
