"""The one output rule of every command that writes files.

simulate, compare, sweep, trace generate/convert, ``lyra_agents.export``,
``lyra_agents.benchmark``, ``lyra_agents.evaluate`` and ``train.py`` follow it:

1. The target is checked before any work (:func:`check_out_folder`,
   :func:`check_out_file`): not under a file, writable, and refused when it
   already exists (a file) or holds anything (a folder) unless ``overwrite``.
2. ``overwrite`` never touches what the command reads: every input is resolved
   (symbolic links followed) and a target that is, or holds, an input is
   refused with the input's name, overwrite or not.
3. ``overwrite`` replaces only the command's own files; nothing is emptied.
   A command whose folder is replaced as a whole (a run folder) passes
   ``owned`` and a folder holding anything else is refused.
4. Files are written atomically (:func:`atomic_path`, :func:`atomic_write_text`):
   a hidden sibling first, renamed over the target once complete, so an
   interrupted command leaves the old file or the new one, never half of one.
"""

from __future__ import annotations

import fnmatch
import os
import secrets
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping

from lyra_gym.errors import LyraGymError

TMP_MARK = ".tmp-"  # in the name of a file or folder being written


class OutputError(LyraGymError):
    """An output path that cannot or must not be written (the message names it)."""


Inputs = Mapping[str, "str | os.PathLike[str] | None"]  # what the command reads: {"--trace": path, ...}


def _real(path: str | os.PathLike[str]) -> Path:
    """``path`` made absolute with every symbolic link followed (it need not exist)."""
    return Path(os.path.realpath(os.path.expanduser(os.fspath(path))))


def _is_within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _check_writable_parent(out: Path, path: str | os.PathLike[str], what: str) -> None:
    """Refuse ``out`` when its nearest existing ancestor is a file or not writable (probed by
    creating a temporary file, so read-only file systems are caught too)."""
    probe = out
    while not probe.exists():
        if probe.is_symlink():
            raise OutputError(f"{what} {path}: {probe} is a broken symbolic link")
        parent = probe.parent
        if parent == probe:
            break
        probe = parent
    if probe.exists() and not probe.is_dir():
        raise OutputError(f"{what} {path}: {probe} is a file, so nothing can be written under it")
    try:
        fd, name = tempfile.mkstemp(prefix=".lyra-gym-write-test-", dir=probe)
        os.close(fd)
        os.unlink(name)
    except OSError as err:
        raise OutputError(f"{what} {path}: cannot write in {probe} ({err.strerror or err})") from None


def check_inputs_outside(target: str | os.PathLike[str], inputs: Inputs, what: str = "--out") -> None:
    """Refuse ``target`` when it is, or (a folder) holds, one of ``inputs``; both are resolved,
    so a symbolic link on either side cannot hide the overlap."""
    real_target = _real(target)
    for option, path in inputs.items():
        if path is None or not os.fspath(path):
            continue
        real_input = _real(path)
        if _is_within(real_input, real_target):
            relation = "is" if real_input == real_target else "holds"
            raise OutputError(f"{what} {target}: {relation} {option} {path}, which this command reads; writing "
                              f"there could destroy it (choose another {what})")


def check_out_folder(path: str | os.PathLike[str], overwrite: bool = False, *, inputs: Inputs | None = None,
                     owned: Callable[[Path], bool] | None = None, what: str = "--out") -> Path:
    """Check an output folder before any work and return it; creates nothing.

    Refused: an empty path, a file, a folder under a file or not writable, a folder that
    is or holds one of ``inputs`` (always), an existing non-empty folder unless
    ``overwrite``, and with ``owned`` a folder holding an entry ``owned(entry)`` rejects
    (the folder is replaced as a whole, so that entry would be lost)."""
    if not os.fspath(path):
        raise OutputError(f"{what}: empty path")
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise OutputError(f"{what} {path}: is a file, not a folder")
    _check_writable_parent(out, path, what)
    check_inputs_outside(out, inputs or {}, what)
    if out.is_dir():
        entries = sorted(out.iterdir())
        if entries and not overwrite:
            raise OutputError(f"{what} {path}: exists and is not empty; pass --overwrite to replace this "
                              f"command's files in it, or choose another folder")
        foreign = [e.name for e in entries if owned is not None and not owned(e)]
        if foreign:
            raise OutputError(f"{what} {path}: holds {', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}, "
                              f"which this command did not write; --overwrite replaces the folder as a whole, "
                              f"so choose another folder")
    return out


def check_out_file(path: str | os.PathLike[str], overwrite: bool = False, *, inputs: Inputs | None = None,
                   what: str = "--out") -> Path:
    """Check an output file before any work and return it; creates nothing.

    Refused: an empty path, a folder, a path under a file or in a folder that cannot be
    written, one of ``inputs`` (always, symbolic links followed), and an existing file
    unless ``overwrite``."""
    if not os.fspath(path):
        raise OutputError(f"{what}: empty path")
    out = Path(path)
    if out.is_dir():
        raise OutputError(f"{what} {path}: is a folder; give the file to write")
    _check_writable_parent(out.parent if os.fspath(out.parent) else Path("."), path, what)
    check_inputs_outside(out, inputs or {}, what)
    if (out.exists() or out.is_symlink()) and not overwrite:
        raise OutputError(f"{what} {path}: exists; pass --overwrite to replace it, or choose another file")
    return out


def is_temporary(entry: Path) -> bool:
    """A leftover of an interrupted atomic write (``.<name>.tmp-...``)."""
    return entry.name.startswith(".") and TMP_MARK in entry.name


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a hidden sibling path to write; on success it is renamed over ``path`` (a
    symbolic link at ``path`` is replaced, never followed); on failure it is removed."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}{TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}"
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        if tmp.exists() or tmp.is_symlink():
            tmp.unlink()


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` atomically (:func:`atomic_path`); returns the path."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (:func:`atomic_path`); returns the path."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def owned_names(*patterns: str) -> Callable[[Path], bool]:
    """``owned`` predicate of :func:`check_out_folder`: an entry whose name matches one of the
    glob ``patterns``, or a temporary leftover (:func:`is_temporary`)."""
    return lambda entry: is_temporary(entry) or any(fnmatch.fnmatchcase(entry.name, p) for p in patterns)


def _tmp_sibling(target: Path, kind: str = "") -> Path:
    return target.parent / f".{target.name}{kind}{TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}"


def replace_folder(new: str | os.PathLike[str], target: str | os.PathLike[str]) -> Path:
    """Rename the complete folder ``new`` to ``target``, replacing any folder there as a whole
    (renamed aside first, then removed), so ``target`` is always the old folder or the new one.
    A symbolic link at ``target`` is followed: the folder it points to is replaced, the link kept."""
    target = Path(target)
    if target.is_symlink():
        target = Path(os.path.realpath(target))
    if target.exists():
        old = _tmp_sibling(target, ".old")
        os.rename(target, old)
        try:
            os.rename(new, target)
        except BaseException:
            os.rename(old, target)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(new, target)
    return target


def _merge_into(src: Path, dst: Path) -> list[Path]:
    moved = []
    for entry in sorted(src.iterdir()):
        final = dst / entry.name
        if entry.is_dir() and not entry.is_symlink():
            final.mkdir(exist_ok=True)
            moved += _merge_into(entry, final)
        else:
            os.replace(entry, final)
            moved.append(final)
    return moved


@contextmanager
def staged_folder(folder: str | os.PathLike[str], moved: list[Path] | None = None) -> Iterator[Path]:
    """Yield an empty hidden folder inside ``folder`` for a writer that takes a folder
    (plots, summaries, TensorBoard runs); on success every file written there is moved into
    ``folder`` at the same relative path (one atomic rename per file; names listed in
    ``moved``), on failure nothing is moved. The staging folder is removed either way."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".stage{TMP_MARK}{os.getpid()}-", dir=folder))
    try:
        yield stage
        done = _merge_into(stage, folder)
        if moved is not None:
            moved += done
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def named_inputs(pairs: Iterable[tuple[str, "str | os.PathLike[str] | None"]]) -> dict[str, "str | os.PathLike[str] | None"]:
    """``{option: path}`` from pairs, keeping repeated options apart (``model:`` policies)."""
    found: dict[str, str | os.PathLike[str] | None] = {}
    for option, path in pairs:
        key, n = option, 2
        while key in found:
            key, n = f"{option} ({n})", n + 1
        found[key] = path
    return found
