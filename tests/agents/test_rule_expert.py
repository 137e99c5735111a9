"""bc_expert ``rule`` with ``bc_rule`` (lyra_agents.experts): a searched preemption rule's file as
the imitation expert, checked step by step against a plain reading of the observation by entry
names (cluster features included), its config checks, paths and the paired evaluation's expert."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from expert_episodes import assert_expert_is_plain
from lyra_agents import paired
from lyra_agents.config import TrainConfig, TrainConfigError, load_train_config
from lyra_agents.experts import ExpertRule
from lyra_agents.members import make_member
from lyra_agents.preempt_rule import load_rule, rule_file
from lyra_gym.envs.levers import PREEMPT

ROOT = Path(__file__).resolve().parents[2]
CONTENTION = ROOT / "agents/pretrained/preempt-rule-contention"


def plain_rule(env, weights, bias) -> int | None:
    """The slot the contention rule preempts: each running slot's seven features read by name."""
    u = env.unwrapped
    value = {name: float(v) for name, v in zip(u.builder.names, u.obs)}
    masks, offsets = u.action_masks(), u.codec.offsets
    present = [j for j in range(u.codec.k) if value[f"job[{j}].present"] > 0.5]
    queued = [j for j in present if value[f"job[{j}].queued"] > 0.5]
    running = [j for j in present if j not in queued and masks[offsets[j] + PREEMPT]]
    if not queued or not running:
        return None
    shortest = min(value[f"job[{j}].remaining_est"] for j in queued)
    best, best_score = None, -np.inf
    for j in running:
        features = [value[f"job[{j}].remaining_est"] - shortest, value[f"job[{j}].attained_service"],
                    value[f"job[{j}].preempt_cost"], value[f"job[{j}].preemptions"], value[f"job[{j}].workers"],
                    value["cluster.queued_jobs"], value["cluster.queue_head_wait"]]
        score = sum(w * f for w, f in zip(weights, features)) + bias
        if score > best_score + 1e-9:  # the first of (nearly) equal scores, as the rule's argmax
            best, best_score = j, score
    return best if best_score > 0 else None


def overload_config(**changes) -> TrainConfig:
    return TrainConfig(env_id="LyraGym/Cluster-v2", heuristic="lyra-backfill", bc_expert="rule",
                       bc_rule=str(CONTENTION), window_s=4 * 3600.0, warmup_s=3600.0, num_job_slots=16,
                       num_server_slots=4, sim_config="traces/suite-v1/overload.yaml", trace="env-14d",
                       trace_seed=2).replace(**changes)


@pytest.mark.parametrize("extras", [False, True])
def test_the_rule_expert_preempts_what_a_plain_reading_of_the_observation_says(extras):
    rule, _ = load_rule(CONTENTION / "rule.json")
    assert len(rule.weights) == 7  # the shipped rule weighs the cluster's two contention features too
    cfg = overload_config(observation_extras=extras)
    env = make_member(cfg, cfg.env_kwargs())
    assert isinstance(env, ExpertRule)
    env.reset(seed=0)
    assert_expert_is_plain(env, lambda e: plain_rule(e, rule.weights, rule.bias))


@pytest.mark.parametrize("changes, message", [
    (dict(bc_rule=None), r"bc_expert: 'rule' needs bc_rule: \(a preemption rule's folder or rule.json\)"),
    (dict(bc_expert="srpt_x5"), "bc_rule: only with bc_expert: rule \\(bc_expert is 'srpt_x5'\\)"),
    (dict(bc_rule="no/such/rule"), "bc_rule: no/such/rule: cannot read"),
    (dict(bc_rule=""), "bc_rule: must be the path of a rule folder or rule.json, got ''"),
    (dict(bc_rule=5), "bc_rule: must be the path of a rule folder or rule.json, got 5"),
    (dict(env_id="LyraGym/Cluster-v1"), "bc_expert: 'rule' does not act in LyraGym/Cluster-v1"),
])
def test_config_refusals_name_the_field(changes, message):
    with pytest.raises(TrainConfigError, match=message):
        overload_config(**changes)


def test_the_wrapper_refuses_rule_without_its_file():
    import gymnasium as gym

    with pytest.raises(ValueError, match=r"bc_expert: 'rule' needs bc_rule: \(a preemption rule's folder"):
        ExpertRule(gym.make("LyraGym/Cluster-v2"), "rule")


def test_a_rule_file_that_is_not_a_rule_is_refused_naming_file_and_field(tmp_path):
    bad = tmp_path / "rule.json"
    bad.write_text('{"format": "lyra-gym preempt rule 1", "features": ["remaining_gap"], "weights": [1], '
                   '"bias": 0, "config": "x.yaml"}')
    with pytest.raises(TrainConfigError, match=f"bc_rule: {bad}: features: must be remaining_gap, "):
        overload_config(bc_rule=str(tmp_path))


def test_a_shipped_rule_stays_a_shipped_name_and_other_paths_resolve_beside_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # elsewhere: the shipped config's rule is still found, by its name
    cfg = load_train_config(ROOT / "agents/configs/cluster-v2-slots-rule.yaml")
    assert cfg.bc_rule == "pretrained/preempt-rule-contention" and rule_file(cfg.bc_rule) == CONTENTION / "rule.json"
    again = TrainConfig().updated(yaml.safe_load(cfg.to_yaml()))  # as a run folder's config.yaml records it
    assert again.bc_rule == cfg.bc_rule and paired.expert_name(again) == "rule:pretrained/preempt-rule-contention"
    # a rule of one's own, beside the config file: resolved there, recorded absolute
    (tmp_path / "rules" / "mine").mkdir(parents=True)
    (tmp_path / "rules" / "mine" / "rule.json").write_text((CONTENTION / "rule.json").read_text())
    (tmp_path / "configs").mkdir()
    text = (ROOT / "agents/configs/cluster-v2-slots-rule.yaml").read_text()
    (tmp_path / "configs" / "c.yaml").write_text(text.replace("bc_rule: pretrained/preempt-rule-contention",
                                                              "bc_rule: ../rules/mine"))
    own = load_train_config(tmp_path / "configs" / "c.yaml")
    assert Path(own.bc_rule) == tmp_path / "rules" / "mine"
    assert yaml.safe_load(own.to_yaml())["bc_rule"] == str(tmp_path / "rules" / "mine")
    # an absolute path into the shipped agents is recorded by its shipped name
    assert yaml.safe_load(own.replace(bc_rule=str(CONTENTION)).to_yaml())["bc_rule"] == cfg.bc_rule


def test_the_paired_evaluation_builds_the_rule_as_the_expert_reference():
    cfg = overload_config(bc_rule="pretrained/preempt-rule-contention")
    scheduler = paired.reference_factory(paired.EXPERT, cfg)()
    assert scheduler.name == "rule:pretrained/preempt-rule-contention"
