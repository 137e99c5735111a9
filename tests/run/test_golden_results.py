"""Every registered policy's results, bit for bit, against stored digests.

Speed work and reorganisations must not change a single result. Each case runs a
policy on a fixed trace and config and hashes every metric (``repr`` of the float, so
the last bit counts; ``sim_wall_s`` left out, it is wall-clock time) and every job row.
The digests live in ``tests/fixtures/golden_digests.json``; a change that is *meant* to
change results regenerates them (``python -m tests.run.test_golden_results --update``) and
says why in its commit.

Cases: ``traces/default.csv`` on the default config; the first day of ``lyra-15d`` on its
own cluster (``traces/lyra-15d.yaml``, the headline's shape); the Pollux artifact's
workload 6 on the T4 testbed (``tests/fixtures/pollux/workload-6.csv``, converted as the
README's ``pollux-testbed-t4`` commands do); ``traces/default.csv`` again with durations
believed from history (``knowledge.mode: history``: what the schedulers read is the knowledge
model's, its kept answers included).
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from tests.digests import ROOT, result_digest, stored, update_main

DIGESTS = ROOT / "tests" / "fixtures" / "golden_digests.json"
LYRA_15D_CUT_S = 86400.0  # the first day of lyra-15d seed 0


@lru_cache(maxsize=None)
def _case(name: str):
    from lyra_gym.model.config import SimConfig, load_config
    from lyra_gym.workloads.trace import load_trace
    from lyra_gym.workloads.tracegen import generate_trace

    if name == "default":
        return load_trace(ROOT / "traces" / "default.csv"), SimConfig()
    if name == "default-history":
        from lyra_gym.model.knowledge import KnowledgeConfig

        return load_trace(ROOT / "traces" / "default.csv"), SimConfig(knowledge=KnowledgeConfig(mode="history"))
    if name == "lyra-15d-day1":
        jobs = [j for j in generate_trace("lyra-15d", 0) if j.submit_time < LYRA_15D_CUT_S]
        return jobs, load_config(ROOT / "traces" / "lyra-15d.yaml")
    if name == "workload-6-t4":
        from lyra_gym.workloads.realtraces import load_pollux

        converted = load_pollux(ROOT / "tests" / "fixtures" / "pollux" / "workload-6.csv",
                                profiles=ROOT / "traces" / "pollux-t4-profile.json")
        return list(converted), load_config(ROOT / "traces" / "pollux-testbed-t4.yaml")
    raise KeyError(name)


def _policies() -> list[str]:
    from lyra_gym.sim import scheduler as registry
    return [p for p in registry.available() if ":" not in p]


def digest(case: str, policy: str) -> str:
    """SHA-256 of one run's metrics (``repr`` of each value) and job rows."""
    from lyra_gym.run.simulate import simulate

    jobs, config = _case(case)
    return result_digest(simulate(jobs, policy, config, seed=0))


CASES = ("default", "default-history", "lyra-15d-day1", "workload-6-t4")


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # the shipped configs name their profiles relative to the root


def _stored() -> dict[str, dict[str, str]]:
    return stored(DIGESTS)


@pytest.mark.parametrize("case", CASES)
def test_every_registered_policy_is_covered(case):
    assert sorted(_stored().get(case, {})) == sorted(_policies()), \
        f"golden digests out of date for {case}: run python -m tests.run.test_golden_results --update"


@pytest.mark.parametrize("policy", _policies())
@pytest.mark.sample(2)
def test_default_trace_results_are_unchanged_bit_for_bit(policy):
    assert digest("default", policy) == _stored()["default"][policy]


@pytest.mark.parametrize("policy", _policies())
@pytest.mark.sample(2)
def test_default_trace_under_history_knowledge_is_unchanged_bit_for_bit(policy):
    assert digest("default-history", policy) == _stored()["default-history"][policy]


@pytest.mark.parametrize("policy", [pytest.param(p, marks=pytest.mark.slow) if p.startswith("pollux") else p
                                    for p in _policies()])  # (pollux's short case: the default trace)
@pytest.mark.sample(2)
def test_workload_6_results_are_unchanged_bit_for_bit(policy):
    assert digest("workload-6-t4", policy) == _stored()["workload-6-t4"][policy]


@pytest.mark.slow
@pytest.mark.parametrize("policy", _policies())
def test_lyra_15d_first_day_results_are_unchanged_bit_for_bit(policy):
    assert digest("lyra-15d-day1", policy) == _stored()["lyra-15d-day1"][policy]


if __name__ == "__main__":
    update_main(DIGESTS, lambda: {case: {p: digest(case, p) for p in _policies()} for case in CASES},
                "-m tests.run.test_golden_results")
