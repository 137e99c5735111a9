"""What every observation feature means: the table ``docs/observations.md`` holds, read from the
docstrings of the reference's feature functions (:mod:`lyra_gym.envs.observation_reference`: the
first paragraph the meaning, the ``Scale:`` line the unit or scale); an environment's own features
(Alloc-v1's) are described here.

``python -m lyra_gym.envs.observation_docs`` writes that markdown to stdout; a test compares
the checked-in file with it, and checks that every feature an environment's builder lays out
(``env.unwrapped.observation_names``) has an entry here, so the docs cannot go stale.

Scales (:mod:`lyra_gym.envs.observation`): every entry is clipped to [-1, 1]; "log-time" is
``log1p(seconds / 60) / 10`` (one minute 0.07, one hour 0.41, ten days 0.96).
"""

from __future__ import annotations

import inspect
from typing import Callable

from lyra_gym.envs.alloc_layout import ALLOC_CLUSTER_FEATURES, ALLOC_JOB_FEATURES
from lyra_gym.envs.observation import CLUSTER_FEATURES, JOB_FEATURES, SERVER_FEATURES, observation_layout
from lyra_gym.envs.observation_reference import (
    CLUSTER_FEATURE_FUNCTIONS,
    JOB_FEATURE_FUNCTIONS,
    SERVER_FEATURE_FUNCTIONS,
    V2_CLUSTER_FEATURE_FUNCTIONS,
    V2_JOB_FEATURE_FUNCTIONS,
)
from lyra_gym.envs.observation_v2 import V2_CLUSTER_FEATURES, V2_JOB_FEATURES

FLAG = "0 or 1"
GPUS = "GPUs / 64"
SHARE = "share, 0-1"
PER_INFERENCE_SERVER = "servers / inference servers"


def feature_doc(function: Callable) -> tuple[str, str]:
    """(meaning, unit or scale) of a reference feature function: its docstring's first paragraph
    and its ``Scale:`` line (:mod:`lyra_gym.envs.observation_reference`)."""
    doc = inspect.getdoc(function) or ""
    paragraphs = doc.split("\n\n")
    scale = [p for p in paragraphs if p.startswith("Scale: ")]
    if not paragraphs[0] or len(scale) != 1:
        raise ValueError(f"{function.__name__}: its docstring needs a meaning and one 'Scale:' line")
    return " ".join(paragraphs[0].split()), " ".join(scale[0][len("Scale: "):].split())


#: Alloc-v1's own features (lyra_gym/envs/alloc_layout.py): meaning, unit or scale
ALLOC_JOB_DOCS: dict[str, tuple[str, str]] = {
    "picked": ("decided at this decision point", FLAG),
    "selected": ("the job being placed now", FLAG),
    "must_decide": ("it holds GPUs on a server being returned", FLAG),
    "plan_workers": ("its workers in the working plan", GPUS),
    "plan_on_loaned": ("share of those on loaned servers", SHARE),
    "proposal_workers": ("its workers in the heuristic's proposal", GPUS),
    "proposal_on_loaned": ("share of those on loaned servers", SHARE),
}
ALLOC_CLUSTER_DOCS: dict[str, tuple[str, str]] = {
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

#: feature -> (meaning, unit or scale), per block: the reference's docstrings, then Alloc-v1's own
JOB_DOCS: dict[str, tuple[str, str]] = {
    **{name: feature_doc(f) for name, f in {**JOB_FEATURE_FUNCTIONS, **V2_JOB_FEATURE_FUNCTIONS}.items()},
    **ALLOC_JOB_DOCS,
}
CLUSTER_DOCS: dict[str, tuple[str, str]] = {
    **{name: feature_doc(f) for name, f in {**CLUSTER_FEATURE_FUNCTIONS, **V2_CLUSTER_FEATURE_FUNCTIONS}.items()},
    **ALLOC_CLUSTER_DOCS,
}
SERVER_DOCS: dict[str, tuple[str, str]] = {name: feature_doc(f) for name, f in SERVER_FEATURE_FUNCTIONS.items()}

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
        "this file is its output); do not edit by hand. Each feature's meaning and scale is the docstring of "
        "its function in `lyra_gym/envs/observation_reference.py`: every feature there is a plain function "
        "of the public `ClusterView` / `JobView`, and `reference_observation` lays them out in this order "
        "(the fast `ObservationBuilder` equals it float for float at every step, "
        "`tests/envs/test_observation_reference.py`). Read it to see exactly how a feature is computed, or to "
        "add one.",
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
