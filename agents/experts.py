"""Whose actions behaviour cloning imitates (``bc_expert``; :mod:`lyra_agents.imitation`).

- ``heuristic`` (default): the env's own ``expert_action()``, the guided heuristic's choice
  (the env's ``heuristic``: ``lyra``, ``lyra-backfill``, ``pollux``, ``pollux+loan``,
  ``tiresias`` or ``tiresias+loan``), which reproduces that heuristic exactly.
- ``small_first`` (envs with job levels: ``LyraGym/Cluster-v1``, ``LyraGym/Elastic-v1``): queued
  jobs get levels 4..1 by quartile of requested GPUs among the queued job slots, fewest GPUs
  first; every other dimension neutral (the heuristic's own). Found by fixed-policy ablations on
  suite v1's ``history`` scenario, where it alone gives JCT/lyra IQM 0.81 (``docs/benchmark.md``):
  under duration predictions lyra's shortest-first line lets large jobs pass small ones.

- ``srpt_x5`` (``-v2`` envs with job slots: ``LyraGym/Cluster-v2``, ``LyraGym/Elastic-v2``): the
  guide's own action, except that when a job waits, the running job with the longest estimated
  remaining time is preempted if the shortest queued estimate is about 5x shorter (shortest
  remaining processing time first, as a threshold). It is the hand rule of
  ``docs/preempt-rules/hand-srpt-x5`` (:mod:`lyra_agents.preempt_search`'s form: weight 1 on the
  log-time gap, bias -0.16; an assumption, not tuned). An imitation start that preempts.
- ``rule`` (the same envs): the preemption rule in the file ``bc_rule`` names (a folder with a
  ``rule.json``, ``pretrained/NAME`` for a shipped one, as ``preempt_search`` writes them): the
  guide's own action, except the rule's preemption. The rule acts on the training env's guide (its
  ``heuristic``), which should be the guide it was searched on (its file's ``config``).

:class:`ExpertRule` is a wrapper whose ``expert_action()`` is the named rule: SB3's
``env_method("expert_action")`` finds it before the env's own, in a subprocess too.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from lyra_agents.preempt_rule import PreemptRule, RuleError, RuleLayout, load_rule, rule_action, rule_file
from lyra_gym.model.jobs import JobState

GPU_SCALE = 64  # requested GPUs are compared as num_gpus / 64, the observation's scale (float32)


def small_first_action(env: Any) -> np.ndarray:
    """Neutral levels, except queued job slots: 4 (fewest requested GPUs quartile) .. 1 (most).

    ``env``: an unwrapped LyraGym env with job levels (its ``codec`` and current ``slots``)."""
    action = env.codec.neutral(env.slots)
    queued = [i for i, job in enumerate(env.slots) if job.state is JobState.QUEUED]
    if queued:
        gpus = np.array([env.slots[i].spec.num_gpus / GPU_SCALE for i in queued], dtype=np.float32)
        cuts = np.quantile(gpus, [0.25, 0.5, 0.75])
        for i, g in zip(queued, gpus):
            action[i] = 4 - int(np.searchsorted(cuts, g, side="right"))
    return action


def random_masked_action(rng: np.random.Generator, nvec: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """One value per dimension, uniform over that dimension's valid values in ``masks``."""
    action = np.empty(len(nvec), dtype=np.int64)
    start = 0
    for d, n in enumerate(np.asarray(nvec, dtype=int)):
        valid = np.flatnonzero(masks[start:start + n])
        action[d] = valid[rng.integers(len(valid))] if len(valid) else 0
        start += n
    return action


#: The hand SRPT rule's score: weight 1 on the gap of log-times (``log1p(minutes) / 10``, the
#: observation's scale) between a running job's remaining estimate and the shortest queued one,
#: bias -0.16: preempt when that gap exceeds 0.16, i.e. log1p-minutes about 5x apart (an assumption).
SRPT_X5_WEIGHTS, SRPT_X5_BIAS = (1.0, 0.0, 0.0, 0.0, 0.0), -0.16
_SRPT_X5 = PreemptRule(SRPT_X5_WEIGHTS, SRPT_X5_BIAS)
_RULE_LAYOUTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # an env's codec -> its RuleLayout


def preempt_rule_action(rule: PreemptRule, env: Any) -> np.ndarray:
    """The guide's action with ``rule``'s preemption. ``env``: an unwrapped ``-v2`` LyraGym env with
    job slots (its ``codec``, ``builder`` and current ``obs``)."""
    layout = _RULE_LAYOUTS.get(env.codec)
    if layout is None:
        layout = _RULE_LAYOUTS[env.codec] = RuleLayout(env.codec, env.builder.names)
    return rule_action(rule, layout, np.asarray(env.obs), np.asarray(env.action_masks()))


def srpt_x5_action(env: Any) -> np.ndarray:
    """The guide's action with the hand SRPT preemption (module docstring)."""
    return preempt_rule_action(_SRPT_X5, env)


#: Rule name -> action of an unwrapped env (``heuristic`` is the env's own method, not listed).
RULES: dict[str, Callable[[Any], np.ndarray]] = {"small_first": small_first_action, "srpt_x5": srpt_x5_action}
#: The small-first rule's policy name in ``python -m lyra_agents.benchmark`` (:mod:`lyra_agents.small_first`).
SMALL_FIRST = "small-first"
#: Every ``bc_expert`` value (``rule``: the file ``bc_rule`` names).
EXPERTS = ("heuristic", *RULES, "rule")
#: Rules that set job levels: only for envs whose actions have them.
NEEDS_JOB_LEVELS = frozenset({"small_first"})
#: The envs each rule can act in (a rule not listed: any).
RULE_ENV_IDS = {"small_first": ("LyraGym/Cluster-v1", "LyraGym/Elastic-v1"),
                "srpt_x5": ("LyraGym/Cluster-v2", "LyraGym/Elastic-v2"),
                "rule": ("LyraGym/Cluster-v2", "LyraGym/Elastic-v2")}


def rule_file_action(path: str) -> Callable[[Any], np.ndarray]:
    """The expert of the preemption rule in the file ``path`` (a rule folder or ``rule.json``;
    ``pretrained/NAME``): an unwrapped ``-v2`` env with job slots -> its action
    (:func:`preempt_rule_action`); :class:`~lyra_agents.preempt_rule.RuleError` for a bad file."""
    return functools.partial(preempt_rule_action, load_rule(rule_file(path))[0])


def _rule_pairing_problem(bc_expert: str, bc_rule: str | None) -> str | None:
    """Why ``bc_expert`` and ``bc_rule`` do not go together: a rule file with ``rule`` only."""
    if (bc_expert == "rule") == (bc_rule is not None):
        return None
    return ("bc_expert: 'rule' needs bc_rule: (a preemption rule's folder or rule.json)" if bc_rule is None
            else f"bc_rule: only with bc_expert: rule (bc_expert is {bc_expert!r})")


def expert_problem(bc_expert: str, bc_rule: str | None, env_id: str) -> str | None:
    """Why ``bc_expert`` (with ``bc_rule``) cannot imitate in ``env_id`` (None if it can); a
    ``bc_rule`` file is read and checked (:func:`~lyra_agents.preempt_rule.load_rule`)."""
    if bc_expert not in EXPERTS:
        return f"bc_expert: must be one of {', '.join(EXPERTS)}, got {bc_expert!r}"
    if env_id not in RULE_ENV_IDS.get(bc_expert, (env_id,)):
        why = "sets job levels, which {} has not" if bc_expert in NEEDS_JOB_LEVELS else "does not act in {}"
        return f"bc_expert: {bc_expert!r} {why.format(env_id)} (use {' or '.join(RULE_ENV_IDS[bc_expert])})"
    if problem := _rule_pairing_problem(bc_expert, bc_rule):
        return problem
    if bc_rule is None:
        return None
    if not isinstance(bc_rule, str) or not bc_rule.strip():
        return f"bc_rule: must be the path of a rule folder or rule.json, got {bc_rule!r}"
    try:
        load_rule(rule_file(bc_rule))
    except RuleError as err:
        return f"bc_rule: {err}"
    return None


class ExpertRule(gym.Wrapper):
    """``env`` with ``expert_action()`` given by the rule ``name`` of :data:`RULES`, or for
    ``name="rule"`` by the preemption rule in the file ``rule`` (``bc_rule``)."""

    def __init__(self, env: gym.Env, name: str, rule: str | None = None) -> None:
        super().__init__(env)
        if name not in EXPERTS or name == "heuristic":
            raise ValueError(f"bc_expert: must be one of {', '.join(EXPERTS[1:])}, got {name!r}")
        if problem := _rule_pairing_problem(name, rule):
            raise ValueError(problem)
        spec = env.spec or env.unwrapped.spec  # None for an env built from its class: then its attributes decide
        controls_jobs = getattr(env.unwrapped, "controls_jobs", False)
        if (spec is not None and spec.id not in RULE_ENV_IDS.get(name, (spec.id,))) or (
                name in RULE_ENV_IDS and not controls_jobs):
            where = spec.id if spec is not None else type(env.unwrapped).__name__
            raise ValueError(f"bc_expert: {name!r} acts in {' or '.join(RULE_ENV_IDS[name])}, not {where}")
        self.rule = name
        self.act = RULES[name] if rule is None else rule_file_action(rule)

    def expert_action(self) -> np.ndarray:
        return self.act(self.env.unwrapped)


__all__ = ["EXPERTS", "SMALL_FIRST", "ExpertRule", "NEEDS_JOB_LEVELS", "RULES", "RULE_ENV_IDS", "expert_problem",
           "preempt_rule_action", "random_masked_action", "rule_file_action", "small_first_action", "srpt_x5_action"]
