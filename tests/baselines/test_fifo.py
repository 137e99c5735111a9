"""``fifo`` is the plain loop the docs call the simplest reference: it keeps nothing between
decisions, and its hand-computed plans (head-of-line blocking, backfill) hold."""

from __future__ import annotations

import pickle

from lyra_baselines.fifo import FifoScheduler
from lyra_baselines.sjf import SjfScheduler
from toy import config, jct, job, run

# one 8-GPU server: X (6 GPUs, 100 s) from 0; H (4 GPUs, 10 s) at 1 cannot fit beside it; S (2 GPUs, 10 s)
# at 2 can. Without backfill H blocks S: H 100-110, S 100-110 (both fit then) -> JCTs H 109, S 108.
# With backfill S starts at 2: 2-12 -> JCT 10; H still waits for X: 109.
BLOCKED = [job("X", 0, 6, 100), job("H", 1, 4, 10), job("S", 2, 2, 10)]


def test_the_queue_head_blocks_the_jobs_behind_it():
    result = run(BLOCKED, FifoScheduler(), config())
    assert (jct(result, "X"), jct(result, "H"), jct(result, "S")) == (100, 109, 108)


def test_backfill_lets_a_later_job_that_fits_start_first():
    result = run(BLOCKED, FifoScheduler(backfill=True), config())
    assert (jct(result, "X"), jct(result, "H"), jct(result, "S")) == (100, 109, 10)


def test_fifo_and_sjf_keep_nothing_between_decisions():
    """After a run the scheduler holds its parameter alone (no cached view, placer or blocked head),
    so it pickles to what a fresh one pickles to."""
    for scheduler in (FifoScheduler(), FifoScheduler(backfill=True), SjfScheduler()):
        fresh = pickle.dumps(scheduler)
        run(BLOCKED, scheduler, config())
        assert vars(scheduler) == {"backfill": scheduler.backfill}
        assert pickle.dumps(scheduler) == fresh
