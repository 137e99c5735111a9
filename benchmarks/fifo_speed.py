"""``fifo``'s run-loop time: the plain loop (``baselines/fifo.py``) against the fast variant
(``baselines/fifo_fast.py``) on ``bench-15d`` (50,000 jobs) on the benchmark cluster.

Run: python benchmarks/fifo_speed.py [--days 15] [--rounds 5] [--backfill]

Each round builds both engines (trace and construction untimed) and times ``Engine.run()`` in
process time, alternating which goes first; it prints min and median us/job of each and the
fast/plain ratio of the minima, and checks that both runs finished every job at the same times.
"""

from __future__ import annotations

import argparse
import statistics
import time

from lyra_baselines.fifo import FifoScheduler
from lyra_baselines.fifo_fast import FastFifoScheduler
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.run.simulate import build_engine
from lyra_gym.workloads.tracegen import generate_trace

#: 128 x 8 V100 training, 32 x 8 T4 inference (benchmarks/bench_cluster.yaml).
BENCH_CLUSTER = ClusterConfig(training=(ServerGroup(128, "v100", 8),), inference=ServerGroup(32, "t4", 8))


def timed_run(jobs: list, scheduler: FifoScheduler) -> tuple[float, list]:
    """(process seconds of ``Engine.run()``, (job id, finish s) of every job)."""
    engine = build_engine(jobs, scheduler, SimConfig(cluster=BENCH_CLUSTER), 0)
    start = time.process_time()
    engine.run()
    spent = time.process_time() - start
    return spent, sorted((j.spec.job_id, j.finish_time) for j in engine.jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=float, default=15.0, help="jobs submitted in the first DAYS days")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backfill", action="store_true")
    args = parser.parse_args()
    jobs = [j for j in generate_trace("bench-15d", 0) if j.submit_time < args.days * 86_400]
    kinds = {"plain": FifoScheduler, "fast": FastFifoScheduler}
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for r in range(args.rounds):
        finishes = {}
        for name in (list(kinds) if r % 2 == 0 else list(kinds)[::-1]):
            spent, finishes[name] = timed_run(jobs, kinds[name](backfill=args.backfill))
            times[name].append(spent)
        assert finishes["plain"] == finishes["fast"], "fast fifo finished jobs at other times"
    for name, spent in times.items():
        print(f"{name}: min {1e6 * min(spent) / len(jobs):.1f} us/job, "
              f"median {1e6 * statistics.median(spent) / len(jobs):.1f} us/job ({len(jobs)} jobs)")
    print(f"fast / plain (min): {min(times['fast']) / min(times['plain']):.3f}")


if __name__ == "__main__":
    main()
