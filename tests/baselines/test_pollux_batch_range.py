"""Pollux searches the application's batch range, as the Pollux artifact (issue 25 item 4).

The artifact creates Pollux's jobs without the workload's batch (``simulator/simulator.py``) and
its ``GoodputFunction.optimize`` samples 50 global batches geometrically from
``max(init_batch_size, n x min_local_bsz)`` to ``max_batch_size`` with gradient accumulation,
rejecting micro-batches below ``min_local_bsz``. Hand values from the artifact's bert files:
M0 = 12 (validation-12.csv), largest batch 384, local batches 4..12 (placements.csv).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from lyra_baselines.pollux import BATCH_POINTS, PolluxScheduler, application_batches
from lyra_gym.model.config import load_config
from lyra_gym.run.simulate import simulate
from lyra_gym.workloads.realtraces import load_pollux

ROOT = Path(__file__).resolve().parents[2]


def test_application_batches_hand_check():
    out = application_batches(12, 384, 6, 4, 12)
    assert out[0] == 24.0 and out[-1] == 384.0  # max(M0 12, 6 GPUs x 4) .. the largest measured batch
    assert len(out) == BATCH_POINTS  # every micro-batch >= 4 here
    assert all(b > a for a, b in zip(out, out[1:]))
    # 16 GPUs: from 64; one GPU from M0 itself, above it at least one accumulation step
    assert application_batches(12, 384, 16, 4, 12)[0] == 64.0
    one = application_batches(12, 384, 1, 4, 12)
    assert one[0] == 12.0
    # one GPU at 13: local 13, accumulation forced to 1, micro-batch 7 >= 4: kept
    assert all(b >= 12 for b in one)
    # a start above the largest batch: that start alone
    assert application_batches(12, 384, 100, 4, 12) == [400.0]
    # micro-batch below min_local rejected: 1 GPU, min_local 10, lo 12 -> batch 13 splits into 2 x 7
    assert 13.0 not in application_batches(12, 20, 1, 10, 12)


class Recording(PolluxScheduler):
    def reset(self, rng):
        super().reset(rng)
        self.batches = []

    def decide(self, view):
        plan = super().decide(view)
        self.batches.append(dict(plan.batch_sizes))
        return plan


def _bert_alone():
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        config = load_config(ROOT / "traces" / "pollux-testbed-t4.yaml")
        path = Path(os.environ.get("TMPDIR", "/tmp")) / "lyra_gym_bert_alone.csv"
        path.write_text("name,time,application,num_replicas,batch_size\nbert-0,0,bert,6,384\n")
        jobs = list(load_pollux(path, profiles=ROOT / "traces" / "pollux-t4-profile.json"))
    finally:
        os.chdir(cwd)
    return config, jobs


@pytest.mark.parametrize("batch_range", ["application", "workload"])
def test_pollux_starts_in_the_application_range_not_at_the_workload_batch(batch_range):
    config, jobs = _bert_alone()
    pollux = Recording(batch_range=batch_range)
    simulate(jobs, pollux, config, seed=0)
    first = pollux.batches[0].get("bert-0", 384.0)  # not sent: it keeps the workload batch
    if batch_range == "application":
        assert 12 <= first < 384  # near the application's M0, below the workload's 384
    else:
        assert first >= 384  # the old rule never goes below the workload's batch


def test_fixed_batch_models_keep_the_workload_batch():
    config, jobs = _bert_alone()
    pollux = Recording(fixed_batch_models=("bert",))
    simulate(jobs, pollux, config, seed=0)
    assert all("bert-0" not in b for b in pollux.batches)  # never sent: it keeps 384


def test_batch_range_is_validated():
    with pytest.raises(ValueError, match="batch_range"):
        PolluxScheduler(batch_range="huge")
