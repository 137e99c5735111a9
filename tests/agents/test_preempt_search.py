"""lyra_agents.preempt_search: the rule's action by hand, the rule in the env and as a scheduler (the
same run), a rule that never preempts is its guide, the cross-entropy method on a known optimum,
the search's determinism across worker counts, and one-line errors for bad rule files."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lyra_gym  # noqa: F401
from lyra_agents.config import load_train_config
from lyra_agents.evaluate import evaluate_scheduler, rollout
from lyra_agents.preempt_rule import (
    CLUSTER_FEATURES,
    FEATURES,
    SLOT_FEATURES,
    PreemptRule,
    RuleError,
    RuleLayout,
    rule_action,
)
from lyra_agents.preempt_search import (
    SearchSettings,
    cem,
    load_rule,
    load_rule_scheduler,
    main,
    objective_values,
    rule_json,
    rule_scheduler,
    search,
    search_slots,
)
from lyra_agents.vec_envs import env_kwargs_of
from lyra_gym.envs.levers import PREEMPT, LeverCodec
from lyra_gym.envs.observation import ObservationBuilder

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "agents" / "configs" / "cluster-v2-preempt-search.yaml")
SRPT = PreemptRule((1.0, 0.0, 0.0, 0.0, 0.0), -0.16)  # preempt when the gap is over log-time 0.16 (x5)


def tiny(remaining: list[float], queued: list[bool]) -> tuple[LeverCodec, np.ndarray, np.ndarray]:
    """A K = 3 layout with jobs of ``remaining_est`` (queued slots first, as the env orders them)."""
    codec = LeverCodec(3, 1, 2, True, True)
    names = ObservationBuilder(3, 1, version=2).names
    obs = np.zeros(len(names), dtype=np.float32)
    for slot, (rem, waiting) in enumerate(zip(remaining, queued)):
        for feature, value in (("present", 1.0), ("queued", float(waiting)), ("remaining_est", rem)):
            obs[names.index(f"job[{slot}].{feature}")] = value
    counts = (sum(queued), len(remaining) - sum(queued), 0)
    masks, _ = codec.masks(counts, 0, False, False)
    return codec, obs, masks


def test_the_rule_preempts_the_best_scoring_running_job_only_when_its_score_is_positive():
    codec, obs, masks = tiny([0.2, 0.6, 0.3], [True, False, False])
    layout = RuleLayout(codec, ObservationBuilder(3, 1, version=2).names)
    neutral = codec.neutral(range(3)).tolist()
    assert neutral == [2, 2, 2, 2, 1]
    # gaps to the queued job: 0.4 and 0.1; scores 0.2 and -0.1 with bias -0.2
    assert rule_action(PreemptRule((1, 0, 0, 0, 0), -0.2), layout, obs, masks).tolist() == [2, PREEMPT, 2, 2, 1]
    assert rule_action(PreemptRule((1, 0, 0, 0, 0), -0.5), layout, obs, masks).tolist() == neutral  # 0.4 - 0.5 < 0
    assert rule_action(PreemptRule((-1, 0, 0, 0, 0), 0.0), layout, obs, masks).tolist() == neutral  # -0.1 is best
    assert rule_action(PreemptRule((-1, 0, 0, 0, 0), 0.2), layout, obs, masks).tolist() == [2, 2, PREEMPT, 2, 1]
    codec, obs, masks = tiny([0.6, 0.3], [False, False])  # nobody waits: nobody is preempted
    assert rule_action(PreemptRule((1, 0, 0, 0, 0), 5.0), layout, obs, masks).tolist() == [2, 2, 0, 2, 1]


def test_the_cluster_features_hold_the_rule_back_where_the_queue_is_short():
    codec, obs, masks = tiny([0.2, 0.6, 0.3], [True, False, False])
    names = ObservationBuilder(3, 1, version=2).names
    layout = RuleLayout(codec, names)
    # score = gap + 2 x queued_jobs - 1: the gap 0.4 needs queued_jobs > 0.3
    rule = PreemptRule((1, 0, 0, 0, 0, 2), -1.0, (*SLOT_FEATURES, "queued_jobs"))
    for queued_jobs, preempts in ((0.25, False), (0.35, True)):
        obs[names.index("cluster.queued_jobs")] = queued_jobs
        obs[names.index("cluster.queue_head_wait")] = 9.0  # not a feature of this rule
        assert bool(rule_action(rule, layout, obs, masks)[1] == PREEMPT) is preempts, queued_jobs
    # both cluster features; zero weights on them act as the slot-only rule, on random observations
    rng, preempted = np.random.default_rng(0), 0
    for _ in range(50):
        for slot in range(3):
            for feature in ("remaining_est", "attained_service", "preempt_cost", "preemptions", "workers"):
                obs[names.index(f"job[{slot}].{feature}")] = rng.random()
        obs[[names.index(f"cluster.{f}") for f in CLUSTER_FEATURES]] = rng.random(2)
        theta = rng.normal(size=6)
        slot_only = PreemptRule.from_vector(theta)
        zeros = PreemptRule.from_vector([*theta[:5], 0.0, 0.0, theta[5]], FEATURES)
        action = rule_action(slot_only, layout, obs, masks).tolist()
        assert action == rule_action(zeros, layout, obs, masks).tolist()
        preempted += PREEMPT in action
    assert 0 < preempted < 50  # both cases met


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 3), st.integers(0, 3), st.data())
def test_the_rule_equals_a_plain_loop_over_the_running_slots(queued, running, data):
    """Random slots, features, weights and bias (K = 3): the rule's vectorised action agrees with a
    plain per-slot loop: at most one change from the neutral action, PREEMPT on a best-scoring
    running slot (to rounding), only when a job waits and that score is above 0."""
    running = min(running, 3 - queued)
    unit = st.floats(0.0, 1.0, allow_nan=False)
    remaining = [data.draw(unit) for _ in range(queued + running)]
    codec, obs, masks = tiny(remaining, [True] * queued + [False] * running)
    names = ObservationBuilder(3, 1, version=2).names
    own = ("attained_service", "preempt_cost", "preemptions", "workers")
    for slot in range(queued + running):
        for feature in own:
            obs[names.index(f"job[{slot}].{feature}")] = data.draw(unit)
    cluster = [data.draw(unit) for _ in CLUSTER_FEATURES]
    obs[[names.index(f"cluster.{f}") for f in CLUSTER_FEATURES]] = cluster
    features = data.draw(st.sampled_from([SLOT_FEATURES, (*SLOT_FEATURES, "queue_head_wait"), FEATURES]))
    weight = st.floats(-3.0, 3.0, allow_nan=False)
    rule = PreemptRule(tuple(data.draw(weight) for _ in features), data.draw(weight), features)
    action = rule_action(rule, RuleLayout(codec, names), obs, masks).tolist()
    neutral = codec.neutral(range(queued + running)).tolist()
    changed = [i for i, (a, n) in enumerate(zip(action, neutral)) if a != n]
    assert len(changed) <= 1 and all(action[i] == PREEMPT and queued <= i < queued + running for i in changed)
    scores = {}  # the plain loop: each running slot's score
    if queued:
        shortest = min(float(obs[names.index(f"job[{s}].remaining_est")]) for s in range(queued))
        for slot in range(queued, queued + running):
            row = {"remaining_gap": float(obs[names.index(f"job[{slot}].remaining_est")]) - shortest,
                   **{f: float(obs[names.index(f"job[{slot}].{f}")]) for f in own},
                   **{f: float(np.float32(v)) for f, v in zip(CLUSTER_FEATURES, cluster)}}
            scores[slot] = sum(w * row[f] for w, f in zip(rule.weights, features)) + rule.bias
    top = max(scores.values(), default=-1.0)
    eps = 1e-9  # the two sums may round apart; a score that close to 0 or to the top may go either way
    if top > eps:
        assert len(changed) == 1 and scores[changed[0]] >= top - eps
    elif top < -eps:
        assert changed == []


def test_the_ratio_objective_weighs_each_episode_by_the_guide_s_return():
    guide = [-10.0, -2.0, 0.0]
    results = [guide, [-8.0, -3.0, -1.0]]
    assert objective_values(results, guide, "return") == [-4.0, -4.0]
    # -10/10, -2/2, 0 (an episode the guide scores 0 counts as it is); then -0.8, -1.5, -1
    assert objective_values(results, guide, "ratio") == pytest.approx([-2 / 3, -3.3 / 3])


def test_a_layout_needs_an_env_with_job_slots_and_preemption():
    with pytest.raises(RuleError, match="-v2 env with job slots"):
        RuleLayout(LeverCodec(3, 1, 2, False, True), ObservationBuilder(3, 1, version=2).names)


@pytest.fixture(scope="module")
def env():
    cfg = load_train_config(CONFIG)
    made = gym.make(cfg.env_id, **env_kwargs_of(cfg)[0]).unwrapped
    yield made
    made.close()


def test_the_rule_in_the_env_and_as_a_scheduler_is_the_same_run(env):
    layout = RuleLayout(env.codec, env.builder.names)
    played = rollout(env, lambda e, obs: rule_action(SRPT, layout, obs, e.action_masks()), 0)
    simulated = evaluate_scheduler(rule_scheduler(SRPT, CONFIG), env, [0])[0]
    assert played["preemptions"] > 0  # the rule acts on this window
    for key in ("jct_mean_s", "preemptions", "jobs_finished"):
        assert simulated[key] == played[key]


def test_a_rule_that_never_preempts_is_its_guide(env):
    layout = RuleLayout(env.codec, env.builder.names)
    never = rollout(env, lambda e, obs: rule_action(PreemptRule((0.0,) * 5, -1.0), layout, obs, e.action_masks()), 1)
    guide = rollout(env, lambda e, _obs: e.expert_action(), 1)
    never.pop("sim_wall_s"), guide.pop("sim_wall_s")  # the one measured field
    assert never == guide


def test_a_search_plays_every_scenario_of_its_config_whatever_its_n_envs():
    from lyra_agents.suite import get_suite

    cfg = load_train_config(CONFIG).replace(n_envs=2)
    slots = search_slots(cfg)
    assert len(slots) == len(cfg.scenarios) >= 3
    for slot, name in zip(slots, cfg.scenarios):
        expected = {"id": cfg.env_id, **cfg.env_kwargs(), **get_suite(cfg.suite).get(name).env_kwargs(),
                    "trace_seed": cfg.trace_seed}
        assert slot == expected, name
    assert search_slots(cfg.replace(scenarios=[])) == [{"id": cfg.env_id, **cfg.env_kwargs()}]


def test_the_cross_entropy_method_finds_a_known_optimum_and_repeats_itself():
    target = np.array([0.5, -1.0, 2.0])
    settings = SearchSettings(generations=30, population=20, elite=5, noise=0.01, init_std=2.0, seed=3)

    def fitness(jobs):  # the episodes passed along are the generation's draw
        assert all(episodes == jobs[0][1] for _, episodes in jobs)
        return [-float(np.sum((theta - target) ** 2)) for theta, _ in jobs]

    found, rows = cem(fitness, 3, settings, np.zeros(3), lambda rng: [int(rng.integers(100))])
    assert np.abs(found - target).max() < 0.05
    assert len(rows) == 30 and rows[-1]["mean_return"] > rows[0]["mean_return"]
    again, _ = cem(fitness, 3, settings, np.zeros(3), lambda rng: [int(rng.integers(100))])
    assert again.tolist() == found.tolist()


@pytest.mark.slow
def test_the_search_is_the_same_in_one_process_or_two_and_the_command_writes_its_files(tmp_path):
    settings = SearchSettings(generations=2, population=2, elite=1, windows=1, workers=1, seed=5)
    one, rows, _ = search(CONFIG, settings, "overload")
    two, rows2, _ = search(CONFIG, SearchSettings(**{**settings.__dict__, "workers": 2}), "overload")
    assert one == two and rows == rows2
    out = tmp_path / "rule"
    assert main(["search", "--config", CONFIG, "--scenario", "overload", "--out", str(out), "--generations", "2",
                 "--population", "2", "--elite", "1", "--windows", "1", "--workers", "1", "--seed", "5"]) == 0
    rule, config = load_rule(out / "rule.json")
    assert rule == one and Path(config) == Path(CONFIG).resolve()
    assert len((out / "search.csv").read_text().splitlines()) == 3
    assert main(["evaluate", str(out / "rule.json"), "--scenarios", "overload", "--trace-seeds", "1",
                 "--windows", "1", "--baselines", "lyra-backfill", "--json", str(tmp_path / "e.json")]) == 0
    units = json.loads((tmp_path / "e.json").read_text())["units"]
    assert sorted(row["policy"] for row in units) == ["lyra-backfill", "policy"]


@pytest.mark.parametrize("change, field", [
    ({"format": "other"}, "format"),
    ({"features": ["remaining_gap"]}, "features"),
    ({"features": [*SLOT_FEATURES, "queue_head_wait", "queued_jobs"]}, "features"),
    ({"features": [*SLOT_FEATURES, "queued_jobs"]}, "weights"),  # 6 features, 5 weights
    ({"features": "remaining_gap"}, "features"),
    ({"weights": [1, 2]}, "weights"),
    ({"weights": [1, 2, 3, 4, float("nan")]}, "weights"),
    ({"bias": "x"}, "bias"),
    ({"bias": True}, "bias"),
    ({"config": 3}, "config"),
])
def test_a_bad_rule_file_is_refused_naming_its_field(tmp_path, change, field):
    path = tmp_path / "rule.json"
    data = {**json.loads(rule_json(SRPT, CONFIG, SearchSettings(), tmp_path)), **change}
    path.write_text(json.dumps(data))
    with pytest.raises(RuleError, match=rf"rule.json: {field}:"):
        load_rule(path)


def test_the_command_refuses_bad_input_in_one_line(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{not json")
    assert main(["evaluate", str(tmp_path / "bad.json"), "--scenarios", "overload"]) == 2
    assert main(["search", "--config", CONFIG, "--out", str(tmp_path / "o"), "--elite", "20"]) == 2
    (tmp_path / "e.json").write_text("{}")  # an existing file needs --overwrite (lyra_agents.evaluate's rule)
    assert main(["evaluate", str(ROOT / "agents" / "pretrained" / "preempt-rule-overload"), "--scenarios", "overload",
                 "--json", str(tmp_path / "e.json")]) == 2
    assert main(["evaluate", str(ROOT / "agents" / "pretrained" / "preempt-rule-overload"),
                 "--scenarios", "overload,nope"]) == 2  # refused before overload is simulated
    assert main(["search", "--config", CONFIG, "--out", str(tmp_path / "o"), "--scenario", "default"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("error: ") and "not JSON" in lines[0]
    assert lines[1] == "error: --elite: must be <= --population (12), got 20"
    assert lines[2] == (f"error: --json {tmp_path / 'e.json'}: exists; pass --overwrite to replace it, "
                        "or choose another file")
    assert (tmp_path / "e.json").read_text() == "{}"
    assert lines[3].startswith("error: unknown scenario 'nope' in suite v1")
    assert lines[4].startswith("error: --scenario: 'default' is not one of the config's scenarios")
    assert main(["search", "--config", CONFIG, "--out", str(tmp_path / "o"), "--objective", "jct"]) == 2
    assert main(["search", "--config", CONFIG, "--out", str(tmp_path / "o"), "--features", "queued_jobs"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == "error: --objective: must be one of return, ratio, got 'jct'"
    assert lines[1].startswith("error: --features: must be remaining_gap, attained_service")


def test_a_rule_file_keeps_its_features(tmp_path):
    rule = PreemptRule((1, 0, 0, 0, 0, 0.5, -0.25), -0.2, FEATURES)
    path = tmp_path / "rule.json"
    path.write_text(rule_json(rule, CONFIG, SearchSettings(objective="ratio"), tmp_path))
    assert load_rule(path)[0] == rule
    assert json.loads(path.read_text())["search"]["objective"] == "ratio"
    with pytest.raises(RuleError, match="features:"):
        PreemptRule((1, 0, 0, 0, 0), 0.0, FEATURES)


def test_rule_paths_load_as_schedulers_through_the_registry(tmp_path):
    from lyra_gym.sim import scheduler as registry

    folder = tmp_path / "rule"
    folder.mkdir()
    (folder / "rule.json").write_text(rule_json(SRPT, CONFIG, SearchSettings(), folder))
    by_folder, by_file = registry.make(f"rule:{folder}"), load_rule_scheduler(str(folder / "rule.json"), name="x")
    assert by_folder.name == f"rule:{folder}" and by_file.name == "x"
    assert by_folder.layout.k == by_file.layout.k == 64
    with pytest.raises(TypeError, match="unknown parameter"):
        registry.make(f"rule:{folder}", deterministic=False)
    with pytest.raises(RuleError, match="cannot read"):
        registry.make(f"rule:{tmp_path / 'missing'}")


def test_the_shipped_contention_rule_reproduces_its_committed_unit(tmp_path):
    """``pretrained/preempt-rule-contention`` on paper-shape, trace seed 0, its first test window: the
    JCT of the committed evaluation (docs/learned-preempt-rule-contention-part1.json), float for float."""
    out = tmp_path / "e.json"
    assert main(["evaluate", "pretrained/preempt-rule-contention", "--scenarios", "paper-shape", "--trace-seeds", "1",
                 "--windows", "1", "--baselines", "lyra", "--json", str(out)]) == 0
    committed = json.loads((ROOT / "docs" / "learned-preempt-rule-contention-part1.json").read_text())["units"]
    for row in json.loads(out.read_text())["units"]:
        match = [c for c in committed if all(c[k] == row[k] for k in ("policy", "scenario", "trace_seed", "window"))]
        assert len(match) == 1 and match[0]["jct_mean_s"] == row["jct_mean_s"], row
