"""Whole-process time of ``lyra-gym simulate --policy fifo`` against the Helios artifact's
simulator on the same 50,000 jobs (issue 24): wall seconds and CPU seconds of each process.

The Helios artifact (Hu et al., "Characterization and Prediction of Deep Learning Workloads in
Large-Scale GPU Datacenters", SC'21) ships a trace-driven simulator, ``framework/QSSF Service/
simulator.py``, that steps a cluster one second at a time (FIFO, SJF, SRTF and QSSF policies,
consolidated placement by default). Its code never enters this project: clone it anywhere and
pass the clone's path (it needs pandas; ``pip install pandas``)::

    git clone https://github.com/S-Lab-System-Group/HeliosArtifact /tmp/helios
    python benchmarks/helios_compare.py /tmp/helios [--repeats 3] [--lyra-root .]

On a shared machine the CPU seconds (user + system, of the process and the processes it waited
for) are the steadier figure; the wall seconds are what a user waits.

What runs (each a separate process, timed from start to exit, alternating, median of
``--repeats``):

* the trace: the ``bench-15d`` preset (50,000 jobs of 1-64 GPUs over 15 days) calibrated to its
  offered load of 0.85 on this cluster's 640 GPUs instead of its 1,024
  (``generate_trace(replace(PRESETS["bench-15d"], reference_gpus=640), 0)``). As is, it offers
  640 GPUs a load of 1.36: the queue grows without end (12,000 jobs at day 10), and the Helios
  simulator, which sorts its whole queue every simulated second, slows down with it (15 minutes
  for its first 10 days on this machine) -- a measure of an overloaded queue, not of the
  simulators. Then integer seconds, the granularity of the Helios simulator's clock: durations
  rounded (at least 1 s) and submit times rounded, then moved up where needed so they strictly
  increase (the Helios loader sorts with an unstable sort, so equal submit times could reach its
  queue in another order), the first at 0 s (the Helios loader moves it there). Every job is
  inelastic at its ``num_gpus``.
* ``python -m lyra_gym.cli simulate --policy fifo`` on that trace as a lyra-gym CSV, on 80 x 8
  V100 training GPUs and no inference servers (so no loaning), ``placement: consolidated`` (the
  Helios placer's rule) and no restart overhead (Helios has none), run from ``--lyra-root``
  (default: this checkout; ``python -m`` imports the package from there).
* the Helios simulator, ``simulator.py -e Philly -s fifo -p consolidate -j 1``, on the same jobs
  as one virtual cluster ``vc0`` of 80 eight-GPU nodes (``cluster_log.csv`` in its Philly
  columns, ``vc_dict_homo.pkl``), ``TZ=UTC``. After the run it tabulates the mean JCT of every
  policy it knows (``utils.cluster_analysis``) and stops at the first missing log; one-line
  placeholder logs for the three other policies let it finish (reading them costs milliseconds).
  It runs from a copy of ``framework/QSSF Service`` in the work folder. Its start-up reads
  ``estimators/Philly_lgb.csv`` (QSSF's priorities; FIFO never uses them), a large file that a
  clone without its large blobs lacks; then the copy gets a stand-in of one row per job.

Both must report the same workload: the script prints each side's mean JCT and queueing time
and how many jobs have the same JCT on both sides (matched by ``job_id``, which Helios keeps as
``jobname``), and says so when they differ.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import pickle
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Sequence

REPO = Path(__file__).resolve().parent.parent
HELIOS_SIM_DIR = Path("framework") / "QSSF Service"  # inside the artifact
HELIOS_EPOCH = dt.datetime(2017, 10, 1)  # the start of its Philly experiment's trace range
HELIOS_RANGE_S = 61 * 86400 - 60  # its Philly range ends 2017-11-30 23:59:00
HELIOS_VC = "vc0"
HELIOS_OTHER_POLICIES = ("sjf", "srtf", "qssf")  # the logs utils.cluster_analysis reads besides fifo's
SERVERS, GPUS_PER_SERVER = 80, 8

LYRA_CONFIG = f"""\
# helios_compare: {SERVERS} x {GPUS_PER_SERVER} V100 training GPUs, no inference servers (no loaning),
# the Helios placer's rule and no restart overhead (the Helios simulator charges none).
cluster:
  training:
    - {{count: {SERVERS}, gpu_type: v100, gpus_per_server: {GPUS_PER_SERVER}}}
  inference: {{count: 0, gpu_type: t4, gpus_per_server: 8}}
placement: consolidated
overheads: {{restart_s: 0}}
"""


@dataclass(frozen=True)
class Job:
    """One job of the comparison: integer seconds, as the Helios simulator's clock."""

    job_id: str
    submit_s: int
    num_gpus: int
    duration_s: int
    model: str


def integer_jobs(specs: Iterable) -> list[Job]:
    """``JobSpec`` items in submit order as :class:`Job`: durations rounded (>= 1 s), submit times
    rounded, moved up to strictly increase, and shifted so the first is at 0 s."""
    jobs: list[Job] = []
    previous = None
    for s in sorted(specs, key=lambda s: s.submit_time):
        submit = round(s.submit_time)
        if previous is not None and submit <= previous:
            submit = previous + 1
        previous = submit
        jobs.append(Job(s.job_id, submit, s.num_gpus, max(1, round(s.duration)), s.model))
    first = jobs[0].submit_s if jobs else 0
    return [Job(j.job_id, j.submit_s - first, j.num_gpus, j.duration_s, j.model) for j in jobs]


def lyra_rows(jobs: Sequence[Job]) -> list[list[str]]:
    """The lyra-gym trace CSV (header first): every job inelastic."""
    rows = [["job_id", "submit_time", "num_gpus", "duration", "model", "elastic", "min_gpus", "max_gpus"]]
    rows += [[j.job_id, str(j.submit_s), str(j.num_gpus), str(j.duration_s), j.model, "0", "", ""] for j in jobs]
    return rows


def helios_rows(jobs: Sequence[Job]) -> list[list[str]]:
    """The Helios ``cluster_log.csv`` (header first) in the columns its Philly loader reads."""
    rows = [["job_id", "user", "vc", "jobname", "gpu_num", "state", "submit_time", "duration"]]
    for j in jobs:
        when = (HELIOS_EPOCH + dt.timedelta(seconds=j.submit_s)).strftime("%Y-%m-%d %H:%M:%S")
        rows.append([j.job_id, "u0", HELIOS_VC, j.job_id, str(j.num_gpus), "Pass", when, str(j.duration_s)])
    return rows


def write_csv(path: Path, rows: Sequence[Sequence[str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)


def read_jct(path: Path, id_column: str, jct_column: str) -> dict[str, float]:
    """``{job id: JCT in seconds}`` of a per-job CSV (rows without a JCT left out)."""
    with open(path, newline="", encoding="utf-8") as fh:
        return {r[id_column]: float(r[jct_column]) for r in csv.DictReader(fh) if r[jct_column] not in ("", "None")}


def agreement(a: dict[str, float], b: dict[str, float], tolerance_s: float = 1e-6) -> tuple[int, int]:
    """(jobs in both with the same JCT within ``tolerance_s``, jobs in both)."""
    common = a.keys() & b.keys()
    return sum(abs(a[k] - b[k]) <= tolerance_s for k in common), len(common)


def median_range(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.2f} s (range {min(values):.2f}-{max(values):.2f})"


@dataclass(frozen=True)
class Timing:
    """One process run: wall seconds from start to exit, and CPU seconds (user + system) of it and
    every process it waited for (Helios simulates in a pool worker)."""

    wall_s: float
    cpu_s: float


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: Sequence[str], cwd: Path, env: dict[str, str], log: Path) -> Timing:
    """Run ``command`` to its end, its output to ``log``; a failure is fatal."""
    with open(log, "w") as out:
        cpu, start = children_cpu_s(), time.perf_counter()
        done = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        timing = Timing(time.perf_counter() - start, children_cpu_s() - cpu)
    if done.returncode != 0:
        sys.exit(f"helios_compare: {' '.join(command)} (in {cwd}) exited {done.returncode}; see {log}:\n"
                 + log.read_text()[-3000:])
    return timing


class Setup:
    """The trace and config in ``work``, and the two commands."""

    def __init__(self, work: Path, helios: Path, lyra_root: Path, jobs: Sequence[Job]) -> None:
        self.work, self.lyra_root = work, lyra_root
        self.helios_dir = helios / HELIOS_SIM_DIR
        if not (self.helios_dir / "simulator.py").is_file():
            sys.exit(f"helios_compare: no {HELIOS_SIM_DIR / 'simulator.py'} under {helios}; clone "
                     f"https://github.com/S-Lab-System-Group/HeliosArtifact and pass its path")
        if jobs[-1].submit_s > HELIOS_RANGE_S:
            sys.exit("helios_compare: the trace is longer than the Helios Philly experiment's 61 days")
        self.helios_dir = self.copy_simulator(self.helios_dir, jobs)
        self.trace, self.config = work / "trace.csv", work / "cluster.yaml"
        write_csv(self.trace, lyra_rows(jobs))
        self.config.write_text(LYRA_CONFIG)
        self.helios_data = work / "helios_data"
        self.helios_data.mkdir(exist_ok=True)
        write_csv(self.helios_data / "cluster_log.csv", helios_rows(jobs))
        with open(self.helios_data / "vc_dict_homo.pkl", "wb") as fh:
            pickle.dump({HELIOS_VC: SERVERS}, fh)
        self.lyra_out = work / "lyra_out"
        self.env = {**os.environ, "TZ": "UTC", "PYTHONHASHSEED": "0"}

    def copy_simulator(self, source: Path, jobs: Sequence[Job]) -> Path:
        """The simulator's code in ``work/helios_sim`` (the clone is left as it is), with a stand-in
        ``estimators/Philly_lgb.csv`` where the clone lacks that large file (see the module docstring)."""
        target = self.work / "helios_sim"
        skip = shutil.ignore_patterns("*.pdf", "*.ipynb", "data", "log")
        shutil.copytree(source, target, dirs_exist_ok=True, ignore=skip)
        estimates = target / "estimators" / "Philly_lgb.csv"
        if not estimates.is_file() or estimates.stat().st_size == 0:
            print(f"note: {source / 'estimators' / 'Philly_lgb.csv'} is missing; a stand-in with one priority per "
                  f"job is used (only QSSF reads its values; FIFO only loads it)", flush=True)
            write_csv(estimates, [["jobname", "priority"], *([j.job_id, str(j.duration_s)] for j in jobs)])
        return target

    def run_lyra(self) -> Timing:
        command = [sys.executable, "-m", "lyra_gym.cli", "simulate", "--policy", "fifo", "--trace", str(self.trace),
                   "--config", str(self.config), "--out", str(self.lyra_out), "--overwrite"]
        return timed(command, self.lyra_root, self.env, self.work / "lyra.log")

    def helios_log_dir(self) -> Path:
        return self.work / "helios_log"

    def run_helios(self) -> Timing:
        logs = self.helios_log_dir()
        shutil.rmtree(logs, ignore_errors=True)
        experiment = logs / "Philly"
        (experiment / "logfile").mkdir(parents=True)
        for folder in (HELIOS_VC, "all"):
            (experiment / folder).mkdir()
            for policy in HELIOS_OTHER_POLICIES:  # placeholders: see the module docstring
                (experiment / folder / f"{policy}_consolidate_{folder}_log.csv").write_text("jct,queue\n0,0\n")
        command = [sys.executable, "simulator.py", "-e", "Philly", "-t", str(self.helios_data), "-l", str(logs),
                   "-s", "fifo", "-p", "consolidate", "-j", "1"]
        return timed(command, self.helios_dir, self.env, self.work / "helios.log")

    def jct(self) -> tuple[dict[str, float], dict[str, float]]:
        lyra = read_jct(self.lyra_out / "jobs.csv", "job_id", "jct_s")
        helios = read_jct(self.helios_log_dir() / "Philly" / HELIOS_VC / f"fifo_consolidate_{HELIOS_VC}_log.csv",
                          "jobname", "jct")
        return lyra, helios


def mean_queue(path: Path, column: str) -> float:
    with open(path, newline="", encoding="utf-8") as fh:
        values = [float(r[column]) for r in csv.DictReader(fh) if r[column] not in ("", "None")]
    return statistics.fmean(values)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("helios", type=Path, help="a clone of github.com/S-Lab-System-Group/HeliosArtifact")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each side, alternating (default 3)")
    parser.add_argument("--lyra-root", type=Path, default=REPO,
                        help="the lyra-gym checkout whose package `python -m lyra_gym.cli` runs (default: this one)")
    parser.add_argument("--helios-only-once", action="store_true",
                        help="run the Helios simulator once (for a quick check of lyra-gym changes)")
    parser.add_argument("--work", type=Path, help="keep the trace, config and outputs here (default: a temp dir)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.lyra_root))
    from lyra_gym.workloads.tracegen import PRESETS, generate_trace

    jobs = integer_jobs(generate_trace(replace(PRESETS["bench-15d"], reference_gpus=SERVERS * GPUS_PER_SERVER), 0))
    work = args.work or Path(tempfile.mkdtemp(prefix="helios_compare_"))
    work.mkdir(parents=True, exist_ok=True)
    setup = Setup(work, args.helios.resolve(), args.lyra_root.resolve(), jobs)
    print(f"{len(jobs):,} jobs over {jobs[-1].submit_s / 86400:.1f} days on {SERVERS} x {GPUS_PER_SERVER} GPUs; "
          f"files in {work}", flush=True)
    lyra: list[Timing] = []
    helios: list[Timing] = []
    for i in range(args.repeats):
        order = ("lyra", "helios") if i % 2 == 0 else ("helios", "lyra")  # alternating, each first in turn
        for side in order:
            if side == "lyra":
                lyra.append(setup.run_lyra())
            elif not args.helios_only_once or i == 0:
                helios.append(setup.run_helios())
            else:
                continue
            t = (lyra if side == "lyra" else helios)[-1]
            print(f"  run {i + 1}: {'lyra-gym' if side == 'lyra' else 'Helios':8} {t.wall_s:7.2f} s wall, "
                  f"{t.cpu_s:7.2f} s CPU", flush=True)
    for what in ("wall_s", "cpu_s"):
        mine, theirs = [getattr(t, what) for t in lyra], [getattr(t, what) for t in helios]
        label = "wall" if what == "wall_s" else "CPU "
        print(f"{label}: lyra-gym simulate {median_range(mine)}; Helios simulator {median_range(theirs)}; "
              f"ratio of medians {statistics.median(theirs) / statistics.median(mine):.1f}x")

    lyra_jct, helios_jct = setup.jct()
    same, common = agreement(lyra_jct, helios_jct)
    lyra_mean, helios_mean = statistics.fmean(lyra_jct.values()), statistics.fmean(helios_jct.values())
    helios_log = setup.helios_log_dir() / "Philly" / HELIOS_VC / f"fifo_consolidate_{HELIOS_VC}_log.csv"
    lyra_queue, helios_queue = mean_queue(setup.lyra_out / "jobs.csv", "queue_s"), mean_queue(helios_log, "queue")
    print(f"mean JCT: lyra-gym {lyra_mean:.1f} s ({len(lyra_jct):,} jobs), Helios {helios_mean:.1f} s "
          f"({len(helios_jct):,} jobs); mean queueing: lyra-gym {lyra_queue:.1f} s, Helios {helios_queue:.1f} s")
    print(f"same JCT on both sides: {same:,} of {common:,} jobs")
    if same != common or len(lyra_jct) != len(jobs) or len(helios_jct) != len(jobs):
        print("the two simulators DIFFER on this workload: compare the per-job files in the work folder")
        return 1
    print("same workload: every job has the same JCT in both simulators")
    return 0


if __name__ == "__main__":
    sys.exit(main())
