"""Every registered scheduler gives the same run under different PYTHONHASHSEEDs (no set- or
dict-of-str iteration order leaks into a decision). Each hash seed needs its own interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import json
from lyra_gym.sim.scheduler import available
from lyra_gym.run.simulate import simulate
from lyra_gym.workloads.tracegen import generate_trace
jobs = generate_trace("small-1d", 3)[:120]
out = {}
for name in available():
    metrics = simulate(jobs, name, seed=1).metrics
    out[name] = {k: v for k, v in metrics.items() if "wall" not in k}
print(json.dumps(out, sort_keys=True))
"""


def run_with_hash_seed(seed: int) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_every_scheduler_is_independent_of_the_hash_seed():
    first, second = run_with_hash_seed(0), run_with_hash_seed(12345)
    assert set(first) == set(second) and len(first) >= 10
    for name in first:
        assert first[name] == second[name], name
