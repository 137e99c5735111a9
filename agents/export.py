"""Export a trained run for inference only: ``python -m agents.export RUN OUT_DIR``.

Writes ``OUT_DIR/model.zip`` (the run's model without the optimizer state,
``policy.optimizer.pth``, which only resuming needs: about two thirds of the file),
``vecnormalize.npz`` (observation statistics, plain arrays) and ``config.yaml``.
The result loads the safe way as ``model:OUT_DIR`` (``lyra-gym compare``,
``python -m agents.benchmark --agent``); nothing is unpickled. Each file is
written to a temporary name and renamed, so an interrupted export leaves no
half-written file.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Sequence

from agents.factory import CONFIG_FILE, MODEL_FILE, OPTIMIZER_MEMBER, VECNORM_STATS_FILE, find_artifacts


def _atomic(target: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


def export(run: str | os.PathLike, out: str | os.PathLike) -> dict[str, int]:
    """Export ``run`` (a run directory, its ``model.zip`` or a checkpoint) to ``out``; the bytes of each file."""
    files = find_artifacts(run)
    if files.vecnormalize is None:
        raise FileNotFoundError(f"{files.model}: no {VECNORM_STATS_FILE} beside it (runs before the safe format "
                                f"cannot be exported)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    def write_model(tmp: Path) -> None:
        with zipfile.ZipFile(files.model) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
            for info in src.infolist():
                if info.filename != OPTIMIZER_MEMBER:
                    dst.writestr(info, src.read(info.filename))

    _atomic(out / MODEL_FILE, write_model)
    _atomic(out / VECNORM_STATS_FILE, lambda tmp: shutil.copyfile(files.vecnormalize, tmp))
    _atomic(out / CONFIG_FILE, lambda tmp: shutil.copyfile(files.config, tmp))
    return {name: (out / name).stat().st_size for name in (MODEL_FILE, VECNORM_STATS_FILE, CONFIG_FILE)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a run directory, its model.zip, or a checkpoint zip")
    parser.add_argument("out", help="the folder to write (created)")
    args = parser.parse_args(argv)
    try:
        sizes = export(args.run, args.out)
    except (FileNotFoundError, ValueError, zipfile.BadZipFile) as err:
        print(f"agents.export: error: {err}", file=sys.stderr)
        return 2
    for name, size in sizes.items():
        print(f"{Path(args.out) / name}  {size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
