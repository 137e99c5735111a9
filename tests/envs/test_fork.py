"""``env.unwrapped.fork()`` (lyra_gym/envs/snapshot.py): an independent copy that continues
identically, random generator included, on all four environments; stepping or resetting the
fork leaves the original as it was."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import lyra_gym  # noqa: F401  (registers the ids)
from lyra_gym.envs import ALL_ENV_IDS

#: Short windows and a few steps per episode, so the runs cross resets (train windows drawn by
#: each env's own np_random: reset() without a seed).
KWARGS = dict(window_s=2 * 3600.0, max_steps=7)
WALL_CLOCK = "sim_wall_s"


def masked_random(env, rng: np.random.Generator):
    """A random valid action (per dimension for MultiDiscrete)."""
    masks = env.action_masks()
    nvec = getattr(env.action_space, "nvec", None)
    if nvec is None:
        return np.int64(rng.choice(np.flatnonzero(masks)))
    action, start = np.zeros(len(nvec), dtype=np.int64), 0
    for d, n in enumerate(nvec.tolist()):
        action[d] = rng.choice(np.flatnonzero(masks[start:start + n]))
        start += n
    return action


def record(env, out) -> str:
    """Everything a step or reset gives, as text (the wall-clock time of final_metrics aside)."""
    obs, *rest, info = out
    info = {k: ({m: x for m, x in v.items() if m != WALL_CLOCK} if k == "final_metrics" else v)
            for k, v in info.items()}
    return f"{obs.tobytes().hex()} {env.action_masks().tobytes().hex()} {rest!r} {sorted(info.items())!r}"


def play(env, seed: int, steps: int) -> list[str]:
    """``steps`` seeded random steps, resetting (no seed: the env's own generator) at each end."""
    rng, log = np.random.default_rng(seed), []
    for _ in range(steps):
        out = env.step(masked_random(env, rng))
        log.append(record(env, out))
        if out[2] or out[3]:
            log.append(record(env, env.reset()))
    return log


@pytest.mark.parametrize("env_id", ALL_ENV_IDS)
@pytest.mark.sample(3)
def test_a_fork_continues_identically_and_leaves_the_original_alone(env_id):
    original = gym.make(env_id, **KWARGS).unwrapped
    reference = gym.make(env_id, **KWARGS).unwrapped  # the same run, never forked
    for env in (original, reference):
        env.reset(seed=11)
    assert play(original, 1, 5) == play(reference, 1, 5)

    fork = original.fork()
    assert type(fork) is type(original) and fork is not original
    assert fork.episode is not original.episode and fork.engine is not original.engine
    assert fork.source is original.source  # read-only, shared
    # the fork runs ahead, across resets drawn by its own generator, and is then reset by a seed
    ahead = play(fork, 2, 30)
    fork.reset(seed=99)
    # the original is as it was: it continues as the never-forked reference does
    assert play(original, 2, 30) == play(reference, 2, 30) == ahead


@pytest.mark.parametrize("env_id", ["LyraGym/Cluster-v1", "LyraGym/Alloc-v1"])
def test_forks_of_a_fork_and_before_the_first_reset(env_id):
    env = gym.make(env_id, **KWARGS).unwrapped
    blank = env.fork()  # no episode yet: a fresh copy
    assert blank.episode is None
    for e in (env, blank):
        e.reset(seed=5)
    assert play(env.fork(), 3, 12) == play(blank.fork().fork(), 3, 12) == play(env, 3, 12)


def test_a_fork_shares_the_caches_of_pure_functions():
    """What is kept of pure functions across episodes is shared by a fork, not copied (Lyra's rates
    by model, ``LyraRates.__deepcopy__``; the observation builder's efficiencies and loaned-type
    rates, ``ObservationBuilder.__deepcopy__``), so a fork's cost does not grow with them; the
    per-episode state is the fork's own."""
    env = gym.make("LyraGym/Cluster-v1", **KWARGS).unwrapped
    env.reset(seed=3)
    play(env, 4, 12)  # several episodes: the caches are filled and shared across them
    fork = env.fork()
    for name in ("_efficiency", "_shared_goodput", "_shared_parts"):
        assert getattr(fork.builder, name) is getattr(env.builder, name)
    rates, forked = env.episode.heuristic.memory.rates, fork.episode.heuristic.memory.rates
    assert forked is not rates and forked._goodputs is rates._goodputs and forked._rows is rates._rows
    assert forked._sjf_keys is not rates._sjf_keys  # by job id: the episode's own
    assert play(fork, 5, 10) == play(env, 5, 10)
