"""Named, swappable rewards: a registry of reward terms, each computed from what happened between
two decision points (a :class:`StepOutcome`).

Built-in terms (``scale`` is ``reward_scale_s``, default 3600 s):

- ``jct``: -(jobs in the system x elapsed seconds) / scale. Summed over an
  episode with gamma = 1 this is -(total JCT of the window's jobs) / scale:
  every job is in the system from its submission to its completion.
- ``queue``: -(queued jobs x elapsed seconds) / scale (total queuing time).
- ``usage``: +(allocated training GPUs / training GPUs x elapsed seconds) / scale.
- ``preemption``: -preemptions in the step.
- ``slowdown``: -(sum over the jobs in the system of elapsed seconds / the job's ideal run
  time), not scaled (a slowdown has no unit). A job's ideal run time is its trace duration
  (``JobSpec.duration``: seconds at its requested GPUs on the reference GPU type, alone on the
  cluster). Summed over an episode this is -(sum over the jobs of JCT / ideal run time), the
  total slowdown.
- ``bounded_slowdown``: as ``slowdown`` with the ideal run time floored at tau =
  :data:`BOUNDED_SLOWDOWN_TAU_S` (10 s), so jobs of a few seconds do not dominate
  (Feitelson, Rudolph, Schwiegelshohn, Sevcik and Wong, "Theory and practice in parallel job
  scheduling", JSSPP 1997; Feitelson, "Metrics for parallel job scheduling and their
  convergence", JSSPP 2001: bounded slowdown max(JCT / max(run time, tau), 1), tau = 10 s is
  the usual choice). The step form gives sum JCT / max(run time, tau) per episode, without
  the floor at 1 (which only binds for a job that finishes within max(run time, tau) of its
  submission). Another tau: :func:`bounded_slowdown` and :func:`register_reward_term`.

A reward spec is a name (``"jct"``), weights (``{"jct": 1.0, "preemption": 0.5}``, or the string
``"jct+0.5*preemption"``) over registered names, or a callable ``fn(outcome) -> float`` used as the
whole reward. :func:`register_reward_term` adds a user term.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Union

from lyra_gym.model.jobspec import JobSpec

if TYPE_CHECKING:
    from lyra_gym.sim.engine import Engine

#: The four counting terms: the environments compute these without building a StepOutcome.
REWARD_TERMS = ("jct", "queue", "usage", "preemption")
#: Tau of ``bounded_slowdown``, seconds (an assumption: the common choice since Feitelson et al. 1997).
BOUNDED_SLOWDOWN_TAU_S = 10.0
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class StepOutcome:
    """What one step did: state after the decision held for ``elapsed_s``.

    ``jobs`` are the specs of the jobs in the system over the span (queued, then running), given
    only when a term of the reward needs them (``needs_jobs``); None otherwise."""

    elapsed_s: float
    in_system: int
    queued: int
    gpu_usage: float      # allocated / present training GPUs after the decision
    preemptions: int
    scale_s: float = 3600.0  # seconds per unit of reward (reward_scale_s)
    jobs: tuple[JobSpec, ...] | None = None


RewardFn = Callable[[StepOutcome], float]
RewardSpec = Union[str, Mapping[str, float], RewardFn]


@dataclass(frozen=True)
class RewardTerm:
    """A registered term: ``fn(outcome)`` is its value for one span (before its weight)."""

    name: str
    fn: RewardFn
    needs_jobs: bool = False  # whether fn reads outcome.jobs
    builtin: bool = False


def _finite(name: str, value: object) -> float:
    """``value`` as a finite float (not a bool), else ``ValueError`` naming ``name``."""
    problem = f"{name} must be a finite number, got {value!r}"
    if isinstance(value, bool):
        raise ValueError(problem)
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise ValueError(problem) from None
    if not math.isfinite(number):
        raise ValueError(problem)
    return number


# the four counting terms (module docstring), each stated once: the StepOutcome terms and
# SpanReward's per-span sum both call these
def _jct_of(in_system: int, elapsed_s: float, scale_s: float) -> float:
    return -in_system * elapsed_s / scale_s


def _queue_of(queued: int, elapsed_s: float, scale_s: float) -> float:
    return -queued * elapsed_s / scale_s


def _usage_of(gpu_usage: float, elapsed_s: float, scale_s: float) -> float:
    return gpu_usage * elapsed_s / scale_s


def _preemption_of(preemptions: int) -> float:
    return -float(preemptions)


def _jct(o: StepOutcome) -> float:
    return _jct_of(o.in_system, o.elapsed_s, o.scale_s)


def _queue(o: StepOutcome) -> float:
    return _queue_of(o.queued, o.elapsed_s, o.scale_s)


def _usage(o: StepOutcome) -> float:
    return _usage_of(o.gpu_usage, o.elapsed_s, o.scale_s)


def _preemption(o: StepOutcome) -> float:
    return _preemption_of(o.preemptions)


def _jobs(o: StepOutcome) -> tuple[JobSpec, ...]:
    if o.jobs is None:
        raise ValueError("reward: this term needs StepOutcome.jobs (register it with needs_jobs=True)")
    return o.jobs


def _slowdown(o: StepOutcome) -> float:
    return -o.elapsed_s * sum(1.0 / spec.duration for spec in _jobs(o))


def bounded_slowdown(tau_s: float = BOUNDED_SLOWDOWN_TAU_S) -> RewardFn:
    """The ``bounded_slowdown`` term with threshold ``tau_s`` seconds (> 0): -(elapsed seconds x
    sum over the jobs in the system of 1 / max(ideal run time, tau_s))."""
    tau = _finite("tau_s", tau_s)
    if tau <= 0:
        raise ValueError(f"tau_s: must be > 0, got {tau_s!r}")

    def term(o: StepOutcome) -> float:
        return -o.elapsed_s * sum(1.0 / max(spec.duration, tau) for spec in _jobs(o))

    term.__name__ = term.__qualname__ = f"bounded_slowdown_{tau:g}s"
    return term


_REGISTRY: dict[str, RewardTerm] = {}


def register_reward_term(name: str, fn: RewardFn, *, needs_jobs: bool = True, replace: bool = False) -> RewardTerm:
    """Add a reward term ``name`` (letters, digits, ``_``; not starting with a digit) to the registry.

    ``fn(outcome)`` returns the term's value for one span (a finite number). ``needs_jobs=False``
    says ``fn`` does not read ``outcome.jobs``, so the environments need not collect them.
    Re-registering a name is a ``ValueError`` unless ``replace=True`` (never for a built-in).
    Environments parse their reward when constructed: register before ``gymnasium.make`` (and in
    every worker process of a spawned vector env)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"reward term name: letters, digits and '_' (not starting with a digit), got {name!r}")
    if not callable(fn):
        raise ValueError(f"reward term {name!r}: fn must be callable, got {fn!r}")
    old = _REGISTRY.get(name)
    if old is not None and (old.builtin or not replace):
        why = "a built-in term" if old.builtin else "already registered (pass replace=True)"
        raise ValueError(f"reward term {name!r}: {why}")
    term = RewardTerm(name, fn, bool(needs_jobs))
    _REGISTRY[name] = term
    return term


def unregister_reward_term(name: str) -> None:
    """Remove user term ``name`` (a ``ValueError`` for a built-in or an unknown name)."""
    term = _REGISTRY.get(name)
    if term is None or term.builtin:
        raise ValueError(f"reward term {name!r}: {'a built-in term' if term else 'not registered'}")
    del _REGISTRY[name]


def reward_terms() -> tuple[str, ...]:
    """Every registered term's name: the built-ins, then user terms in registration order."""
    return tuple(_REGISTRY)


def _builtin(name: str, fn: RewardFn, needs_jobs: bool = False) -> None:
    _REGISTRY[name] = RewardTerm(name, fn, needs_jobs, builtin=True)


_builtin("jct", _jct)
_builtin("queue", _queue)
_builtin("usage", _usage)
_builtin("preemption", _preemption)
_builtin("slowdown", _slowdown, needs_jobs=True)
_builtin("bounded_slowdown", bounded_slowdown(), needs_jobs=True)


def _weight(name: str, value: object) -> float:
    """A term's weight: a finite number (not a bool), else ``ValueError`` naming the term."""
    return _finite(f"reward: weight of {name!r}", value)


def parse_reward(spec: str | Mapping[str, float]) -> dict[str, float]:
    """``"jct"``, ``"jct+0.5*preemption"`` or a mapping -> {term: weight} over registered terms;
    weights are finite numbers. Anything else is a ``ValueError`` whose message starts with
    ``reward:`` (an unknown term: naming it and listing the known ones)."""
    if isinstance(spec, Mapping):
        weights = {str(k): _weight(str(k), v) for k, v in spec.items()}
    elif isinstance(spec, str):
        weights = {}
        for part in spec.replace(" ", "").split("+"):
            weight, _, name = part.rpartition("*")
            weights[name] = _weight(name, weight) if weight else 1.0
    else:
        raise ValueError(f"reward: must be a term name, a 'w*term+...' string, a mapping or a callable, got {spec!r}")
    unknown = [name for name in weights if name not in _REGISTRY]
    if unknown or not weights:
        raise ValueError(f"reward: unknown term {unknown[0] if unknown else spec!r} "
                         f"(known: {', '.join(_REGISTRY)})")
    return weights


def _value(name: str, fn: RewardFn, outcome: StepOutcome) -> float:
    """A user term's or callable's value, checked: a finite number, else ``ValueError``."""
    return _finite(f"reward: term {name!r} returned a value that", fn(outcome))


def _term_value(name: str, outcome: StepOutcome) -> float:
    term = _REGISTRY[name]
    return term.fn(outcome) if term.builtin else _value(name, term.fn, outcome)


def reward(weights: Mapping[str, float], outcome: StepOutcome, scale_s: float = 3600.0) -> float:
    """sum of weight x term(outcome) over ``weights`` (registered names), with ``scale_s``."""
    if outcome.scale_s != scale_s:
        outcome = dataclasses.replace(outcome, scale_s=scale_s)
    return float(sum(w * _term_value(name, outcome) for name, w in weights.items()))


def jobs_in_system(engine: "Engine") -> tuple[JobSpec, ...]:
    """The specs of the jobs in the system: queued (queue order), then running (start order)."""
    jobs = engine.jobs
    return tuple(jobs[i].spec for i in engine.queue) + tuple(jobs[i].spec for i in engine.running)


def unfinished_jobs(engine: "Engine") -> tuple[JobSpec, ...]:
    """The specs of the jobs not finished (queued, running or not yet submitted), in trace order."""
    return tuple(job.spec for job in engine.jobs if job.finish_time is None)


class SpanReward:
    """``reward(weights, StepOutcome(...), scale_s)`` as a call on the outcome's numbers, for the
    environments' every sub-span: the same terms, products and ``sum`` in the same order (so the
    same float), without building a :class:`StepOutcome` and a dict of every term per call.

    For the four counting terms (:data:`REWARD_TERMS`) only; :func:`span_reward` picks this or a
    :class:`TermReward`."""

    __slots__ = ("_weights", "_scale_s", "weights", "_jct_weight")
    needs_jobs = False

    def __init__(self, weights: Mapping[str, float], scale_s: float = 3600.0) -> None:
        self.weights = dict(weights)
        self._weights = tuple(weights.items())
        self._scale_s = scale_s
        # the weight of "jct" when it is the only term (the default reward), else None
        self._jct_weight = self._weights[0][1] if len(self._weights) == 1 and self._weights[0][0] == "jct" else None

    def __call__(self, elapsed_s: float, in_system: int, queued: int, gpu_usage: float, preemptions: int,
                 jobs: tuple[JobSpec, ...] | None = None) -> float:
        scale_s = self._scale_s
        w = self._jct_weight
        if w is not None:  # float(sum([w * term])): sum adds its one item to 0 (-0.0 becomes 0.0)
            return w * _jct_of(in_system, elapsed_s, scale_s) + 0.0
        products = []
        for name, w in self._weights:
            if name == "jct":
                term = _jct_of(in_system, elapsed_s, scale_s)
            elif name == "queue":
                term = _queue_of(queued, elapsed_s, scale_s)
            elif name == "usage":
                term = _usage_of(gpu_usage, elapsed_s, scale_s)
            else:  # "preemption" (span_reward gives this class no other term)
                term = _preemption_of(preemptions)
            products.append(w * term)
        return float(sum(products))

    def leftover(self, engine: "Engine", elapsed_s: float, left: int) -> float:
        """The charge for ``left`` unfinished jobs as if they waited ``elapsed_s`` more seconds."""
        return reward(self.weights, StepOutcome(elapsed_s, left, left, 0.0, 0), self._scale_s)


class TermReward:
    """A reward over any registered terms, or a callable spec: builds a :class:`StepOutcome` per
    span (with the jobs in the system when a term ``needs_jobs``) and sums weight x term."""

    __slots__ = ("_terms", "_scale_s", "weights", "needs_jobs")

    def __init__(self, spec: RewardSpec, scale_s: float = 3600.0) -> None:
        self._scale_s = scale_s
        if callable(spec) and not isinstance(spec, (str, Mapping)):
            name = getattr(spec, "__qualname__", None) or type(spec).__name__
            self.weights = {f"<callable {name}>": 1.0}
            self._terms: tuple[tuple[float, str, RewardFn, bool], ...] = ((1.0, name, spec, False),)
            self.needs_jobs = True  # a callable may read anything
            return
        self.weights = parse_reward(spec)
        terms = [(_REGISTRY[name], w) for name, w in self.weights.items()]
        self._terms = tuple((w, t.name, t.fn, t.builtin) for t, w in terms)
        self.needs_jobs = any(t.needs_jobs for t, _ in terms)

    def __call__(self, elapsed_s: float, in_system: int, queued: int, gpu_usage: float, preemptions: int,
                 jobs: tuple[JobSpec, ...] | None = None) -> float:
        return self.on(StepOutcome(elapsed_s, in_system, queued, gpu_usage, preemptions, self._scale_s, jobs))

    def on(self, outcome: StepOutcome) -> float:
        """The reward of ``outcome``: sum of weight x term."""
        return float(sum(w * (fn(outcome) if builtin else _value(name, fn, outcome))
                         for w, name, fn, builtin in self._terms))

    def leftover(self, engine: "Engine", elapsed_s: float, left: int) -> float:
        """The charge for ``left`` unfinished jobs as if they waited ``elapsed_s`` more seconds."""
        jobs = unfinished_jobs(engine) if self.needs_jobs else None
        return self.on(StepOutcome(elapsed_s, left, left, 0.0, 0, self._scale_s, jobs))


def span_reward(spec: RewardSpec, scale_s: float = 3600.0) -> SpanReward | TermReward:
    """The per-span reward of ``spec`` (a name, weights or a callable; see the module docstring):
    the fast :class:`SpanReward` when every term is a counting one, else a :class:`TermReward`.
    A bad spec is a ``ValueError`` starting ``reward:``."""
    if isinstance(spec, (str, Mapping)):
        weights = parse_reward(spec)
        if all(name in REWARD_TERMS for name in weights):
            return SpanReward(weights, scale_s)
        return TermReward(weights, scale_s)
    return TermReward(spec, scale_s)  # a callable (anything else: parse_reward's error naming it)


__all__ = ["BOUNDED_SLOWDOWN_TAU_S", "REWARD_TERMS", "RewardFn", "RewardSpec", "RewardTerm", "SpanReward",
           "StepOutcome", "TermReward", "bounded_slowdown", "jobs_in_system", "parse_reward",
           "register_reward_term", "reward", "reward_terms", "span_reward", "unfinished_jobs",
           "unregister_reward_term"]
