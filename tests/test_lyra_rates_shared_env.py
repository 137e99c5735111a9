"""Lyra's pure rate caches shared through the profile set's memo (``LyraRates.settle``) across an
env's episodes: seeded rollouts over several episodes are bit for bit those where every run starts
its caches afresh (every observation, mask, reward and info item, the final metrics included:
``tests/test_env_equivalence.py``'s digest)."""

from __future__ import annotations

import pytest

import lyra_baselines.lyra_rates as lyra_rates
from lyra_baselines.lyra import LyraScheduler
from lyra_baselines.lyra_rates import LyraRates
from test_env_equivalence import CONTENDED, ENV_CASES, env_digest

SHORT = dict(window_s=2 * 3600.0)
#: case -> (env id, keywords, is anything shared): 2-hour windows, so 200 steps see several episodes
CASES = {
    "cluster-contended": ("LyraGym/Cluster-v1", dict(config=CONTENDED, num_server_slots=4, **SHORT), True),
    "loaning-contended": ("LyraGym/Loaning-v1", dict(config=CONTENDED, **SHORT), True),
    "elastic-k8": ("LyraGym/Elastic-v1", dict(num_job_slots=8, **SHORT), True),
    "elastic-throughput-rate": ("LyraGym/Elastic-v1", dict(config=CONTENDED, heuristic=f"{__name__}:throughput_lyra",
                                                           **SHORT), True),
    "elastic-adaptive": ("LyraGym/Elastic-v1", dict(config={"scaling": "adaptive"}, **SHORT), False),
    "cluster-estimates": ("LyraGym/Cluster-v1", dict(config={"knowledge": {"mode": "estimate"}}, **SHORT), False),
}


def throughput_lyra() -> LyraScheduler:
    """Lyra valuing by the profile's samples/s (the heuristic of one case above)."""
    return LyraScheduler(value_rate="throughput")


@pytest.mark.parametrize("case", CASES)
def test_shared_caches_give_the_rollouts_of_fresh_ones(monkeypatch, case):
    env_id, keywords, shared = CASES[case]
    monkeypatch.setitem(ENV_CASES, case, (env_id, keywords, "random", None))
    taken: list[bool] = []  # per run: did it start with rows an earlier run computed?
    settle = LyraRates.settle

    def watched(self, view):
        settle(self, view)
        taken.append(bool(self._rows))  # value rows: asked in every case, under either value_rate

    monkeypatch.setattr(LyraRates, "settle", watched)
    digest = env_digest(case, 200)
    assert len(taken) >= 3 and all(taken[1:]) is shared
    monkeypatch.setattr(lyra_rates, "SHARED_ENTRIES", -1)  # every run empties the memo: nothing shared
    taken.clear()
    assert env_digest(case, 200) == digest and len(taken) >= 3 and not any(taken)
