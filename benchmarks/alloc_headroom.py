"""Headroom probe for ``LyraGym/Alloc-v1``: what a scripted policy that preempts gets over ``lyra``.

Run: python benchmarks/alloc_headroom.py [--scenario contended] [--windows 3] [--ratios 2,4,8]

Lyra never preempts a running job's base workers: a short job that arrives at a
full cluster waits behind long ones. Alloc-v1 lets the agent preempt (place
value ``wait`` for a running job), so shortest-remaining-time-first with
preemption is expressible there. This probe plays it through the env's own
sub-actions, so it measures what the action space allows, not a new scheduler:

at every decision point, for each job the heuristic leaves queued (shortest
remaining time first, oracle durations as in ``lyra``'s SJF), preempt the
visible running job with the longest remaining time if that is more than
``ratio`` x the queued job's and freeing its GPUs lets the queued job start at
its base demand on training GPUs; then the heuristic's expert sub-actions
settle the rest. Loaning stays the heuristic's. Each ``ratio`` is one row;
``lyra`` (the expert) is the reference, on the same windows and seeds.

A second row bounds every policy: each job alone on the reference GPUs (the
training pool's type) at its best worker count in each part of its progress,
from its submission, with no wait and no overhead; the engine's own rate
function (scaling semantics and statistical efficiency included). No schedule
reaches it (the cluster is finite); mean JCT below it is impossible.

Not a test and not shipped as a policy: it bounds what learning could find in
this direction, and is reported in the README as the measured headroom.
"""

from __future__ import annotations

import argparse
import math
from typing import Iterator, Sequence

import gymnasium as gym
import numpy as np

import lyra_gym  # noqa: F401  (registers the ids)
from lyra_agents.evaluate import rollout
from lyra_agents.scenarios import SUITE
from lyra_gym.envs import ALLOC_ENV_ID
from lyra_gym.envs.alloc import BORROW, RETURN, WAIT, AllocDecision, worker_options
from lyra_gym.model.jobs import JobState
from lyra_gym.model.scaling import PROGRESS_BINS


def remaining(job) -> float:
    """Seconds to finish at its requested size on the reference GPUs (lyra's SJF key)."""
    return job.remaining_time_at(job.spec.num_gpus)


def preemptions(decision: AllocDecision, ratio: float) -> Iterator[int]:
    """Sub-actions that preempt long running jobs for short queued ones (see the module docstring)."""
    layout, targets = decision.layout, decision.proposal.allocations
    slots = list(enumerate(decision.slots))
    queued = sorted(((i, j) for i, j in slots if j.state is JobState.QUEUED and not targets.get(j.id)),
                    key=lambda s: remaining(s[1]))
    victims = sorted(((i, j) for i, j in slots if j.state is JobState.RUNNING and j.id not in decision.must),
                     key=lambda s: -remaining(s[1]))
    for qi, q in queued:
        need = decision.heuristic.base_demand(q)  # lyra's phase-1 size: its minimum if elastic
        level = worker_options(q.spec, layout.levels).index(need)
        for n, (vi, v) in enumerate(victims):
            if remaining(v) <= ratio * remaining(q):
                break
            if decision.fits_if_freed(q, 0, need, freed=v):
                yield vi
                yield WAIT
                yield qi
                value = layout.place_index(0, level)
                yield value if decision.options[value] is not False else WAIT
                del victims[n]
                break


def probe_policy(ratio: float):
    """``choose(env, obs)`` for :func:`lyra_agents.evaluate.rollout`: the scripted preemptions, then the expert."""
    state: dict[str, object] = {"decision": None, "script": iter(())}

    def choose(env, _obs) -> np.int64:
        decision = env.decision
        if decision is None or decision.phase in (BORROW, RETURN):
            return env.expert_action()
        if state["decision"] is not decision:
            state["decision"], state["script"] = decision, preemptions(decision, ratio)
        value = next(state["script"], None)  # type: ignore[call-overload]
        return np.int64(decision.expert() if value is None else value)

    return choose


def isolated_bound(env, window: int) -> float:
    """Mean JCT (s) of test ``window`` if each job ran alone from submission (see the module docstring)."""
    env.reset(options={"split": "test", "window": window})
    engine = env.engine
    scaling, gpu, per_server = engine.scaling, frozenset((engine.reference_gpu,)), engine.reference_gpus_per_server
    times = []
    for job in engine.jobs:
        spec = job.spec
        sizes = range(spec.min_gpus, spec.max_gpus + 1) if spec.elastic else (spec.num_gpus,)
        t = 0.0
        for part in range(PROGRESS_BINS):
            best = max(scaling.rate(spec, job.init_batch, w, math.ceil(w / per_server), gpu,
                                    scaling.global_batch(spec, job.init_batch, w, job.batch), part) for w in sizes)
            t += job.total_work / PROGRESS_BINS / best
        times.append(t)
    return float(np.mean(times))


def run(scenario: str, windows: Sequence[int], ratios: Sequence[float], slots: int) -> list[tuple[str, list[float]]]:
    env = gym.make(ALLOC_ENV_ID, num_job_slots=slots, **SUITE[scenario].env_kwargs()).unwrapped
    rows = [("lyra (expert)", [rollout(env, lambda e, _o: e.expert_action(), w)["jct_mean_s"] for w in windows])]
    rows.append(("bound: each job alone, best size, no wait", [isolated_bound(env, w) for w in windows]))
    for ratio in ratios:
        choose = probe_policy(ratio)
        rows.append((f"preempt ratio {ratio:g}", [rollout(env, choose, w)["jct_mean_s"] for w in windows]))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="contended", choices=sorted(SUITE))
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--ratios", default="2,4,8")
    parser.add_argument("--slots", type=int, default=32)
    args = parser.parse_args(argv)
    windows = list(SUITE[args.scenario].windows[: args.windows])
    rows = run(args.scenario, windows, [float(r) for r in args.ratios.split(",")], args.slots)
    lyra = np.mean(rows[0][1])
    print(f"{args.scenario}, test windows {windows}, K = {args.slots}: mean JCT s per window, mean, / lyra")
    for name, jcts in rows:
        print(f"| {name} | {' | '.join(f'{j:,.0f}' for j in jcts)} | {np.mean(jcts):,.0f} | {np.mean(jcts) / lyra:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
