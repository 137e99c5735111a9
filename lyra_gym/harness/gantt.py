"""Draw the Gantt picture of a simulation run recorded with ``lyra-gym simulate ... --timeline``.

Run::

    python -m lyra_gym.harness.gantt RUN [--out RUN/gantt.png] [--title TEXT]

``RUN`` is a run folder (or its ``placements.csv``): the picture
(:mod:`lyra_gym.envs.gantt_draw`) reads ``placements.csv`` (where every job ran, and the loans),
``config.json`` (the cluster: which server is in which pool, its GPUs), ``timeline.csv`` (jobs
queued over time) and ``policy.json`` (the title). A missing file or a malformed row is one
line on stderr naming it, exit status 2.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Sequence

from lyra_gym.errors import LyraGymError
from lyra_gym.model.config import config_from_dict
from lyra_gym.run.placements import Placements, PlacementsFileError, read_placements_csv
from lyra_gym.sim.cluster import build_servers


class GanttInputError(ValueError):
    """A run that cannot be drawn; the message is the one line the command prints."""


def _folder(run: Path) -> Path:
    if run.is_file() and run.name == "placements.csv":
        return run.parent
    if not run.exists():
        raise GanttInputError(f"{run}: no such run folder or file")
    if not run.is_dir():
        raise GanttInputError(f"{run}: expected a run folder or its placements.csv")
    if not (run / "placements.csv").is_file():
        hint = " (it has timeline.csv: rerun simulate with this version)" if (run / "timeline.csv").exists() else ""
        raise GanttInputError(f"{run}: no placements.csv; record one with `lyra-gym simulate ... --timeline`{hint}")
    return run


def _servers(folder: Path) -> list[tuple[str, int]]:
    path = folder / "config.json"
    try:
        config = config_from_dict(json.loads(path.read_text()))
    except FileNotFoundError:
        raise GanttInputError(f"{path}: missing (the run's cluster)") from None
    except (json.JSONDecodeError, LyraGymError, TypeError) as exc:
        raise GanttInputError(f"{path}: not a run's config ({str(exc).splitlines()[0]})") from None
    return [(s.pool.value, s.num_gpus) for s in build_servers(config.cluster)]


def _queue(folder: Path) -> list[tuple[float, int]]:
    """``(time_s, queued)`` from ``timeline.csv`` (empty without one), equal neighbours merged."""
    path = folder / "timeline.csv"
    if not path.is_file():
        return []
    queue: list[tuple[float, int]] = []
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or not {"time_s", "queued"} <= set(reader.fieldnames):
            raise GanttInputError(f"{path}: not a timeline.csv (no time_s and queued columns)")
        for line, row in enumerate(reader, start=2):
            try:
                t, q = float(row["time_s"]), int(row["queued"])
            except (TypeError, ValueError):
                raise GanttInputError(f"{path}: line {line}: time_s or queued is not a number") from None
            if not queue or queue[-1][1] != q:
                queue.append((t, q))
    return queue


def _title(folder: Path) -> str:
    try:
        policy = json.loads((folder / "policy.json").read_text())
        return f"{policy['policy']}, seed {policy['seed']} ({folder.name})"
    except (OSError, ValueError, KeyError, TypeError):
        return folder.name


def load_run(run: str | Path) -> tuple[Placements, str]:
    """The placements of run folder ``run`` (or its ``placements.csv``) and a title for them."""
    folder = _folder(Path(run))
    servers = _servers(folder)
    try:
        placements = read_placements_csv(folder / "placements.csv", servers, _queue(folder))
    except PlacementsFileError as exc:
        raise GanttInputError(str(exc)) from None
    return placements, _title(folder)


def draw_run(run: str | Path, out: str | Path | None = None, title: str | None = None) -> Path:
    """Write the Gantt PNG of ``run`` to ``out`` (default ``RUN/gantt.png``); returns its path."""
    placements, default_title = load_run(run)
    folder = _folder(Path(run))
    target = Path(out) if out is not None else folder / "gantt.png"
    if target.is_dir():
        raise GanttInputError(f"--out {target}: is a folder; give a file name ending in .png")
    if target.suffix.lower() != ".png":
        raise GanttInputError(f"--out {target}: must end in .png")
    if not target.parent.is_dir():
        raise GanttInputError(f"--out {target}: folder {target.parent} does not exist")
    from lyra_gym.envs.gantt_draw import GanttError, write_gantt_png  # (matplotlib: only when drawing)

    try:
        write_gantt_png(placements, str(target), title if title is not None else default_title)
    except GanttError as exc:
        raise GanttInputError(f"{folder / 'placements.csv'}: {exc}") from None
    return target


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of this command (also for ``lyra-gym plot gantt``)."""
    parser.add_argument("run", help="a run folder of `lyra-gym simulate --timeline`, or its placements.csv")
    parser.add_argument("--out", help="PNG to write (default RUN/gantt.png)")
    parser.add_argument("--title", help="the picture's title (default: policy, seed and run name)")


def run_command(args: argparse.Namespace) -> int:
    """Draw ``args.run``; a bad input is one line on stderr and status 2."""
    try:
        out = draw_run(args.run, args.out, args.title)
    except GanttInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lyra_gym.harness.gantt", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run_command(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
