"""tools/train_window_gap.py: train windows drawn as documented, the table by hand, the whole
command on the shipped Cluster-v2 agent against simulations run here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tools.train_window_gap import gap_rows, main, table, train_windows

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "agents" / "pretrained" / "cluster-v2-pollux"


@pytest.fixture(scope="module")
def sampler():
    from lyra_agents.suite import get_suite

    scenario = get_suite("v1").get("history")
    return scenario.sampler(scenario.build_trace(0))


def test_train_windows_are_distinct_seeded_and_inside_the_train_part(sampler):
    windows = train_windows(sampler, 6, seed=0, trace_seed=3)
    starts = [w.start_s for w in windows]
    assert starts == sorted(set(starts)) and len(starts) == 6
    assert all(w.split == "train" and w.start_s + w.length_s <= sampler.split_s for w in windows)
    assert all(w.start_s == sampler.train_starts[w.index] and w.warmup_s == sampler.warmup_s for w in windows)
    assert train_windows(sampler, 6, seed=0, trace_seed=3) == windows  # same seeds, same windows
    assert train_windows(sampler, 6, seed=0, trace_seed=4) != windows  # each trace its own draw
    rng = np.random.default_rng([0, 3])
    assert [w.index for w in windows] == sorted(rng.choice(len(sampler.train_starts), size=6, replace=False))


def test_a_window_count_the_trace_cannot_give_names_the_option(sampler):
    for count in (0, len(sampler.train_starts) + 1):
        with pytest.raises(ValueError, match="--train-windows"):
            train_windows(sampler, count, seed=0, trace_seed=0)


def test_the_table_gives_each_split_its_statistics(tmp_path):
    path = tmp_path / "gap.csv"
    path.write_text("split,trace_seed,window,start_s,jct_policy_s,jct_expert_s,ratio\n"
                    "train,0,5,0,8,10,0.8\ntrain,0,9,0,10,10,1.0\ntest,0,0,0,11,10,1.1\n")
    lines = table(path).splitlines()
    # mean of (0.8, 1.0): 0.9, bootstrap samples' means 0.8 / 0.9 / 1.0 (paired_interval's example)
    assert lines[2].startswith("| train | 2 |") and lines[2].endswith("| 0.900 [0.800, 1.000] |")
    assert lines[3] == "| test | 1 | 1.100 [1.100, 1.100] | 1.100 [1.100, 1.100] |"


def test_bad_options_are_one_line_errors(capsys):
    for argv in ([], ["run", "--out", "x.csv", "--trace-seeds", "1,a"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert "error:" in err and "Traceback" not in err


@pytest.mark.slow
def test_the_rows_are_the_agent_and_its_expert_simulated_on_those_windows():
    from lyra_agents.policy_scheduler import load_policy_scheduler
    from lyra_agents.suite import get_suite
    from lyra_gym.run.simulate import load_profile_set, simulate

    rows = gap_rows(str(SHIPPED), "history", [0], count=1, test=1, seed=0)
    assert [r["split"] for r in rows] == ["train", "test"]
    scenario = get_suite("v1").get("history")
    trace = scenario.build_trace(0)
    config = scenario.sim_config()
    profiles = load_profile_set(config)
    windows = {"train": train_windows(scenario.sampler(trace), 1, 0, 0)[0], "test": scenario.test_windows(trace)[0]}
    for row in rows:
        window = windows[row["split"]]
        assert (row["window"], row["start_s"]) == (window.index, window.start_s)
        expert = float(simulate(window.jobs(trace), "pollux+loan", config, seed=window.seed,
                                profiles=profiles).metrics["jct_mean_s"])
        agent = load_policy_scheduler(SHIPPED)
        agent.start_window(window)
        policy = float(simulate(window.jobs(trace), agent, config, seed=window.seed,
                                profiles=profiles).metrics["jct_mean_s"])
        assert (row["jct_expert_s"], row["jct_policy_s"]) == (round(expert, 3), round(policy, 3))
        assert row["ratio"] == round(policy / expert, 6)
