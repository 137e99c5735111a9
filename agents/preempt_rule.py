"""A linear preemption rule on top of a ``-v2`` guide, the action it takes, and its file (the policy
of :mod:`lyra_agents.preempt_search`, whose docstring describes its form and features; the imitation
experts ``srpt_x5`` and ``rule`` of :mod:`lyra_agents.experts` are such rules)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from lyra_agents.shipped import shipped_agent

#: the features a rule may weigh: per running slot, then the cluster's (module docstring)
SLOT_FEATURES = ("remaining_gap", "attained_service", "preempt_cost", "preemptions", "workers")
CLUSTER_FEATURES = ("queued_jobs", "queue_head_wait")
FEATURES = (*SLOT_FEATURES, *CLUSTER_FEATURES)
#: the observation features a rule reads per job slot
_SLOT_COLUMNS = ("present", "queued", "remaining_est", "attained_service", "preempt_cost", "preemptions", "workers")
RULE_FORMAT = "lyra-gym preempt rule 1"
RULE_FILE = "rule.json"  # in a rule folder


class RuleError(ValueError):
    """A bad rule file or search setting; the message names the field or file."""


@dataclass(frozen=True)
class PreemptRule:
    """``weights`` (one per feature of ``features``: :data:`SLOT_FEATURES`, then any of
    :data:`CLUSTER_FEATURES` in their order) and ``bias`` of the score (module docstring)."""

    weights: tuple[float, ...]
    bias: float
    features: tuple[str, ...] = SLOT_FEATURES

    def __post_init__(self) -> None:
        problem = features_problem(self.features)
        if problem or len(self.weights) != len(self.features):
            raise RuleError(f"features: {problem or f'{len(self.features)} features, {len(self.weights)} weights'}")

    @classmethod
    def from_vector(cls, theta: Sequence[float] | np.ndarray, features: Sequence[str] = SLOT_FEATURES
                    ) -> PreemptRule:
        return cls(tuple(float(v) for v in theta[:-1]), float(theta[-1]), tuple(features))

    def vector(self) -> np.ndarray:
        return np.array([*self.weights, self.bias])


def features_problem(features: Sequence[str]) -> str | None:
    """Why ``features`` cannot be a rule's (None if it can): :data:`SLOT_FEATURES`, then a subset of
    :data:`CLUSTER_FEATURES` in their order."""
    extra = list(features)[len(SLOT_FEATURES):]
    if list(features)[:len(SLOT_FEATURES)] != list(SLOT_FEATURES) or extra != [f for f in CLUSTER_FEATURES
                                                                                if f in extra]:
        return (f"must be {', '.join(SLOT_FEATURES)}, then any of {', '.join(CLUSTER_FEATURES)} in that order; "
                f"got {', '.join(map(str, features)) or 'none'}")
    return None


class RuleLayout:
    """Where a ``-v2`` env's observation keeps each slot's features, and its neutral action.

    :param codec: the env's :class:`~lyra_gym.envs.levers.LeverCodec`.
    :param names: the observation's entry names (``ObservationBuilder.names``)."""

    def __init__(self, codec: Any, names: Sequence[str]) -> None:
        if not getattr(codec, "controls_jobs", False) or not hasattr(codec, "offsets"):
            raise RuleError("env: a preemption rule needs a -v2 env with job slots (LyraGym/Cluster-v2)")
        self.codec, self.k = codec, codec.k
        first = {name.split(".", 1)[1]: i for i, name in enumerate(names) if name.startswith("job[0].")}
        self.width = sum(1 for name in names if name.startswith("job[0]."))
        self.columns = [first[f] for f in _SLOT_COLUMNS]
        self.cluster = {f: list(names).index(f"cluster.{f}") for f in CLUSTER_FEATURES}
        self.starts = np.asarray(codec.offsets[:self.k], dtype=np.int64)  # each job dimension's first mask entry

    def slots(self, obs: np.ndarray) -> np.ndarray:
        """(K, 7) array of :data:`_SLOT_COLUMNS` per job slot."""
        return np.asarray(obs[:self.k * self.width], dtype=np.float64).reshape(self.k, self.width)[:, self.columns]


def rule_action(rule: PreemptRule, layout: RuleLayout, obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """The rule's action for one observation and its flat masks (module docstring)."""
    from lyra_gym.envs.levers import PREEMPT

    rows = layout.slots(obs)
    present, queued = rows[:, 0] > 0.5, rows[:, 1] > 0.5
    action = layout.codec.neutral(range(int(present.sum())))
    preemptable = np.flatnonzero(present & ~queued & np.asarray(masks)[layout.starts + PREEMPT].astype(bool))
    waiting = present & queued
    if preemptable.size == 0 or not waiting.any():
        return action
    phi = rows[preemptable, 2:].copy()  # remaining_est, attained_service, preempt_cost, preemptions, workers
    phi[:, 0] -= rows[waiting, 2].min()
    if len(rule.features) > len(SLOT_FEATURES):  # the cluster's features, the same in every row
        cluster = [float(obs[layout.cluster[f]]) for f in rule.features[len(SLOT_FEATURES):]]
        phi = np.hstack([phi, np.tile(cluster, (len(phi), 1))])
    scores = phi @ np.asarray(rule.weights) + rule.bias
    best = int(np.argmax(scores))  # the first of equal scores
    if scores[best] > 0:
        action[preemptable[best]] = PREEMPT
    return action


# ------------------------------------------------------------------------------------------- rule files
def load_rule(path: str | Path) -> tuple[PreemptRule, str]:
    """(rule, its training config's path, resolved from the file's folder) from a file
    :func:`lyra_agents.preempt_search.rule_json` wrote; :class:`RuleError` naming the file and field
    otherwise (plain JSON: nothing is unpickled)."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as err:
        raise RuleError(f"{path}: cannot read ({err.strerror or err})") from None
    except ValueError as err:
        raise RuleError(f"{path}: not JSON ({err})") from None
    if not isinstance(data, dict) or data.get("format") != RULE_FORMAT:
        raise RuleError(f"{path}: format: not a {RULE_FORMAT!r} file")
    features = data.get("features")
    if not isinstance(features, list) or not all(isinstance(f, str) for f in features):
        raise RuleError(f"{path}: features: must be a list of feature names, got {features!r}")
    problem = features_problem(features)
    if problem:
        raise RuleError(f"{path}: features: {problem}")
    weights, bias, config = data.get("weights"), data.get("bias"), data.get("config")
    numbers = weights if isinstance(weights, list) else []
    if len(numbers) != len(features) or not all(_finite(v) for v in numbers):
        raise RuleError(f"{path}: weights: must be {len(features)} finite numbers, got {weights!r}")
    if not _finite(bias):
        raise RuleError(f"{path}: bias: must be a finite number, got {bias!r}")
    if not isinstance(config, str):
        raise RuleError(f"{path}: config: must be the training config's path, got {config!r}")
    return (PreemptRule(tuple(float(v) for v in numbers), float(bias), tuple(features)),  # type: ignore[arg-type]
            str((Path(path).parent / config).resolve()))


def _finite(value: Any) -> bool:
    from lyra_gym.errors import number_problem

    return number_problem(value) is None


def rule_file(path: str | Path) -> Path:
    """A rule folder's ``rule.json`` (``pretrained/NAME``: a shipped one), or the file given."""
    file = shipped_agent(path)
    return file / RULE_FILE if file.is_dir() else file
