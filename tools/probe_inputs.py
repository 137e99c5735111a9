"""Hostile-input probe: hand every reader and command of lyra-gym inputs a careless or hostile
user might, and classify what each does (docs/reliability.md, "Hostile-input probe").

Each case runs a command's ``main(argv)`` in this process (stdout/stderr captured, a wall-clock
alarm as the hang detector) inside a scratch folder, and is classified by its outcome:

- ``clear``: refused with a non-zero exit code and a message of at most two lines that says
  ``error`` (or accepted, for a case whose input is valid);
- ``traceback``: an exception escaped ``main``;
- ``silent``: an input the case marks invalid was accepted (exit 0);
- ``hang``: still running after ``--timeout`` seconds;
- ``data lost``: a file the command reads (or a file of the user's beside it) changed bytes.

A case is (family, name, command, argv, files to create, whether the input is valid). The cases
are enumerated from the config fields, the scheduler parameters and the trace columns crossed
with hostile values, plus the reproducers of issue 40; ``--seed`` drives the random families.

    python tools/probe_inputs.py --out docs/probe-inputs.csv      # ~1,000 cases, a few minutes
    python tools/probe_inputs.py --families config,trace --limit 50
    python tools/probe_inputs.py --summarize before=OLD.csv after=NEW.csv   # the docs' table

The summary table (family x outcome) is printed and the per-case CSV written atomically.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import io
import os
import random
import signal
import sys
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
OUTCOMES = ("clear", "traceback", "silent", "hang", "data lost")

TINY_TRACE = """job_id,submit_time,num_gpus,duration,model,elastic,min_gpus,max_gpus
j0,0,1,600,resnet18,0,,
j1,60,2,900,resnet50,1,1,4
j2,120,4,300,bert,0,,
j3,180,1,1200,transformer,1,1,2
"""
TINY_CONFIG = """cluster:
  training:
    - {count: 2, gpu_type: v100, gpus_per_server: 4}
  inference: {count: 2, gpu_type: t4, gpus_per_server: 4}
"""
#: a "billion laughs" flow value: nine anchors, each a list of nine aliases of the one before
#: (9**9 leaves once expanded, a few kilobytes as written)
ALIAS_BOMB = "[" + ", ".join(
    [f"&l0 [{', '.join(['x'] * 9)}]"]
    + [f"&l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]) + "]"


class Hang(BaseException):
    """Raised by the alarm: the case ran past its time."""


@dataclass
class Case:
    family: str
    name: str
    command: str                      # lyra-gym, benchmark, evaluate, export, train
    argv: list[str]
    files: dict[str, str] = field(default_factory=dict)   # relative path -> text (created first)
    valid: bool = False               # True: the input is valid and must be accepted
    setup: Callable[[Path], None] | None = None          # extra preparation in the scratch folder


def _main_of(command: str) -> Callable[[list[str]], int]:
    if command == "lyra-gym":
        from lyra_gym.cli.app import main
    elif command == "benchmark":
        from lyra_agents.benchmark import main
    elif command == "evaluate":
        from lyra_agents.evaluate import main
    elif command == "export":
        from lyra_agents.export import main
    else:
        raise ValueError(command)
    return main  # type: ignore[return-value]


def _digests(folder: Path) -> dict[str, str]:
    """SHA-256 of every regular file under ``folder`` that existed before the case ran."""
    found = {}
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink() and not any(p.startswith(".") for p in path.parts[-1:]):
            found[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _alarm(_signum: int, _frame: object) -> None:
    raise Hang()


def run_case(case: Case, timeout: float) -> tuple[str, str]:
    """(outcome, detail) of one case, run in a fresh scratch folder."""
    with tempfile.TemporaryDirectory(prefix="lyra-probe-") as tmp:
        work = Path(tmp)
        (work / "trace.csv").write_text(TINY_TRACE)
        (work / "cluster.yaml").write_text(TINY_CONFIG)
        for rel, text in case.files.items():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_text(text)
        if case.setup is not None:
            case.setup(work)
        before = _digests(work)
        out, err = io.StringIO(), io.StringIO()
        old_cwd = os.getcwd()
        os.chdir(work)
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        code: int | None = None
        escaped = ""
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    result = _main_of(case.command)(list(case.argv))
                    code = result if isinstance(result, int) else 0
                except SystemExit as done:
                    code = done.code if isinstance(done.code, int) else (0 if done.code is None else 2)
        except Hang:
            return "hang", f"over {timeout:g} s"
        except BaseException as exc:  # the probe's point: anything that escapes
            escaped = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            os.chdir(old_cwd)
        if (work / "PWNED").exists():
            return "silent", "code from a data file ran"
        after = _digests(work)
        changed = sorted(k for k, v in before.items() if after.get(k) != v)
        if changed:
            return "data lost", ", ".join(changed)[:200]
        if escaped:
            return "traceback", escaped.splitlines()[-1][:200]
        text = err.getvalue().strip()
        if "Traceback (most recent call last)" in text:
            return "traceback", text.splitlines()[-1][:200]
        if code == 0:
            return ("clear", "accepted") if case.valid else ("silent", "exit 0")
        if case.valid:
            return "silent", f"valid input refused: {text.splitlines()[-1][:160] if text else code}"
        lines = [line for line in text.splitlines() if line.strip()]
        if not lines or "error" not in lines[-1].lower() and "interrupted" not in lines[-1].lower():
            return "silent", f"exit {code} without a message"
        return "clear", lines[-1][:200]


# --- the families --------------------------------------------------------------------------------

_SIM = ["simulate", "--policy", "fifo", "--trace", "trace.csv", "--out", "out"]


def _config_cases(rng: random.Random) -> Iterator[Case]:
    """Config fields crossed with values wrong for their type."""
    counts = {"cluster.training[0].count", "cluster.training[0].gpus_per_server", "cluster.inference.count",
              "cluster.inference.gpus_per_server"}
    floats = {"demand.peak_fraction", "demand.peak_trough_ratio", "demand.noise_std", "demand.step_s",
              "reclaim_grace_s", "overheads.rescale_s", "overheads.migrate_s", "overheads.resume_s",
              "horizon_s", "demand_horizon_pad_s", "knowledge.sigma", "knowledge.prior_s", "knowledge.growth"}
    bools = {"allow_mixed_gpu_types"}
    words = {"placement", "knowledge.mode", "demand_preset", "scaling", "cluster.inference.gpu_type"}
    bad_number = ["nan", ".nan", ".inf", "-.inf", "abc", "[1]", "{a: 1}", "true", "1:20", "-1", "*bomb"]
    bad_count = bad_number + ["2.5", "100000000"]
    bad_bool = ["maybe", "1", "yes", "on", "0", "[true]", "*bomb"]
    bad_word = ["nonsense", "1", "[x]", "{a: b}", "true", "*bomb", "'" + "x" * 5000 + "'"]
    fields = [(f, bad_count) for f in sorted(counts)] + [(f, bad_number) for f in sorted(floats)]
    fields += [(f, bad_bool) for f in sorted(bools)] + [(f, bad_word) for f in sorted(words)]
    for name, values in fields:
        for value in values:
            if name == "demand_horizon_pad_s" and value == "-1":
                continue
            yield Case("config", f"{name}={value[:20]}", "lyra-gym", _SIM + ["--config", "c.yaml"],
                       {"c.yaml": _config_with(name, value)})


def _config_with(dotted: str, value: str) -> str:
    """A config document setting ``dotted`` (``a.b``, ``a[0].b``) to the YAML text ``value``
    (``*bomb``: :data:`ALIAS_BOMB`)."""
    value = ALIAS_BOMB if value == "*bomb" else value
    if dotted.startswith("cluster."):
        rest = dotted.split(".", 1)[1]
        train = {"count": "2", "gpu_type": "v100", "gpus_per_server": "4"}
        inf = {"count": "2", "gpu_type": "t4", "gpus_per_server": "4"}
        group, key = rest.split(".")
        (train if group.startswith("training") else inf)[key] = value
        return ("cluster:\n  training:\n    - {" + ", ".join(f"{k}: {v}" for k, v in train.items())
                + "}\n  inference: {" + ", ".join(f"{k}: {v}" for k, v in inf.items()) + "}\n")
    body = TINY_CONFIG
    parts = dotted.split(".")
    if len(parts) == 1:
        return body + f"{parts[0]}: {value}\n"
    return body + f"{parts[0]}:\n  {parts[1]}: {value}\n"


def _trace_cases(rng: random.Random) -> Iterator[Case]:
    """Trace rows with one field made hostile, and files that are no trace at all."""
    header = TINY_TRACE.splitlines()[0]
    good = TINY_TRACE.splitlines()[1]
    columns = header.split(",")
    values = ["", "nan", "inf", "-1", "1e400", "abc", "١٢", "1_000", "0x10", "1e20", "\x00", "99999999999999"]
    for i, column in enumerate(columns):
        for value in values:
            row = good.split(",")
            if column in ("min_gpus", "max_gpus") and value == "" or column == "job_id" and value not in ("", "\x00"):
                continue  # an empty bound is "not elastic"; any other text is a valid job id
            row[i] = value
            yield Case("trace", f"{column}={value!r}", "lyra-gym", _SIM[:4] + ["t.csv", "--out", "out"],
                       {"t.csv": "\n".join([header, ",".join(row), *TINY_TRACE.splitlines()[2:]]) + "\n"})
    odd = {"empty": "", "header only": header + "\n", "duplicate column": header + ",model\n" + good + ",x\n",
           "binary": "\x89PNG\r\n\x1a\n\x00\x00", "short row": header + "\nj0,0,1\n",
           "duplicate id": header + "\n" + good + "\n" + good + "\n", "bom": "\ufeff" + TINY_TRACE,
           "unknown model": TINY_TRACE.replace("bert", "gpt-17")}
    for name, text in odd.items():
        yield Case("trace", name, "lyra-gym", _SIM[:4] + ["t.csv", "--out", "out"], {"t.csv": text},
                   valid=name == "bom")

    def fifo(work: Path) -> None:
        os.mkfifo(work / "t.csv")
    yield Case("trace", "/dev/zero", "lyra-gym", _SIM[:4] + ["/dev/zero", "--out", "out"])
    yield Case("trace", "fifo", "lyra-gym", _SIM[:4] + ["t.csv", "--out", "out"], setup=fifo)
    yield Case("trace", "folder", "lyra-gym", _SIM[:4] + [".", "--out", "out"])


def _policy_param_cases(rng: random.Random) -> Iterator[Case]:
    """Every parameter of every registered heuristic, given values wrong for its type (the type
    read from the dataclass annotation, so the probe does not trust the checker it probes)."""
    from lyra_gym.sim import scheduler as registry

    wrong = {"bool": ["maybe", "1", "2.5", "nan", "[true]"],
             "int": ["2.5", "nan", "inf", "abc", "true", "[1]", "1e300"],
             "float": ["nan", "inf", "-inf", "abc", "true", "[1]"],
             "str": ["[x]", "{a: b}", "1"],
             "tick": ["nan", "inf", "0", "-1", "1e-9"]}
    for name in sorted(registry.available()):
        for param, kind in _declared_params(name):
            for value in wrong.get(kind, []):
                argv = ["simulate", "--policy", name, "--trace", "trace.csv", "--config", "cluster.yaml",
                        "--out", "out", "--policy-param", f"{name}.{param}={value}"]
                yield Case("policy-param", f"{name}.{param}={value}", "lyra-gym", argv)


def _declared_params(name: str) -> list[tuple[str, str]]:
    """(parameter, kind) of a registered heuristic's dataclass fields whose annotation is one plain
    type (``bool``, ``int``, ``float``, ``str``, optionally ``| None``); ``tick`` for the decision
    intervals (any value that is not a positive finite number of seconds is wrong)."""
    import dataclasses
    import typing

    from lyra_gym.sim import scheduler as registry

    try:
        made = registry.make(name)
    except Exception:  # a loader prefix or an entry that needs arguments
        return []
    if not dataclasses.is_dataclass(made):
        return []
    hints = typing.get_type_hints(type(made))
    found = []
    for f in dataclasses.fields(made):
        if not f.init or f.name.startswith("_"):
            continue
        args = [a for a in typing.get_args(hints[f.name]) if a is not type(None)] or [hints[f.name]]
        if len(args) == 1 and args[0] in (bool, int, float, str):
            kind = "tick" if f.name in ("tick_interval", "round_s", "quantum_s") else args[0].__name__
            if kind == "str" and typing.get_args(hints[f.name]):
                continue  # an optional string: "1" may be a valid name
            found.append((f.name, kind))
    return found


def _sweep_cases(rng: random.Random) -> Iterator[Case]:
    """Sweep files that name code, bad seeds, alias bombs."""
    base = "traces: [trace.csv]\nbase_config: cluster.yaml\n"
    marker_cmd = "touch PWNED"
    docs = {
        "os:system spec": base + "policies: ['os:system']\n"
                                 f"policy_params: {{'os:system': {{command: '{marker_cmd}'}}}}\n",
        ".py spec": base + "policies: ['evil.py:make']\n",
        "policy: spec": base + "policies: ['policy:evil.py:make']\n",
        "model trust": base + "policies: ['model:m?trust=1']\n",
        "seeds float": base + "policies: [fifo]\nseeds: [1.5]\n",
        "seeds bool": base + "policies: [fifo]\nseeds: [true]\n",
        "seeds negative": base + "policies: [fifo]\nseeds: [-1]\n",
        "alias bomb params": base + f"policies: [fifo]\npolicy_params: {{fifo: {{backfill: {ALIAS_BOMB}}}}}\n",
    }
    evil = "import pathlib\npathlib.Path('PWNED').write_text('x')\ndef make(**kw):\n    raise SystemExit(0)\n"
    for name, text in docs.items():
        yield Case("sweep", name, "lyra-gym", ["sweep", "s.yaml", "--out", "out", "--no-plots"],
                   {"s.yaml": text, "evil.py": evil})


def _output_cases(rng: random.Random) -> Iterator[Case]:
    """--out pointing at what a command reads, directly or named inside another file."""
    def git(work: Path) -> None:
        (work / ".git").mkdir()

    def linked_run(work: Path) -> None:
        (work / "other" / "seed0").mkdir(parents=True)
        (work / "other" / "seed0" / "metrics.json").write_text("{}  # another comparison's run")
        (work / "out").mkdir()
        os.symlink(work / "other", work / "out" / "fifo")

    for over in ([], ["--overwrite"]):
        tag = " --overwrite" if over else ""
        yield Case("output", f"simulate --out trace{tag}", "lyra-gym", _SIM[:6] + ["trace.csv"] + over)
        yield Case("output", f"simulate --out config{tag}", "lyra-gym",
                   _SIM[:6] + ["cluster.yaml", "--config", "cluster.yaml"] + over)
        yield Case("output", f"compare --out .git{tag}", "lyra-gym",
                   ["compare", "--policies", "fifo", "--trace", "trace.csv", "--out", ".git/x", "--no-plots"] + over,
                   setup=git)
        yield Case("output", f"compare symlinked run{tag}", "lyra-gym",
                   ["compare", "--policies", "fifo", "--trace", "trace.csv", "--out", "out", "--no-plots"] + over,
                   setup=linked_run)
        yield Case("output", f"benchmark --out suite{tag}", "benchmark",
                   ["--suite", "su.yaml", "--policies", "fifo", "--out", "su.yaml"] + over,
                   {"su.yaml": "format: lyra-gym-suite/1\nversion: p\nscenarios:\n  - name: a\n"})
        yield Case("output", f"benchmark --out suite's config{tag}", "benchmark",
                   ["--suite", "su.yaml", "--policies", "fifo", "--out", "cluster.yaml"] + over,
                   {"su.yaml": "format: lyra-gym-suite/1\nversion: p\nscenarios:\n  - name: a\n"
                               "    config_file: cluster.yaml\n"})


def _argv_cases(rng: random.Random) -> Iterator[Case]:
    """Random option lists: real options with values drawn from a hostile pool."""
    pool = ["0", "-1", "0,,1", "1.5", "nan", "abc", "", "/dev/zero", ".", "trace.csv", "cluster.yaml",
            "fifo", "lyra", "nonsense", "os:system", "fifo,fifo", "10000000000", "x" * 300]
    options = {"simulate": ["--policy", "--trace", "--config", "--seed", "--out", "--policy-param"],
               "compare": ["--policies", "--trace", "--config", "--seeds", "--out", "--jobs", "--policy-param"],
               "trace": ["generate", "stats", "--preset", "--seed", "--out"]}
    for i in range(200):
        command = rng.choice(sorted(options))
        argv = [command]
        for option in rng.sample(options[command], rng.randint(1, 4)):
            argv += [option, rng.choice(pool)]
        if command != "trace" and "--out" not in argv:
            argv += ["--out", "out"]
        if "--policies" in argv or "--policy" in argv:
            argv += ["--no-plots"] if command == "compare" else []
        yield Case("argv", f"random {i}", "lyra-gym", argv, valid=None)  # type: ignore[arg-type]


FAMILIES: dict[str, Callable[[random.Random], Iterator[Case]]] = {
    "config": _config_cases, "trace": _trace_cases, "policy-param": _policy_param_cases,
    "sweep": _sweep_cases, "output": _output_cases, "argv": _argv_cases,
}


def _classify_random(case: Case, outcome: str, detail: str) -> tuple[str, str]:
    """A random argv case has no expectation: exit 0 is fine, a refusal must be clear."""
    if case.valid is None and outcome == "silent" and detail == "exit 0":
        return "clear", "accepted"
    return outcome, detail


def _cap_memory(gib: float) -> None:
    """Cap this process's address space, so a blow-up is a MemoryError (a traceback), not the
    machine's out-of-memory killer."""
    import resource

    limit = int(gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="per-case CSV to write (atomically)")
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated families")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random families")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds before a case counts as a hang")
    parser.add_argument("--limit", type=int, default=0, help="at most this many cases per family (0: all)")
    parser.add_argument("--memory-gib", type=float, default=4.0, help="address-space cap of the probe (GiB)")
    parser.add_argument("--summarize", nargs="+", metavar="LABEL=CSV",
                        help="print the table of per-case CSVs written before (no probe runs)")
    args = parser.parse_args(argv)
    if args.summarize:
        print(summary_of_files(dict(item.split("=", 1) for item in args.summarize)))
        return 0
    _cap_memory(args.memory_gib)
    import warnings

    warnings.simplefilter("ignore")
    rows = []
    for family in args.families.split(","):
        rng = random.Random(f"{args.seed}-{family}")
        cases = list(FAMILIES[family](rng))
        if args.limit:
            cases = cases[:args.limit]
        for case in cases:
            outcome, detail = _classify_random(case, *run_case(case, args.timeout))
            rows.append({"family": family, "case": case.name[:80], "outcome": outcome, "detail": detail})
            if outcome != "clear":
                print(f"{family:13s} {outcome:10s} {case.name[:50]!r}: {detail}", file=sys.stderr)
    print(summary_table({"": rows}))
    if args.out:
        from lyra_gym.outputs import atomic_path

        with atomic_path(args.out) as tmp, open(tmp, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=["family", "case", "outcome", "detail"])
            writer.writeheader()
            writer.writerows(rows)
    return 0


def summary_table(runs: dict[str, list[dict[str, str]]]) -> str:
    """A Markdown table of outcome counts per family (and in all), one column group per labelled
    run: ``{label: rows}``; a count shown as ``before -> after`` when two runs are given."""
    labels = list(runs)
    families = list(dict.fromkeys(r["family"] for rows in runs.values() for r in rows))
    lines = ["| family | inputs | " + " | ".join(OUTCOMES) + " |", "|---|---:|" + "---:|" * len(OUTCOMES)]
    for family in families + ["all"]:
        cells = []
        for counts in zip(*(_counts(runs[label], family) for label in labels)):
            cells.append(" -> ".join(str(c) for c in counts))
        lines.append(f"| {family} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _counts(rows: list[dict[str, str]], family: str) -> list[int]:
    mine = [r for r in rows if family in ("all", r["family"])]
    return [len(mine)] + [sum(r["outcome"] == o for r in mine) for o in OUTCOMES]


def summary_of_files(files: dict[str, str]) -> str:
    """:func:`summary_table` of per-case CSVs (``{label: path}``)."""
    runs = {}
    for label, path in files.items():
        with open(path, newline="") as fh:
            runs[label] = list(csv.DictReader(fh))
    return summary_table(runs)


if __name__ == "__main__":
    sys.exit(main())
