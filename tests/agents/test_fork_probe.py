"""The fork probe (``python -m lyra_agents.fork_probe``, issue 38 item 3) on a tiny config: the
expert's own action changes nothing (delta exactly 0), a fork's delta is what replaying the whole
episode from reset with that one action changed gives, ``level`` moves one valid dimension, the
run is deterministic, and bad arguments are one clear error."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from lyra_agents import fork_probe
from lyra_agents.fork_probe import COLUMNS, alternative, env_settings, make_env, probe

ROOT = Path(__file__).resolve().parents[2]
#: a contended cluster, 2 h windows, 8 job slots: a few hundred decisions in all
TINY = """\
name: tiny-probe
env_id: LyraGym/Cluster-v1
sim_config: {config}
window_s: 7200.0
warmup_s: 3600.0
num_job_slots: 8
num_server_slots: 2
"""


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("probe") / "tiny.yaml"
    path.write_text(TINY.format(config=ROOT / "traces" / "training" / "contended-history.yaml"))
    return path


@pytest.fixture(scope="module")
def env(config):
    return make_env(*env_settings(str(config), None, None))


def full_return(env, seed: int, step: int | None = None, action=None) -> float:
    """The return of the episode of reset seed ``seed`` under the expert, with ``action`` played at
    decision ``step`` instead (no fork: replayed from reset)."""
    env.reset(seed=seed)
    total, t = 0.0, 0
    while not (env.done or env.episode.truncated):
        total += env.step(action if t == step else env.expert_action())[1]
        t += 1
    return total


def test_the_expert_s_own_action_changes_nothing_and_a_fork_agrees_with_a_replay(env):
    forks = probe(env, 4, 7, ["neutral", "random", "level"])
    assert len(forks) == 12 and {f.state for f in forks} == {0, 1, 2, 3}
    assert all(f.delta_return == 0.0 for f in forks if f.kind == "neutral")  # exactly
    assert all(f.delta_job_hours == f.delta_return for f in forks)  # jct reward, 3600 s per unit
    # a random action at the state of state 0, forked as the probe does and replayed from reset
    first = forks[0]
    env.reset(seed=first.episode_seed)
    for _ in range(first.step):
        env.step(env.expert_action())
    action = alternative(env, "random", np.random.default_rng(0))[0]
    replayed = full_return(env, first.episode_seed, first.step, action) - full_return(env, first.episode_seed)
    assert probe_one(env, first.episode_seed, first.step, action) == pytest.approx(replayed, abs=1e-9)
    assert replayed != 0  # the check has something to compare


def probe_one(env, seed: int, step: int, action) -> float:
    """The change of return of ``action`` at ``step`` as the probe computes it (fork, then expert)."""
    env.reset(seed=seed)
    rewards = []
    while not (env.done or env.episode.truncated):
        rewards.append(env.step(env.expert_action())[1])
    env.reset(seed=seed)
    for _ in range(step):
        env.step(env.expert_action())
    return fork_probe.rest_of_episode(env.fork(), action)[0] - sum(rewards[step:], 0.0)


def test_level_moves_one_valid_dimension_to_another_valid_value(env):
    env.reset(seed=3)
    for _ in range(5):
        env.step(env.expert_action())
    expert = env.expert_action()
    action, dimension, choice = alternative(env, "level", np.random.default_rng(1))
    assert choice == 1 and np.flatnonzero(action != expert).tolist() == [dimension]
    start = int(np.sum(env.action_space.nvec[:dimension]))
    assert env.action_masks()[start + action[dimension]]


@pytest.mark.slow
def test_the_cli_writes_one_row_per_fork_the_same_for_the_same_seed(config, tmp_path, capsys):
    outs = [tmp_path / "a.csv", tmp_path / "b.csv"]
    for out in outs:
        assert fork_probe.main(["--config", str(config), "--states", "3", "--seed", "2", "--kinds",
                                "neutral,level", "--out", str(out)]) == 0
    assert outs[0].read_bytes() == outs[1].read_bytes()
    rows = list(csv.DictReader(outs[0].open()))
    assert len(rows) == 6 and tuple(rows[0]) == COLUMNS
    assert all(float(r["delta_return"]) == 0 for r in rows if r["kind"] == "neutral")
    printed = capsys.readouterr().out
    assert "neutral      3      100%     0%" in printed and "no effect" in printed


@pytest.mark.parametrize("argv, message", [
    (["--states", "0", "--env", "LyraGym/Cluster-v1"], "--states: must be >= 1"),
    (["--seed", "-1", "--env", "LyraGym/Cluster-v1"], "--seed: must be >= 0"),
    (["--kinds", "random,bogus", "--env", "LyraGym/Cluster-v1"], "--kinds: 'bogus' is not a kind"),
    ([], "--config or --env"),
    (["--env", "LyraGym/Nope-v9"], "--env: 'LyraGym/Nope-v9'"),
    (["--config", "/no/such/file.yaml"], "/no/such/file.yaml"),
    (["--env", "LyraGym/Cluster-v1", "--scenario", "history"], "--scenario: needs --config"),
    (["--env", "LyraGym/Cluster-v1", "--out", "/no/such/dir/x.csv"], "--out: folder"),
])
def test_bad_arguments_are_one_clear_error(argv, message, capsys):
    assert fork_probe.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


def test_an_unknown_scenario_names_the_config_s(config, capsys):
    assert fork_probe.main(["--config", str(config), "--scenario", "history"]) == 2
    assert "--scenario: 'history' is not one of the config's scenarios (none)" in capsys.readouterr().err


def test_summarize_reads_the_csv_back_into_the_same_summary(tmp_path, capsys):
    from lyra_agents.fork_probe import Fork, main, read_csv, summary, write_csv

    forks = [Fork(0, 0, 3, 10.0, "random", -1, 1, 0.0, 0.0, 5), Fork(0, 0, 3, 10.0, "level", 2, 1, -2.0, -2.0, 5),
             Fork(1, 0, 7, 20.0, "level", 4, 1, 1.5, 1.5, 2)]
    path = tmp_path / "p.csv"
    write_csv(path, forks)
    assert read_csv(path) == forks
    assert main(["--summarize", f"x={path}"]) == 0
    out = capsys.readouterr().out
    # level: 2 forks, none without effect, one better, changes -2.0 and 1.5 (median and mean -0.25);
    # random: 1 fork, no effect
    assert "| x | level | 2 | 0% | 50% | -2.00 | -0.25 | -0.25 | 1.50 |" in out
    assert "| x | random | 1 | 100% | 0% | - | - | - | - |" in out
    assert summary(forks, ["random", "level"])[-1].split()[:4] == ["all", "3", "33%", "33%"]
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    assert main(["--summarize", str(tmp_path / "bad.csv")]) == 2
    assert "not a fork-probe CSV" in capsys.readouterr().err


def test_preempt_sets_one_preemptable_running_jobs_slot_to_preempt(config, env):
    """``preempt``: on a ``-v2`` env, the expert's action with exactly one job slot moved to the
    preempt value, where the mask allowed it; a state with no running job to preempt plays the
    expert's action (choice 0); an env without preemption is a clear error."""
    from lyra_gym.envs.levers import PREEMPT

    v2 = make_env(*env_settings(str(config), "LyraGym/Cluster-v2", None))
    v2.reset(seed=3)
    starts = np.concatenate([[0], np.cumsum(v2.action_space.nvec)[:-1]])
    moved = 0
    for _ in range(60):
        expert = v2.expert_action()
        action, dimension, choice = alternative(v2, "preempt", np.random.default_rng(moved))
        if choice:
            assert np.flatnonzero(action != expert).tolist() == [dimension] and action[dimension] == PREEMPT
            assert dimension < v2.codec.k and v2.action_masks()[starts[dimension] + PREEMPT]
            moved += 1
        else:
            assert np.array_equal(action, expert) and dimension == -1
        v2.step(expert)
        if v2.done:
            break
    assert moved > 0
    env.reset(seed=3)
    with pytest.raises(fork_probe.ProbeError, match="--kinds: preempt needs an env with preemption"):
        alternative(env, "preempt", np.random.default_rng(0))


def test_around_a_rule_the_rule_plays_the_episode_and_the_rest_after_each_fork(config):
    """``--rule``: the expert is the preemption rule on top of the guide. Its own action changes
    nothing (so each fork is finished by the rule, not the guide, which preempts less), and a
    fork's delta is what a replay from reset with the rule everywhere but that step gives."""
    env_id, kwargs = env_settings(str(config), "LyraGym/Cluster-v2", None)
    v2 = make_env(env_id, {**kwargs, "heuristic": "lyra-backfill"})  # the rule's guide
    rule = fork_probe.rule_expert("pretrained/preempt-rule-contention")
    v2.reset(seed=4)
    differs, step = [], 0  # the steps where the rule is not the guide
    while not (v2.done or v2.episode.truncated):
        action = rule(v2)
        if not np.array_equal(action, v2.expert_action()):
            differs.append(step)
        v2.step(action)
        step += 1
    forks = probe(v2, 20, 4, ["neutral", "preempt"], rule)
    assert all(f.delta_return == 0.0 for f in forks if f.kind == "neutral")
    # a fork before the rule's last own choice: finished by the guide, its neutral delta would not be 0
    assert differs and min(f.step for f in forks) < differs[-1]
    first = next(f for f in forks if f.kind == "preempt" and f.choice)

    def replay(step: int | None, action=None) -> float:
        v2.reset(seed=first.episode_seed)
        total, t = 0.0, 0
        while not (v2.done or v2.episode.truncated):
            total += v2.step(action if t == step else rule(v2))[1]
            t += 1
        return total

    v2.reset(seed=first.episode_seed)
    for _ in range(first.step):
        v2.step(rule(v2))
    preempt = alternative(v2, "preempt", np.random.default_rng(0), rule)[0]
    assert not np.array_equal(preempt, rule(v2))
    fork = v2.fork()
    changed = fork_probe.rest_of_episode(fork, preempt, lambda _obs: rule(fork))[0]
    rest = replay(None)
    v2.reset(seed=first.episode_seed)
    before = sum(v2.step(rule(v2))[1] for _ in range(first.step))
    assert changed - (rest - before) == pytest.approx(replay(first.step, preempt) - rest, abs=1e-9)


@pytest.mark.parametrize("argv, message", [
    (["--rule", "pretrained/preempt-rule-contention"], "--rule: a preemption rule acts in -v2 envs with job slots"),
    (["--env", "LyraGym/Cluster-v2", "--rule", "/no/such/rule.json"], "--rule: /no/such/rule.json"),
])
def test_a_rule_needs_a_v2_env_with_job_slots_and_a_readable_file(config, argv, message, capsys):
    base = [] if "--env" in argv else ["--config", str(config)]
    assert fork_probe.main([*base, "--states", "1", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err
