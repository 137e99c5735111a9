"""``lyra-gym policies``: every name a policy option takes, one line each, with what it is.

Three kinds of name: the scheduler registry's (entry-point group ``lyra_gym.schedulers``, usable
everywhere), the loaders' ``PREFIX:ARGUMENT`` forms (group ``lyra_gym.scheduler_loaders``) and
``MODULE:CLASS`` imports, and the benchmark's own policies (``python -m lyra_agents.benchmark``
only: they are not schedulers of the registry).
"""

from __future__ import annotations

from typing import Any, Callable

from lyra_gym.sim import scheduler as registry

#: What each shipped registry name is (a scheduler registered by a plugin shows its docstring's first line).
ABOUT = {
    "baseline": "the paper's comparison point: Lyra's scheduler without loaning or elastic scaling",
    "baseline-min": "baseline with elastic jobs at their minimum size (the size Lyra admits them at)",
    "fifo": "first in, first out; backfill=True starts later jobs that fit past a blocked head",
    "gandiva": "Gandiva-style time slicing, migration and grow-shrink",
    "gandiva+loan": "gandiva borrowing every loanable inference server",
    "lyra": "Lyra (EuroSys 2023): capacity loaning and elastic scaling; the benchmark's reference",
    "lyra-backfill": "lyra admitting later jobs past one that does not fit (backfill=True)",
    "lyra-noelastic": "lyra ablation: loaning, no elastic scaling (elastic=False)",
    "lyra-noloan": "lyra ablation: elastic scaling, no loaning (loan=False)",
    "pollux": "Pollux-style goodput-driven elastic allocation",
    "pollux+loan": "pollux borrowing every loanable inference server (loan=True)",
    "sjf": "shortest job first by the duration it is told; backfill=True as fifo's",
    "tiresias": "Tiresias: discretised two-dimensional least attained service",
    "tiresias+loan": "tiresias borrowing idle inference servers (loan=True)",
}

#: The forms a loader or an import builds, and the benchmark's own policies: (name, kind, what it is).
FORMS = (
    ("model:PATH", "loader", "a trained run of train.py (folder or model.zip); ?trust=1 for pickled files"),
    ("policy:MODULE:FACTORY", "loader", "a policy of observations (docs/writing-a-policy.md); also file.py:NAME"),
    ("rllib:PATH", "loader", "an RLlib checkpoint (needs the rllib extra)"),
    ("rule:PATH", "loader", "a preemption rule of lyra_agents.preempt_search (folder or rule.json; plain JSON)"),
    ("MODULE:CLASS", "import", "a Scheduler class or factory imported by name (docs/writing-a-scheduler.md)"),
    ("random", "benchmark", "uniform over the valid values of every action dimension (the env's masks)"),
    ("small-first", "benchmark", "the fixed rule of lyra_agents.small_first on the env's action levels"),
)

#: Printed under the list: what the ``reads`` column means.
READS_NOTE = ("reads: the fields of a job's duration a scheduler looks at (Scheduler.reads): 'none' needs no "
              "duration,\n  'undeclared' did not say; under knowledge estimate or history (docs/example-config.yaml) "
              "those fields\n  hold estimates, not the truth. Shown with --reads; a loader's model declares its own.")

KIND_NOTE = ("kind: the registry's names and the loader and import forms work wherever a policy is named "
             "(simulate, compare,\n  sweep, the benchmark); benchmark ones only in python -m lyra_agents.benchmark.")


def about(name: str, factory: Callable[[str], Any] = registry.scheduler_factory) -> str:
    """One line on registry scheduler ``name``: :data:`ABOUT`, else the first line of the docstring
    of what ``factory(name)`` gives (its class; imported only then)."""
    if name in ABOUT:
        return ABOUT[name]
    try:
        made = factory(name)
    except Exception as err:  # a plugin that does not import is listed, not fatal
        return f"(cannot be imported: {type(err).__name__})"
    for line in (getattr(made, "__doc__", None) or "").strip().splitlines():
        line = line.strip()
        if line and not line.startswith(":") and not line.startswith(getattr(made, "__name__", "\0") + "("):
            return line.rstrip(".")
    return "(no description)"


def policy_lines(reads: bool = False) -> list[str]:
    """The listing: a line per registry name (with ``reads``, what it reads of durations instead of
    what it is), then the loaders, import form and benchmark-only policies, then :data:`READS_NOTE`."""
    names = registry.available()
    entries: list[tuple[str, str, str]] = []
    for name in names:
        if reads:
            entries.append((name, "registry", f"reads: {registry.knowledge_tag(registry.declared_reads(name))}"))
        else:
            entries.append((name, "registry", about(name)))
    loaders = set(registry.loader_names())
    entries += [f for f in FORMS if f[1] != "loader" or f[0].partition(":")[0] in loaders]
    width = max(len(e[0]) for e in entries)
    lines = [f"{'name'.ljust(width)}  {'kind'.ljust(9)}  {'reads' if reads else 'what it is'}"]
    lines += [f"{n.ljust(width)}  {k.ljust(9)}  {text}" for n, k, text in entries]
    return [*lines, READS_NOTE, KIND_NOTE]
