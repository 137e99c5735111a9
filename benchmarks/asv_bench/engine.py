"""Engine speed: ``fifo`` and ``lyra`` on bench-15d, and on the lyra-15d shape at x1 and x10.

* :class:`Bench15d` / :class:`TimeBench15d`: the whole ``bench-15d`` trace (50,000 jobs, 15 days)
  on 128 x 8 V100 + 32 x 8 T4 (the figures the README has quoted since the start; ``lyra`` takes
  about a minute, so these carry long timeouts).
* :class:`Scale` / :class:`TimeScale`: the ``lyra-15d`` shape (its "paper" cluster, 128 x 8 V100
  + 160 x 8 T4) at x1 and at x10 (cluster and jobs both ten times: 1,280 x 8 V100 + 1,600 x 8 T4),
  over a 2-day horizon with the mean jobs per day (``generate_trace('lyra-15d', 0, scale=N, days=2)``:
  6,666 and 66,666 jobs). ``track_us_per_job`` at scale 10 over scale 1 is the per-job cost of a
  ten times larger cluster. The x10 ``lyra`` run takes about 10 minutes on 2 busy cores, so
  ``setup_cache`` here takes about 11 (skip it with ``-b "^(?!engine.Scale)"``).

The ``track_*`` figures come from one simulation per parameter, run once in ``setup_cache``; the
``time_*`` benchmarks time ``Engine.run()`` alone (trace generation and engine construction are
in ``setup``). asv flags an increase as a regression, so compare ``track_us_per_job`` and
``time_run`` across commits; ``track_jobs_per_s`` is the unit the README quotes.
"""

from __future__ import annotations

from ._common import BENCH_CLUSTER, SimConfig, bench_15d, build_engine, lyra_15d, paper_config, registry, simulate

POLICIES = ["fifo", "lyra"]


def _figures(jobs, policy: str, config: SimConfig) -> dict[str, float]:
    m = simulate(list(jobs), policy, config, seed=0).metrics
    wall = m["sim_wall_s"]
    return {"jobs": len(jobs), "wall_s": round(wall, 6), "jobs_per_s": round(len(jobs) / wall, 1),
            "us_per_job": round(1e6 * wall / len(jobs), 1), "events_per_s": round(m["events"] / wall, 1),
            "finished": m["jobs_finished"]}


class Bench15d:
    """fifo and lyra over bench-15d on the benchmark cluster: jobs/s, events/s, microseconds per job."""

    params = (POLICIES,)
    param_names = ["policy"]
    days: float | None = None  # None: the whole trace (the smoke test sets a cut)
    timeout = 1800

    def setup_cache(self):
        config = SimConfig(cluster=BENCH_CLUSTER)
        return {p: _figures(bench_15d(self.days), p, config) for p in self.params[0]}

    setup_cache.timeout = 1800

    def track_jobs_per_s(self, cache, policy):
        return cache[policy]["jobs_per_s"]

    track_jobs_per_s.unit = "jobs/s"

    def track_events_per_s(self, cache, policy):
        return cache[policy]["events_per_s"]

    track_events_per_s.unit = "events/s"

    def track_us_per_job(self, cache, policy):
        return cache[policy]["us_per_job"]

    track_us_per_job.unit = "us/job"


class TimeBench15d:
    """Wall time of ``Engine.run()`` over bench-15d (one sample per round: lyra takes about a minute)."""

    params = (POLICIES,)
    param_names = ["policy"]
    days: float | None = None
    timeout = 900
    warmup_time = 0.0
    number = 1
    repeat = (1, 3, 30.0)

    def setup(self, policy):
        self.engine = build_engine(list(bench_15d(self.days)), registry.make(policy), SimConfig(cluster=BENCH_CLUSTER), 0)

    def time_run(self, policy):
        self.engine.run()


class Scale:
    """The lyra-15d shape, 2-day cut, at x1 and x10 cluster and jobs: jobs/s and microseconds per job."""

    params = (POLICIES, [1, 10])
    param_names = ["policy", "scale"]
    days = 2.0
    timeout = 3600

    def setup_cache(self):
        return {(p, s): _figures(lyra_15d(s, self.days), p, paper_config(s))
                for p in self.params[0] for s in self.params[1]}

    setup_cache.timeout = 3600

    def track_jobs_per_s(self, cache, policy, scale):
        return cache[policy, scale]["jobs_per_s"]

    track_jobs_per_s.unit = "jobs/s"

    def track_us_per_job(self, cache, policy, scale):
        return cache[policy, scale]["us_per_job"]

    track_us_per_job.unit = "us/job"

    def track_wall_s(self, cache, policy, scale):
        return cache[policy, scale]["wall_s"]

    track_wall_s.unit = "s"


class TimeScale:
    """Wall time of ``Engine.run()`` on the x1 2-day cut (the x10 run is tracked in :class:`Scale`)."""

    params = (POLICIES,)
    param_names = ["policy"]
    days = 2.0
    timeout = 600
    warmup_time = 0.0
    number = 1
    repeat = (1, 5, 30.0)

    def setup(self, policy):
        self.engine = build_engine(list(lyra_15d(1, self.days)), registry.make(policy), paper_config(1), 0)

    def time_run(self, policy):
        self.engine.run()


class PeakmemScale:
    """Peak memory of a ``fifo`` run on the 2-day cut at x1 and x10 (trace generation included)."""

    params = ([1, 10],)
    param_names = ["scale"]
    days = 2.0
    timeout = 900

    def peakmem_run(self, scale):
        simulate(list(lyra_15d(scale, self.days)), "fifo", paper_config(scale), seed=0)
