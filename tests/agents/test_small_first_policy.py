"""Benchmark policy ``small-first`` (lyra_agents.small_first): the rule of
lyra_agents.experts.small_first_action played through the engine, and its public name."""

import csv
import dataclasses

import gymnasium as gym
import numpy as np
import pytest

from lyra_agents import benchmark
from lyra_agents.config import TrainConfig
from lyra_agents.evaluate import evaluate_scheduler
from lyra_agents.experts import small_first_action
from lyra_agents.small_first import SMALL_FIRST, SmallFirstScheduler


class _Recording(SmallFirstScheduler):
    """SmallFirstScheduler that keeps every action it takes."""

    def __init__(self):
        super().__init__()
        self.actions = []

    def act(self, obs, masks):
        action = super().act(obs, masks)
        self.actions.append(np.array(action))
        return action


def test_the_scheduler_takes_small_first_actions_at_every_step_of_a_cluster_v1_rollout():
    config = dataclasses.replace(TrainConfig(), window_s=6 * 3600.0)  # a short window, the scheduler's K, M, B
    env = gym.make(config.env_id, **config.env_kwargs()).unwrapped
    env.reset(options={"split": "test", "window": 0})
    expected, neutral, done = [], [], False
    while not done:
        action = small_first_action(env)
        expected.append(action)
        neutral.append(env.codec.neutral(env.slots))
        _, _, term, trunc, info = env.step(action)
        done = term or trunc
    scheduler = _Recording()
    rows = evaluate_scheduler(scheduler, env, [0])
    assert len(expected) > 10 and len(scheduler.actions) == len(expected)
    for step, (got, want) in enumerate(zip(scheduler.actions, expected)):
        assert np.array_equal(got, want), f"step {step}"
    assert sum(not np.array_equal(a, n) for a, n in zip(expected, neutral)) > 1  # the rule set job levels
    assert rows[0]["jct_mean_s"] == info["final_metrics"]["jct_mean_s"]


@pytest.mark.slow
def test_small_first_runs_by_name_in_the_benchmark_as_its_import_spec_does(tmp_path, capsys):
    out = tmp_path / "bench.csv"
    spec = "lyra_agents.small_first:SmallFirstScheduler"
    assert benchmark.main(["--suite", "v1", "--scenarios", "history", "--windows", "1", "--reps", "50", "--quiet",
                           "--policies", f"lyra,{SMALL_FIRST},{spec}", "--out", str(out)]) == 0
    assert SMALL_FIRST in capsys.readouterr().out
    rows = [r for r in csv.DictReader(out.open()) if r["kind"] == "window"]
    jct = {(r["policy"], r["trace_seed"]): float(r["jct_mean_s"]) for r in rows}
    seeds = {s for (p, s) in jct if p == SMALL_FIRST}
    assert len(seeds) == 2  # suite v1's two trace seeds, one window each
    for seed in seeds:
        assert jct[SMALL_FIRST, seed] == jct[spec, seed]  # the name runs the class, afresh per window
        assert jct[SMALL_FIRST, seed] != jct["lyra", seed]


def test_an_unknown_policy_lists_small_first():
    with pytest.raises(benchmark.BenchmarkError, match="random, sjf, small-first, tiresias"):
        benchmark.resolve_policies(["small-frist"], [], 0)
