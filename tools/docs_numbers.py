"""Every table the README and the docs quote, regenerated from its committed CSV or checked against it.

A generated table sits in a Markdown page between two marker lines that name the command making it::

    <!-- numbers: python tools/bench_table.py docs/bench-suite-v1-all.csv --kind ratio -->

    | policy | whole suite | ... |

    <!-- /numbers -->

Between the colon and the command, options: ``fence=text`` puts the output in a ```` ```text ````
fence (for fixed-width tables); ``columns=1-3,5`` keeps those columns (1-based) of a Markdown table.
The command is one of the repository's generators, ``python tools/NAME.py ...``, ``python
benchmarks/NAME.py ...`` or ``python -m lyra_agents.NAME ...``, run from the repository root in this
process; its standard output (stripped) is the block. Comments are invisible on the site, so the
prose beside a table names the command too.

    python tools/docs_numbers.py --check    # exit 1, naming each page:line whose table and CSV disagree
    python tools/docs_numbers.py --write    # rewrite every block from its command (make numbers)
    python tools/docs_numbers.py --list     # every block: page:line and command

Pages: ``README.md`` and ``docs/**/*.md``. ``docs/leaderboard.md`` is a whole generated page
(``python -m lyra_agents.leaderboard render``, its own test).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import runpy
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]
_OPEN = re.compile(r"^<!-- numbers(?P<options>(?: [a-z]+=\S+)*): (?P<command>.+?) -->$")
_CLOSE = "<!-- /numbers -->"
_SCRIPT = re.compile(r"^(tools|benchmarks)/[a-z_]+\.py$")
_MODULE = re.compile(r"^lyra_agents\.[a-z_]+$")


class NumbersError(ValueError):
    """A marker that cannot be read or a command that cannot be run (the message names page:line)."""


@dataclass(frozen=True)
class Block:
    """One generated block of a page: the marker's line (1-based), its command and options, the
    lines between the markers (``start``..``end``, 0-based, end exclusive) and their text."""

    page: str
    line: int
    command: str
    options: dict[str, str]
    start: int
    end: int
    text: str


def blocks(text: str, page: str = "<text>") -> list[Block]:
    """The generated blocks of a page's text, in order."""
    lines = text.split("\n")
    found: list[Block] = []
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("<!-- numbers") and line != _CLOSE:
            match = _OPEN.match(line)
            if not match:
                raise NumbersError(f"{page}:{i + 1}: marker not of the form '<!-- numbers[ opt=value]: COMMAND -->'")
            close = next((j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("<!-- ")), None)
            if close is None or lines[close].strip() != _CLOSE:
                raise NumbersError(f"{page}:{i + 1}: block not closed by '{_CLOSE}' before the next marker")
            options = dict(o.split("=", 1) for o in match["options"].split())
            bad = set(options) - {"fence", "columns"}
            if bad:
                raise NumbersError(f"{page}:{i + 1}: unknown option {sorted(bad)[0]!r} (fence=, columns=)")
            found.append(Block(page, i + 1, match["command"], options, i + 1, close,
                               "\n".join(lines[i + 1:close])))
            i = close
        elif line == _CLOSE:
            raise NumbersError(f"{page}:{i + 1}: '{_CLOSE}' without an opening marker")
        i += 1
    return found


def _argv(command: str, where: str) -> tuple[str, str, list[str]]:
    """``("path" | "module", target, argv)`` of an allowed generator command."""
    words = shlex.split(command)
    if len(words) >= 3 and words[:2] == ["python", "-m"] and _MODULE.match(words[2]):
        return "module", words[2], words[3:]
    if len(words) >= 2 and words[0] == "python" and _SCRIPT.match(words[1]):
        return "path", words[1], words[2:]
    raise NumbersError(f"{where}: command {command!r} is not 'python tools/X.py ...', "
                       "'python benchmarks/X.py ...' or 'python -m lyra_agents.X ...'")


def run(command: str, where: str = "<command>") -> str:
    """The command's standard output, run in this process from the repository root."""
    kind, target, args = _argv(command, where)
    out = io.StringIO()
    old_argv, old_cwd = sys.argv, os.getcwd()
    try:
        os.chdir(ROOT)
        sys.argv = [target, *args]
        with contextlib.redirect_stdout(out):
            if kind == "module":
                runpy.run_module(target, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(str(ROOT / target), run_name="__main__")
    except SystemExit as stop:
        if stop.code not in (None, 0):
            raise NumbersError(f"{where}: {command!r} exited with {stop.code}") from None
    finally:
        sys.argv = old_argv
        os.chdir(old_cwd)
    return out.getvalue().strip("\n")


def _ranges(spec: str) -> list[int]:
    """0-based column indices of ``1-3,5``."""
    picked: list[int] = []
    for part in spec.split(","):
        low, _, high = part.partition("-")
        picked += range(int(low) - 1, int(high or low))
    return picked


def select_columns(table: str, spec: str) -> str:
    """The columns ``spec`` (1-based, ``1-3,5``) of each row of a Markdown table; other lines as they are."""
    keep = _ranges(spec)
    lines = []
    for line in table.split("\n"):
        if line.startswith("|") and line.endswith("|"):
            cells = [c.strip() for c in line[1:-1].split("|")]
            kept = [cells[k] for k in keep if k < len(cells)]
            rule = all(re.fullmatch(r":?-+:?", c) for c in kept)
            line = "|" + "|".join(kept) + "|" if rule else "| " + " | ".join(kept) + " |"
        lines.append(line)
    return "\n".join(lines)


def render(block: Block, runner: Callable[[str, str], str] = run) -> str:
    """The text a block should hold: its command's output, columns picked, fenced, between blank lines."""
    out = runner(block.command, f"{block.page}:{block.line}")
    if "columns" in block.options:
        out = select_columns(out, block.options["columns"])
    if "fence" in block.options:
        out = f"```{block.options['fence']}\n{out}\n```"
    return f"\n{out}\n"


def regenerate(text: str, page: str = "<text>", runner: Callable[[str, str], str] = run) -> tuple[str, list[Block]]:
    """The page's text with every block regenerated, and the blocks whose text differed."""
    lines = text.split("\n")
    stale = []
    for block in reversed(blocks(text, page)):
        fresh = render(block, runner)
        if fresh != block.text:
            stale.append(block)
            lines[block.start:block.end] = fresh.split("\n")
    return "\n".join(lines), stale[::-1]


def pages(root: Path = ROOT) -> list[Path]:
    """The Markdown pages that may hold blocks."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md")),
            *sorted((root / "agents" / "pretrained").glob("*/README.md"))]  # the model cards


def _name(path: Path) -> str:
    """A page's path relative to the repository root where it is inside it."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def first_difference(old: str, new: str) -> str:
    """``-old line / +new line`` of the first line where two texts differ."""
    a, b = old.split("\n"), new.split("\n")
    for i in range(max(len(a), len(b))):
        x, y = (a[i] if i < len(a) else "<none>"), (b[i] if i < len(b) else "<none>")
        if x != y:
            return f"    page:      {x}\n    generated: {y}"
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/docs_numbers.py", description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 where a page's table and its CSV disagree")
    mode.add_argument("--write", action="store_true", help="rewrite every block from its command")
    mode.add_argument("--list", action="store_true", help="list every block and its command")
    parser.add_argument("pages", nargs="*", type=Path, help="Markdown pages (default: README.md and docs/**/*.md)")
    args = parser.parse_args(argv)
    cache: dict[str, str] = {}

    def cached(command: str, where: str) -> str:
        if command not in cache:
            cache[command] = run(command, where)
        return cache[command]

    failed = 0
    try:
        for path in args.pages or pages():
            text = path.read_text(encoding="utf-8")
            page = _name(path)
            if args.list:
                for block in blocks(text, page):
                    print(f"{page}:{block.line}: {block.command}")
                continue
            new, stale = regenerate(text, page, cached)
            for block in stale:
                failed += 1
                print(f"{page}:{block.line}: differs from `{block.command}`"
                      + ("" if args.write else "\n" + first_difference(block.text, render(block, cached))))
            if args.write and stale:
                path.write_text(new, encoding="utf-8")
    except NumbersError as err:
        print(f"numbers: error: {err}", file=sys.stderr)
        return 2
    if args.check and failed:
        print(f"{failed} block(s) disagree with their CSV: python tools/docs_numbers.py --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
