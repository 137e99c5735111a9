"""What every observation feature means: the table ``docs/observations.md`` holds.

``python -m lyra_gym.envs.observation_docs`` writes that markdown to stdout; a test compares
the checked-in file with it, and checks that every feature an environment's builder lays out
(``env.unwrapped.observation_names``) has an entry here, so the docs cannot go stale.

Scales (:mod:`lyra_gym.envs.observation`): every entry is clipped to [-1, 1]; "log-time" is
``log1p(seconds / 60) / 10`` (one minute 0.07, one hour 0.41, ten days 0.96).
"""

from __future__ import annotations

from lyra_gym.envs.alloc_layout import ALLOC_CLUSTER_FEATURES, ALLOC_JOB_FEATURES
from lyra_gym.envs.observation import CLUSTER_FEATURES, JOB_FEATURES, SERVER_FEATURES, observation_layout
from lyra_gym.envs.observation_v2 import V2_CLUSTER_FEATURES, V2_JOB_FEATURES

LOG_TIME = "log-time"
GPUS = "GPUs / 64"
SHARE = "share, 0-1"
FLAG = "0 or 1"
PER_INFERENCE_SERVER = "servers / inference servers"

#: feature -> (meaning, unit or scale), per block
JOB_DOCS: dict[str, tuple[str, str]] = {
    "present": ("the slot holds a job", FLAG),
    "queued": ("the job is queued (0: running)", FLAG),
    "elastic": ("the job may scale between its minimum and maximum size", FLAG),
    "requested_gpus": ("GPUs the job requests", GPUS),
    "min_gpus": ("its minimum GPUs", GPUS),
    "max_gpus": ("its maximum GPUs", GPUS),
    "workers": ("GPUs it holds now", GPUS),
    "waiting": ("time since it last entered the queue (0 while not queued)", LOG_TIME),
    "attained": ("GPU-hours it has held so far", "log1p(GPU-h) / 10"),
    "remaining_est": ("time to finish at its requested size on the reference GPU (the remaining work the "
                      "run's knowledge model shows)", LOG_TIME),
    "scaling_efficiency": ("throughput at its maximum / (max / min x throughput at its minimum), reference GPU, "
                           "packed", "ratio"),
    "in_overhead": ("it is (re)starting or rescaling", FLAG),
    "on_loaned": ("share of its GPUs on loaned inference servers", SHARE),
    "rate_ratio": ("current rate / rate of as many reference GPUs packed (0 while queued)", "ratio"),
    "flexible_workers": ("workers beyond its minimum, what a reclaim may take (0 queued or inelastic)", GPUS),
    "remaining_now": ("time to finish at its current rate (queued: remaining_est)", LOG_TIME),
    "remaining_loaned": ("time to finish at its requested size on the loaned GPU type (1 if that rate is 0; 0 "
                         "with no inference servers)", LOG_TIME),
    # version 2 (lyra_gym/envs/observation_v2.py)
    "attained_service": ("GPU-seconds it has held so far (Tiresias' key; linear where its thresholds sit)",
                         "GPU-s / 36,000, clipped at 1"),
    "statistical_efficiency": ("statistical efficiency of the batch it runs now, as the engine charges it "
                               "(Pollux's E; 1 while queued or where none is charged)", "ratio, clipped at 1"),
    "speedup": ("its rate now / its rate at its requested size on the reference GPU at its initial batch "
                "(Pollux's speed-up; placement, GPU type and E included; 0 while queued)",
                "log2(1 + ratio) / 4: 1x 0.25, 3x 0.5, 15x 1"),
    "preemptions": ("times it was preempted so far", "count / 8, clipped at 1"),
    "preempt_cost": ("what preempting it now would cost it: its restart overhead plus the run time since its "
                     "last checkpoint (0 while queued)", LOG_TIME),
    # Alloc-v1's own (lyra_gym/envs/alloc_layout.py)
    "picked": ("decided at this decision point", FLAG),
    "selected": ("the job being placed now", FLAG),
    "must_decide": ("it holds GPUs on a server being returned", FLAG),
    "plan_workers": ("its workers in the working plan", GPUS),
    "plan_on_loaned": ("share of those on loaned servers", SHARE),
    "proposal_workers": ("its workers in the heuristic's proposal", GPUS),
    "proposal_on_loaned": ("share of those on loaned servers", SHARE),
}
CLUSTER_DOCS: dict[str, tuple[str, str]] = {
    "free_training": ("free training GPUs", "GPUs / training GPUs"),
    "free_loaned": ("free GPUs on loaned servers", "GPUs / inference GPUs"),
    "loaned": ("inference servers on loan to training", PER_INFERENCE_SERVER),
    "loanable": ("inference servers that may be borrowed now", PER_INFERENCE_SERVER),
    "demand_now": ("inference demand now", PER_INFERENCE_SERVER),
    "demand_1h": ("inference demand one hour ahead", PER_INFERENCE_SERVER),
    "demand_3h": ("inference demand three hours ahead", PER_INFERENCE_SERVER),
    "demand_6h": ("inference demand six hours ahead", PER_INFERENCE_SERVER),
    "reclaim_pending": ("loaned servers owed back to inference", PER_INFERENCE_SERVER),
    "time_of_day_sin": ("sine of the time of day", "sin(2 pi t / 86400 s), -1 to 1"),
    "time_of_day_cos": ("cosine of the time of day", "cos(2 pi t / 86400 s), -1 to 1"),
    "weekend": ("Saturday or Sunday (t = 0 is a Monday)", FLAG),
    "queued_jobs": ("queued jobs", "log1p(jobs) / 6"),
    "running_jobs": ("running jobs", "log1p(jobs) / 6"),
    "servers_free_0": ("training servers with no free GPU (fragmentation histogram)", "share of training servers"),
    "servers_free_1": ("training servers with 1 free GPU", "share of training servers"),
    "servers_free_2_3": ("training servers with 2-3 free GPUs", "share of training servers"),
    "servers_free_4_7": ("training servers with 4-7 free GPUs", "share of training servers"),
    "servers_free_8": ("training servers with 8 or more free GPUs", "share of training servers"),
    "queue_head_wait": ("time the longest-waiting queued job has waited", LOG_TIME),
    "queue_tail_gpus": ("GPUs requested by the queued jobs outside the K slots", "GPUs / training GPUs"),
    "running_unseen": ("running jobs outside the K slots", "log1p(jobs) / 6"),
    # version 2 (lyra_gym/envs/observation_v2.py)
    "window_elapsed": ("time since the episode window's start / its length (arrivals stop at 1; 0 with no "
                       "window)", "share, 0-1, clipped"),
    "arrivals_left": ("jobs not yet submitted", "log1p(jobs) / 6"),
    "arrivals_left_share": ("jobs not yet submitted / the window's jobs (warm-up jobs not counted; no window: "
                            "the run's jobs)", SHARE),
    # Alloc-v1's own (lyra_gym/envs/alloc_layout.py)
    "phase_borrow": ("the decision is in its borrow phase", FLAG),
    "phase_return": ("... in its return phase", FLAG),
    "phase_job": ("... choosing the next job", FLAG),
    "phase_place": ("... placing the selected job", FLAG),
    "plan_free_training": ("free training GPUs in the working plan", "GPUs / training GPUs"),
    "plan_free_loaned": ("free loaned GPUs in the working plan", "GPUs / inference GPUs"),
    "borrowed_now": ("servers borrowed at this decision point", PER_INFERENCE_SERVER),
    "returns_left": ("servers still to return", PER_INFERENCE_SERVER),
    "proposal_changes": ("jobs the proposal changes that are not yet picked", "log1p(jobs) / 6"),
}
SERVER_DOCS: dict[str, tuple[str, str]] = {
    "present": ("the slot holds a loaned server (the first M by id)", FLAG),
    "used": ("GPUs in use on it", "GPUs / its GPUs"),
    "jobs": ("training jobs on it", "jobs / 8"),
    "inelastic_jobs": ("inelastic jobs on it (preempted if it is returned)", "jobs / 8"),
}

#: (title, env ids, job features, cluster features) of each observation layout
LAYOUTS = (
    ("Guided environments", "LyraGym/Cluster-v1, LyraGym/Loaning-v1, LyraGym/Elastic-v1", JOB_FEATURES,
     CLUSTER_FEATURES),
    ("Guided environments, observation version 2", "The -v2 guided environments (`ObservationBuilder(..., "
     "version=2)`)", JOB_FEATURES + V2_JOB_FEATURES, CLUSTER_FEATURES + V2_CLUSTER_FEATURES),
    ("Full control", "LyraGym/Alloc-v1", JOB_FEATURES + ALLOC_JOB_FEATURES, CLUSTER_FEATURES + ALLOC_CLUSTER_FEATURES),
)


def _table(rows: list[tuple[str, str, str, str]]) -> list[str]:
    lines = ["| index | name | meaning | unit / scale |", "|---|---|---|---|"]
    lines += [f"| {index} | `{name}` | {meaning} | {scale} |" for index, name, meaning, scale in rows]
    return lines


def layout_markdown(title: str, env_ids: str, job_features: tuple[str, ...],
                    cluster_features: tuple[str, ...]) -> list[str]:
    """The section of one layout: its size in K and M, and a table per block."""
    width, cluster_width = len(job_features), len(cluster_features)
    server_width = len(SERVER_FEATURES)
    layout = observation_layout(1, 1, width, cluster_width)  # the order of the blocks; K, M symbolic
    assert [block for block in layout] == ["jobs", "cluster", "servers"]
    lines = [f"## {title}", "", f"{env_ids}: `K * {width} + {cluster_width} + M * {server_width}` entries "
             f"({32 * width + cluster_width + 16 * server_width} with the default K = 32, M = 16).", "",
             f"### Job slot i (K slots; entry `{width} * i + n`)", ""]
    lines += _table([(f"{width} * i + {n}", f"job[i].{name}", *JOB_DOCS[name]) for n, name in enumerate(job_features)])
    lines += ["", f"### Cluster (entry `{width} * K + n`)", ""]
    lines += _table([(f"{width} * K + {n}", f"cluster.{name}", *CLUSTER_DOCS[name])
                     for n, name in enumerate(cluster_features)])
    lines += ["", f"### Loaned-server slot j (M slots; entry `{width} * K + {cluster_width} + {server_width} * j + n`)",
              ""]
    lines += _table([(f"{width} * K + {cluster_width} + {server_width} * j + {n}", f"server[j].{name}",
                      *SERVER_DOCS[name]) for n, name in enumerate(SERVER_FEATURES)])
    return lines + [""]


def markdown() -> str:
    """``docs/observations.md``: every layout's features, in order."""
    lines = [
        "# Observations",
        "",
        "Generated by `python -m lyra_gym.envs.observation_docs > docs/observations.md` (a test checks that "
        "this file is its output); do not edit by hand.",
        "",
        "Every environment's observation is a flat float32 vector, every entry clipped to [-1, 1]. "
        "`env.unwrapped.observation_names` gives one name per entry, in order (`job[i].<feature>`, "
        "`cluster.<feature>`, `server[j].<feature>`). \"log-time\" is `log1p(seconds / 60) / 10` "
        "(one minute 0.07, one hour 0.41, ten days 0.96). Job slots hold queued jobs in the heuristic's "
        "admission order (shortest estimated remaining time first), then running elastic jobs, then "
        "running inelastic ones (Alloc-v1: jobs holding GPUs on servers being returned first); loaned-server "
        "slots the first M loaned servers by id; empty slots are all 0.",
        "",
    ]
    for title, env_ids, job_features, cluster_features in LAYOUTS:
        lines += layout_markdown(title, env_ids, job_features, cluster_features)
    return "\n".join(lines)


def main() -> None:
    print(markdown(), end="")


if __name__ == "__main__":
    main()
