"""Export a trained run for inference only: ``python -m lyra_agents.export RUN OUT_DIR [--overwrite]``.

Writes ``OUT_DIR/model.zip`` (the run's model without the optimizer state,
``policy.optimizer.pth``, which only resuming needs: about two thirds of the file),
``vecnormalize.npz`` (observation statistics, plain arrays) and ``config.yaml`` (the run's,
its paths rewritten so they resolve from ``OUT_DIR``: absolute, or a shipped data file by its
shipped name; the run's header comments kept, and a line saying what exported it).
The result loads the safe way as ``model:OUT_DIR`` (``lyra-gym compare``,
``python -m lyra_agents.benchmark --agent``); nothing is unpickled. It cannot be
resumed with ``train.py --resume`` (no optimizer state): keep the run for that.

``OUT_DIR`` follows the output rule (:mod:`lyra_gym.outputs`), checked before anything
is read or written: a file, a folder under a file or not writable, and a folder that is
or holds the run (symbolic links followed; refused even with ``--overwrite``, since the
export would strip the run's optimizer state) are refused; an existing non-empty folder
needs ``--overwrite``, and then may hold only an export's own files (``model.zip``,
``vecnormalize.npz``, ``config.yaml``), which are replaced; anything else there is
refused, so a stale file (e.g. a ``vecnormalize.pkl``) can never sit beside the new
model. Each file is written to a hidden temporary name and renamed, so an interrupted
export leaves no half-written file.

What is copied is data from anywhere, checked before anything is written: a symbolic link among the
run's files is refused (an export copies the run's own files, never what a link points at), and the
run must load as ``model:RUN`` does (:func:`lyra_agents.policy_scheduler.load_policy_scheduler`, the
safe way: the size limits, zip structure and weights of ``model.zip``, the ``.npz`` statistics with
``allow_pickle=False``, ``config.yaml``; see ``docs/trust.md``). Every refusal is one line, exit status 2.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Sequence

from lyra_agents.artifacts import CONFIG_FILE, MODEL_FILE, VECNORM_STATS_FILE, Artifacts, find_artifacts
from lyra_agents.model_files import OPTIMIZER_MEMBER, ModelFileError
from lyra_gym.outputs import OutputError, atomic_path, check_out_folder, is_temporary

EXPORT_FILES = (MODEL_FILE, VECNORM_STATS_FILE, CONFIG_FILE)


def _owned(entry: Path) -> bool:
    """An export's own file (replaced by ``--overwrite``), or a leftover of an interrupted one."""
    return (entry.name in EXPORT_FILES and not entry.is_dir()) or is_temporary(entry)


def exported_config(path: Path) -> str:
    """The text of an export's ``config.yaml``: the run's header comments (what trained it), a line
    saying what exported it, then the run's config (:func:`~lyra_agents.model_files.load_run_config`,
    its paths resolved beside the run) written by :meth:`~lyra_agents.config.TrainConfig.to_yaml`."""
    from lyra_agents.model_files import load_run_config
    from lyra_gym.provenance import provenance

    cfg = load_run_config(path)
    header = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        header.append(line + "\n")
    made_by = provenance()
    return "".join(header) + (f"# exported by lyra_gym_version: {made_by['lyra_gym_version']}, "
                              f"lyra_gym_commit: {made_by['lyra_gym_commit']}\n") + cfg.to_yaml()


def check_exportable(files: Artifacts) -> None:
    """Refuse a symbolic link among ``files`` (what an export copies), then load the run as ``model:RUN``
    does, unpickling nothing: a :class:`ModelFileError` (or ``FileNotFoundError``) names the file at fault."""
    from lyra_agents.policy_scheduler import load_policy_scheduler

    for path in (files.model, files.vecnormalize, files.config):
        if path is not None and path.is_symlink():
            raise ModelFileError(f"{path}: a symbolic link; an export copies a run's own files, never what a "
                                 f"link points at (copy the file into the run instead)")
    load_policy_scheduler(files.model, trust_model_files=False)


def export(run: str | os.PathLike, out: str | os.PathLike, overwrite: bool = False) -> dict[str, int]:
    """Export ``run`` (a run directory, its ``model.zip`` or a checkpoint) to ``out``; the bytes of each file.

    Raises ``FileNotFoundError`` (no model, statistics or config), :class:`~lyra_gym.outputs.OutputError`
    (``out`` refused, see the module docstring) or :class:`~lyra_agents.model_files.ModelFileError` (a
    symbolic link, a file that does not load: :func:`check_exportable`), before writing anything.
    """
    files = find_artifacts(run)
    if files.vecnormalize is None:
        raise FileNotFoundError(f"{files.model}: no {VECNORM_STATS_FILE} beside it (runs before the safe format "
                                f"cannot be exported)")
    inputs = {"RUN": run, "RUN model": files.model, "RUN statistics": files.vecnormalize, "RUN config": files.config}
    out = check_out_folder(out, overwrite, inputs=inputs, owned=_owned, what="OUT")
    check_exportable(files)
    with zipfile.ZipFile(files.model) as src:
        members = src.infolist()
    config_text = exported_config(files.config)

    with atomic_path(out / MODEL_FILE) as tmp:
        with zipfile.ZipFile(files.model) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
            for info in members:
                if info.filename != OPTIMIZER_MEMBER:
                    dst.writestr(info, src.read(info.filename))
    with atomic_path(out / VECNORM_STATS_FILE) as tmp:
        shutil.copyfile(files.vecnormalize, tmp)
    with atomic_path(out / CONFIG_FILE) as tmp:
        Path(tmp).write_text(config_text)
    return {name: (out / name).stat().st_size for name in EXPORT_FILES}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lyra_agents.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a run directory, its model.zip, or a checkpoint zip")
    parser.add_argument("out", help="the folder to write (created; an existing non-empty one needs --overwrite)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an earlier export's files in OUT (never the run itself, nor other files)")
    args = parser.parse_args(argv)
    try:
        sizes = export(args.run, args.out, args.overwrite)
    except (OSError, ValueError, zipfile.BadZipFile) as err:
        print(f"lyra_agents.export: error: {err}", file=sys.stderr)
        return 2
    for name, size in sizes.items():
        print(f"{Path(args.out) / name}  {size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
