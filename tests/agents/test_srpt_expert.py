"""bc_expert ``srpt_x5`` (lyra_agents.experts.srpt_x5_action): the hand SRPT preemption rule,
checked step by step against a plain reading of the observation by entry names, the same rule as
the committed rule file, and refused by configs of envs without PREEMPT."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from expert_episodes import assert_expert_is_plain
from lyra_agents.config import TrainConfig, TrainConfigError
from lyra_agents.experts import SRPT_X5_BIAS, SRPT_X5_WEIGHTS, ExpertRule
from lyra_agents.members import make_member
from lyra_agents.preempt_search import load_rule
from lyra_gym.envs.levers import PREEMPT
from lyra_gym.envs.observation import log_time

ROOT = Path(__file__).resolve().parents[2]


def plain_srpt(env) -> int | None:
    """The slot the hand rule preempts, read entry by entry from the observation's names."""
    u = env.unwrapped
    value = dict(zip(u.builder.names, u.obs))
    masks, offsets = u.action_masks(), u.codec.offsets
    present = [j for j in range(u.codec.k) if value[f"job[{j}].present"] > 0.5]
    queued = [j for j in present if value[f"job[{j}].queued"] > 0.5]
    running = [j for j in present if j not in queued and masks[offsets[j] + PREEMPT]]
    if not queued or not running:
        return None
    shortest = min(value[f"job[{j}].remaining_est"] for j in queued)
    gaps = [float(value[f"job[{j}].remaining_est"]) - float(shortest) for j in running]
    best = int(np.argmax(gaps))
    return running[best] if gaps[best] - 0.16 > 0 else None


def test_srpt_x5_preempts_what_a_plain_reading_of_the_observation_says_at_every_step():
    cfg = TrainConfig(env_id="LyraGym/Cluster-v2", heuristic="lyra-backfill", bc_expert="srpt_x5",
                      window_s=4 * 3600.0, warmup_s=3600.0, num_job_slots=16, num_server_slots=4,
                      sim_config="traces/suite-v1/overload.yaml", trace="env-14d", trace_seed=2)
    env = make_member(cfg, cfg.env_kwargs())
    assert isinstance(env, ExpertRule)
    env.reset(seed=0)
    assert_expert_is_plain(env, plain_srpt)


def test_the_constants_are_the_committed_hand_rule_and_about_5x():
    rule, _ = load_rule(ROOT / "docs/preempt-rules/hand-srpt-x5/rule.json")
    assert (rule.weights, rule.bias) == (SRPT_X5_WEIGHTS, SRPT_X5_BIAS)
    # log1p(minutes) / 10: a gap of 0.16 is exp(1.6) ~ 5x in log1p-minutes
    assert log_time(60 * (np.exp(np.log1p(30) + 1.6) - 1)) - log_time(30 * 60) == pytest.approx(0.16)


def test_srpt_x5_needs_a_v2_env_with_job_slots():
    with pytest.raises(TrainConfigError, match="bc_expert: 'srpt_x5' does not act in LyraGym/Cluster-v1 "
                                               r"\(use LyraGym/Cluster-v2 or LyraGym/Elastic-v2\)"):
        TrainConfig(env_id="LyraGym/Cluster-v1", bc_expert="srpt_x5")


def test_the_wrapper_refuses_srpt_x5_on_an_env_without_preempt():
    import gymnasium as gym

    with pytest.raises(ValueError, match="bc_expert: 'srpt_x5' acts in LyraGym/Cluster-v2 or LyraGym/Elastic-v2, "
                                         "not LyraGym/Loaning-v2"):
        ExpertRule(gym.make("LyraGym/Loaning-v2"), "srpt_x5")
