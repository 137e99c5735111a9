"""Named, swappable rewards. Each is computed from what happened between two decision points.

- ``jct``: -(jobs in the system x elapsed seconds) / scale. Summed over an
  episode with gamma = 1 this is -(total JCT of the window's jobs) / scale:
  every job is in the system from its submission to its completion.
- ``queue``: -(queued jobs x elapsed seconds) / scale (total queuing time).
- ``usage``: +(allocated training GPUs / training GPUs x elapsed seconds) / scale.
- ``preemption``: -preemptions in the step.

A reward spec is a name (``"jct"``) or weights (``{"jct": 1.0, "preemption": 0.5}``,
or the string ``"jct+0.5*preemption"``). ``scale`` defaults to 3600 s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

REWARD_TERMS = ("jct", "queue", "usage", "preemption")


@dataclass(frozen=True)
class StepOutcome:
    """What one step did: state after the decision held for ``elapsed_s``."""

    elapsed_s: float
    in_system: int
    queued: int
    gpu_usage: float      # allocated / present training GPUs after the decision
    preemptions: int


def _weight(name: str, value: object) -> float:
    """A term's weight: a finite number (not a bool), else ``ValueError`` naming the term."""
    problem = f"reward: weight of {name!r} must be a finite number, got {value!r}"
    if isinstance(value, bool):
        raise ValueError(problem)
    try:
        weight = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise ValueError(problem) from None
    if not math.isfinite(weight):
        raise ValueError(problem)
    return weight


def parse_reward(spec: str | Mapping[str, float]) -> dict[str, float]:
    """``"jct"``, ``"jct+0.5*preemption"`` or a mapping -> {term: weight}; weights are finite
    numbers. Anything else is a ``ValueError`` whose message starts with ``reward:``."""
    if isinstance(spec, Mapping):
        weights = {str(k): _weight(str(k), v) for k, v in spec.items()}
    elif isinstance(spec, str):
        weights = {}
        for part in spec.replace(" ", "").split("+"):
            weight, _, name = part.rpartition("*")
            weights[name] = _weight(name, weight) if weight else 1.0
    else:
        raise ValueError(f"reward: must be a term name, a 'w*term+...' string or a mapping, got {spec!r}")
    unknown = sorted(set(weights) - set(REWARD_TERMS))
    if unknown or not weights:
        raise ValueError(f"reward: unknown term {unknown[0] if unknown else spec!r} (known: {', '.join(REWARD_TERMS)})")
    return weights


def reward(weights: Mapping[str, float], outcome: StepOutcome, scale_s: float = 3600.0) -> float:
    terms = {
        "jct": -outcome.in_system * outcome.elapsed_s / scale_s,
        "queue": -outcome.queued * outcome.elapsed_s / scale_s,
        "usage": outcome.gpu_usage * outcome.elapsed_s / scale_s,
        "preemption": -float(outcome.preemptions),
    }
    return float(sum(w * terms[name] for name, w in weights.items()))


class SpanReward:
    """``reward(weights, StepOutcome(...), scale_s)`` as a call on the outcome's numbers, for the
    environments' every sub-span: the same terms, products and ``sum`` in the same order (so the
    same float), without building a :class:`StepOutcome` and a dict of every term per call."""

    __slots__ = ("_weights", "_scale_s")

    def __init__(self, weights: Mapping[str, float], scale_s: float = 3600.0) -> None:
        self._weights = tuple(weights.items())
        self._scale_s = scale_s

    def __call__(self, elapsed_s: float, in_system: int, queued: int, gpu_usage: float, preemptions: int) -> float:
        scale_s = self._scale_s
        products = []
        for name, w in self._weights:
            if name == "jct":
                term = -in_system * elapsed_s / scale_s
            elif name == "queue":
                term = -queued * elapsed_s / scale_s
            elif name == "usage":
                term = gpu_usage * elapsed_s / scale_s
            else:  # "preemption" (parse_reward knows no other term)
                term = -float(preemptions)
            products.append(w * term)
        return float(sum(products))
