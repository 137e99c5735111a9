"""``python -m lyra_agents.factory convert PATH``: write the ``.npz`` statistics of an old run that
only has SB3's pickle (it unpickles it: run it only on files you trust)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable, Sequence

from lyra_agents.artifacts import find_artifacts, stats_path
from lyra_agents.model_files import warn_trusted
from lyra_agents.normalizer_stats import load_normalizer, save_normalizer_stats


def convert_pickled_statistics(path: str | os.PathLike) -> Path:
    """Write the ``.npz`` of a run (or checkpoint) that has only SB3's ``vecnormalize`` pickle.
    This unpickles it: only for files you trust. Returns the ``.npz`` path."""
    files = find_artifacts(path)
    if files.vecnormalize_pickle is None:
        raise FileNotFoundError(f"{files.model}: no vecnormalize .pkl beside it to convert")
    warn_trusted(files.vecnormalize_pickle)
    return save_normalizer_stats(load_normalizer(files.vecnormalize_pickle, trust=True), stats_path(files.model))


def convert_main(prog: str, convert_help: str, path_help: str, convert: Callable[[str], Path],
                 argv: Sequence[str] | None = None) -> int:
    """A ``prog convert PATH`` command line around ``convert`` (returns the exit code)."""
    import argparse

    parser = argparse.ArgumentParser(prog=prog)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("convert", help=convert_help).add_argument("path", help=path_help)
    args = parser.parse_args(argv)
    try:
        out = convert(args.path)
    except (FileNotFoundError, ValueError) as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m lyra_agents.factory convert PATH``: see :func:`convert_pickled_statistics`."""
    return convert_main("python -m lyra_agents.factory",
                        "write vecnormalize .npz from a trusted vecnormalize .pkl "
                        "(unpickles it: only for files you trust)",
                        "run directory, its model.zip, or a checkpoint zip", convert_pickled_statistics, argv)
