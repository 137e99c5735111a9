"""The command line of :mod:`lyra_agents.learning_curve`: training runs' learning curves, one line per run.

Run: python tools/plot_learning_curve.py RUN [RUN ...] [--out docs/learning_curve.png] [--band] [--join]

Each RUN is a run folder of train.py; what is drawn, ``--band`` and ``--join``: see the module.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from lyra_agents.learning_curve import CurveError, plot_learning_curves


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, nargs="+", help="run folders of train.py")
    parser.add_argument("--out", type=Path, default=Path("docs/learning_curve.png"), help="PNG to write")
    parser.add_argument("--band", action="store_true", help="runs that differ only by a seed suffix: mean and band")
    parser.add_argument("--join", action="store_true", help="the folders are one run and its resumptions")
    parser.add_argument("--seeds", action="store_true", help=argparse.SUPPRESS)  # older spelling: the default now
    parser.add_argument("--title", default="", help="the figure's title")
    args = parser.parse_args(argv)
    runs: list = [args.runs] if args.join else list(args.runs)
    try:
        out = plot_learning_curves(runs, args.out, band=args.band, title=args.title)
    except CurveError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
