"""``env.unwrapped.fork()``: an independent copy of an environment that continues identically.

For search and rollouts (tree search, counterfactual rollouts, what-if evaluation): the fork holds
its own copy of everything an episode changes (the engine and its jobs, the guided heuristic's
state, the agent's decision in progress, the observation, the masks, the counters and the
environment's random generator ``np_random``), so the same actions on the fork and on the original
give the same observations, rewards, flags and infos, bit for bit, and stepping (or resetting)
either one never affects the other.

What no episode changes is shared, not copied: the environment's
:class:`~lyra_gym.envs.episode.EpisodeSource` (the trace and its windows, the cluster config, the
profiles, the reward) and the profiles' memos of pure functions, which makes a fork several times
cheaper than ``copy.deepcopy(env)`` (measured after 30 expert steps of the default ``Elastic-v1``
and ``Alloc-v1``: about 9 ms of CPU instead of 63-69 ms).
Wrappers are not part of the fork: wrap it again if needed (``copy.deepcopy`` of a wrapped stack
copies the wrappers, and the source with them).
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

_Env = TypeVar("_Env", bound="ForkMixin")


def shared_memo(source: object) -> dict[int, Any]:
    """A ``copy.deepcopy`` memo that maps ``source``, its attributes and the trace's jobs to
    themselves (so they are shared, not copied)."""
    memo: dict[int, Any] = {id(source): source}
    for value in vars(source).values():
        memo[id(value)] = value
    for spec in getattr(source, "trace", ()):
        memo[id(spec)] = spec
    # the profiles' memos of pure functions (ProfileSet.memo: every engine on these profiles, each
    # episode's included, shares them already; e.g. the ScalingModel's rates)
    for memos in getattr(getattr(source, "profiles", None), "_memos", {}).values():
        memo[id(memos)] = memos
        for inner in memos.values():
            memo[id(inner)] = inner
    return memo


class ForkMixin:
    """Gives an environment with a read-only ``source`` (an :class:`EpisodeSource`) :meth:`fork`."""

    source: Any

    def fork(self: _Env) -> _Env:
        """An independent copy of this environment (unwrapped) in its current state, random
        generator included: the same actions on both give the same results, bit for bit (the
        ``sim_wall_s`` wall-clock of ``final_metrics`` aside), and neither affects the other.
        The read-only :class:`~lyra_gym.envs.episode.EpisodeSource` is shared."""
        return copy.deepcopy(self, shared_memo(self.source))


__all__ = ["ForkMixin", "shared_memo"]
