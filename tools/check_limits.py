"""Size, complexity and import-cycle limits of the project's Python code, against an allow-list.

Run: python tools/check_limits.py [--root DIR] [--strict]   (``make lint`` runs it)

Three limits, read with the allow-list from ``[tool.check_limits]`` of ``pyproject.toml``:

* a module longer than ``max_lines`` lines (600);
* a function whose McCabe complexity is over ``max_complexity`` (15), as ruff's C901 counts it
  (ruff is run with ``--isolated``, so the per-file ignores of ``[tool.ruff]`` do not hide one);
* an import cycle among the modules of ``cycle_packages``: a strongly connected component of the
  graph of ``import`` statements found with :mod:`ast` anywhere in a module (function bodies,
  ``if TYPE_CHECKING:`` blocks and end-of-file imports included, as import-linter's graph has them).

A violation that the allow-list does not name is *new*: it is printed and the exit status is 1.
A module or function in the allow-list may stay over the limit (a note says when it grew); an
allowed cycle may shrink but not gain modules. An allowed entry that is no longer a violation is
reported as stale, an error only with ``--strict``: remove it from the list once it is fixed.
"""
from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the project depends on tomli below 3.11
    import tomli as tomllib


@dataclass
class Limits:
    """The ``[tool.check_limits]`` table: limits, where to look, and today's allowed exceptions."""

    max_lines: int = 600
    max_complexity: int = 15
    paths: list[str] = field(default_factory=lambda: ["."])
    cycle_packages: list[str] = field(default_factory=list)
    long_modules: dict[str, int] = field(default_factory=dict)  # path -> lines when allowed
    complex_functions: dict[str, int] = field(default_factory=dict)  # "path::qualname" -> complexity
    import_cycles: list[list[str]] = field(default_factory=list)  # module names of each allowed cycle
    import_names: dict[str, str] = field(default_factory=dict)  # folder -> its installed import name


@dataclass
class Report:
    """What one check found: new violations (fail), stale allow-list entries, notes."""

    new: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def extend(self, other: Report) -> None:
        self.new += other.new
        self.stale += other.stale
        self.notes += other.notes


def load_limits(pyproject: Path) -> Limits:
    """The limits of ``pyproject``'s ``[tool.check_limits]`` table (defaults where absent)."""
    tool = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {})
    renamed = tool.get("setuptools", {}).get("package-dir", {})  # {import name: folder}
    return Limits(**tool.get("check_limits", {}), import_names={folder: name for name, folder in renamed.items()})


def python_files(root: Path, paths: list[str]) -> list[Path]:
    """Every ``.py`` file under ``paths`` (files or folders, relative to ``root``), sorted, caches skipped."""
    found: set[Path] = set()
    for entry in paths:
        target = root / entry
        if target.is_file() and target.suffix == ".py":
            found.add(target)
        elif target.is_dir():
            found.update(p for p in target.rglob("*.py") if not any(part.startswith(".") or part == "__pycache__"
                                                                  for part in p.relative_to(root).parts))
    return sorted(found)


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


# --- module length ---------------------------------------------------------------------------------
def check_lines(root: Path, files: list[Path], limits: Limits) -> Report:
    """Modules over ``limits.max_lines`` lines that the allow-list does not name."""
    over: dict[str, int] = {}
    for path in files:
        with path.open("rb") as fh:
            over_count = sum(1 for _ in fh)
        if over_count > limits.max_lines:
            over[_rel(root, path)] = over_count
    limit = limits.max_lines
    return _against_allow_list(over, limits.long_modules, "long_modules", f"{{name}}: {{value}} lines (limit {limit})",
                               f"{{name}}: {{value}} lines, grew from {{listed}} (allowed, limit {limit})",
                               f"within {limit} lines")


def _against_allow_list(over: dict[str, int], allowed: dict[str, int], table: str, new: str, grew: str,
                        within: str) -> Report:
    """What is over a limit (``over``: name -> measure) against the allow-list ``table`` (``allowed``):
    unlisted is new, listed but grown a note, listed but no longer over stale. ``new`` and ``grew``
    are message templates over ``{name}``, ``{value}`` and ``{listed}``."""
    report = Report()
    for name, value in over.items():
        listed = allowed.get(name)
        if listed is None:
            report.new.append(new.format(name=name, value=value))
        elif value > listed:
            report.notes.append(grew.format(name=name, value=value, listed=listed))
    report.stale += [f"{table}: {name} is now {within}" for name in allowed if name not in over]
    return report


# --- function complexity (ruff C901) ---------------------------------------------------------------
def _qualnames(tree: ast.Module) -> dict[int, str]:
    """Line of each function's ``def`` -> its dotted name inside the module (``Class.method``)."""
    names: dict[int, str] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    names[child.lineno] = qual
                walk(child, qual + ".")
            else:
                walk(child, prefix)

    walk(tree, "")
    return names


def ruff_complexity(root: Path, files: list[Path], max_complexity: int) -> dict[str, int]:
    """``"path::qualname" -> complexity`` of every function over ``max_complexity``, counted by ruff's C901."""
    if not files:
        return {}
    cmd = [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "C901", "--exit-zero",
           "--config", f"lint.mccabe.max-complexity = {max_complexity}", "--output-format", "json",
           *[str(p) for p in files]]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=root)
    if run.returncode != 0:
        raise SystemExit(f"check_limits: ruff failed (install the dev extra):\n{run.stderr}")
    found: dict[str, int] = {}
    trees: dict[Path, dict[int, str]] = {}
    for item in json.loads(run.stdout):
        path = Path(item["filename"]).resolve()
        if path not in trees:
            trees[path] = _qualnames(ast.parse(path.read_text(encoding="utf-8")))
        row = item["location"]["row"]
        name = trees[path].get(row, f"<line {row}>")
        complexity = int(item["message"].rsplit("(", 1)[1].split(">")[0])
        found[f"{_rel(root.resolve(), path)}::{name}"] = complexity
    return found


def check_complexity(root: Path, files: list[Path], limits: Limits) -> Report:
    """Functions over ``limits.max_complexity`` that the allow-list does not name."""
    over = ruff_complexity(root, files, limits.max_complexity)
    limit = limits.max_complexity
    return _against_allow_list(dict(sorted(over.items())), limits.complex_functions, "complex_functions",
                               f"{{name}}: complexity {{value}} (limit {limit})",
                               "{name}: complexity {value}, grew from {listed} (allowed)",
                               f"within complexity {limit}")


# --- import cycles ---------------------------------------------------------------------------------
def module_name(root: Path, path: Path, import_names: Mapping[str, str] | None = None) -> str:
    """Dotted module name of ``path`` under ``root`` (a package's ``__init__.py`` is the package); a
    top-level folder installed under another name (``import_names``: folder -> name) takes that name."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    parts[0] = (import_names or {}).get(parts[0], parts[0])
    return ".".join(parts)


def _resolve(name: str, known: set[str]) -> str | None:
    """The longest prefix of dotted ``name`` that is a known module, or None."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def imports_of(module: str, is_package: bool, tree: ast.Module, known: set[str]) -> set[str]:
    """The known modules that ``module`` imports anywhere in ``tree`` (explicit imports only)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names]  # a submodule, else ``base``
        else:
            continue
        for target in targets:
            resolved = _resolve(target, known)
            if resolved is not None and resolved != module:
                found.add(resolved)
    return found


def import_graph(root: Path, packages: list[str], import_names: Mapping[str, str] | None = None
                 ) -> dict[str, set[str]]:
    """Module -> the project modules it imports, over every module of ``packages`` (folders) under
    ``root``; ``import_names`` maps a folder to its installed import name."""
    paths = {module_name(root, p, import_names): p for p in python_files(root, packages)}
    known = set(paths)
    return {name: imports_of(name, path.name == "__init__.py", ast.parse(path.read_text(encoding="utf-8")),
                             known)
            for name, path in sorted(paths.items())}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one module, each sorted (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(start: str) -> None:  # iterative, so a long import chain cannot hit the recursion limit
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(cycles)


def check_cycles(root: Path, limits: Limits) -> Report:
    """Import cycles that are not within one allowed cycle of the allow-list."""
    report = Report()
    graph = import_graph(root, limits.cycle_packages, limits.import_names)
    cycles = import_cycles(graph)
    allowed = [set(entry) for entry in limits.import_cycles]
    for cycle in cycles:
        edges = sorted(f"{a} -> {b}" for a in cycle for b in graph[a] if b in cycle)
        shown = "; ".join(edges[:12]) + (f"; and {len(edges) - 12} more" if len(edges) > 12 else "")
        line = f"import cycle among {', '.join(cycle)} ({shown})"
        if not any(set(cycle) <= entry for entry in allowed):
            report.new.append(line)
        else:
            report.notes.append(f"allowed {line}")
    report.stale += [f"import_cycles: {sorted(entry)} is no longer a cycle"
                     for entry in allowed if not any(set(cycle) <= entry for cycle in cycles)]
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                        help="project root holding pyproject.toml (default: this script's parent's parent)")
    parser.add_argument("--strict", action="store_true", help="stale allow-list entries are errors too")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    limits = load_limits(root / "pyproject.toml")
    files = python_files(root, limits.paths)
    report = Report()
    report.extend(check_lines(root, files, limits))
    report.extend(check_complexity(root, files, limits))
    report.extend(check_cycles(root, limits))
    for line in report.notes:
        print(f"note: {line}")
    for line in report.stale:
        print(f"stale allow-list entry: {line}")
    for line in report.new:
        print(f"NEW: {line}")
    allowed = len(limits.long_modules) + len(limits.complex_functions) + len(limits.import_cycles)
    print(f"check_limits: {len(files)} files, {len(report.new)} new violation(s), "
          f"{allowed} allowed, {len(report.stale)} stale allow-list entr{'y' if len(report.stale) == 1 else 'ies'}")
    return 1 if report.new or (args.strict and report.stale) else 0


if __name__ == "__main__":
    sys.exit(main())
