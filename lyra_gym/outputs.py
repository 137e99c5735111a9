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
5. Nothing is written inside a ``.git`` folder, and a run folder that is a symbolic
   link is refused, never followed (:func:`replace_folder`).
6. A folder that several runs fill (compare, sweep) is locked while in use
   (:func:`locked_folder`): a second command into it is refused, and the leftovers of
   an interrupted one (:func:`is_leftover`) are removed by the next.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import os
import re
import secrets
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from filelock import FileLock, Timeout

from lyra_gym.errors import LyraGymError
from lyra_gym.interrupts import interrupts_deferred

TMP_MARK = ".tmp-"  # in the name of a file or folder being written
LOCK_SUFFIX = ".lyra-gym.lock"  # ``.<folder>.lyra-gym.lock``, beside a folder in use (locked_folder)
_LEFTOVER = re.compile(r"\..+\.tmp-(\d+)-[0-9a-z_]{8}")  # what atomic_path, write_result, staged_folder name


class OutputError(LyraGymError):
    """An output path that cannot or must not be written (the message names it)."""


Inputs = Mapping[str, "str | os.PathLike[str] | None"]  # what the command reads: {"--trace": path, ...}


def _real(path: str | os.PathLike[str]) -> Path:
    """``path`` made absolute with every symbolic link followed (it need not exist)."""
    return Path(os.path.realpath(os.path.expanduser(os.fspath(path))))


def _is_within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _refuse_git(path: str | os.PathLike[str], what: str) -> None:
    """Refuse a path inside a ``.git`` folder (git's own data), symbolic links followed."""
    if any(part.lower() == ".git" for part in _real(path).parts):
        raise OutputError(f"{what} {path}: is inside a .git folder, which only git writes; choose another {what}")


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
        with interrupts_deferred():  # the probe file never outlives the probe
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
    _refuse_git(out, what)
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
    _refuse_git(out, what)
    _check_writable_parent(out.parent if os.fspath(out.parent) else Path("."), path, what)
    check_inputs_outside(out, inputs or {}, what)
    if (out.exists() or out.is_symlink()) and not overwrite:
        raise OutputError(f"{what} {path}: exists; pass --overwrite to replace it, or choose another file")
    return out


def is_temporary(entry: Path) -> bool:
    """A leftover of an interrupted atomic write (``.<name>.tmp-...``)."""
    return entry.name.startswith(".") and TMP_MARK in entry.name


def is_leftover(entry: Path) -> bool:
    """A temporary file or folder named as this module and :func:`lyra_gym.run.simulate.write_result`
    name them (``.<name>.tmp-<pid>-<8 characters>``) whose process is gone: an interrupted write's."""
    match = _LEFTOVER.fullmatch(entry.name)
    return match is not None and not _alive(int(match.group(1)))


def _alive(pid: int) -> bool:
    """Whether another process ``pid`` runs (POSIX; elsewhere none is assumed: the lock guards)."""
    if os.name != "posix" or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)  # signal 0: nothing is sent
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it runs, as another user
    return True


def remove_leftovers(folder: Path, depth: int = 2) -> None:
    """Remove the leftovers (:func:`is_leftover`) of interrupted commands in ``folder`` and, down
    to ``depth`` levels, in its sub-folders (symbolic links are never followed); best effort."""
    for entry in sorted(folder.iterdir()):
        try:
            if is_leftover(entry):
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
            elif depth > 1 and entry.is_dir() and not entry.is_symlink():
                remove_leftovers(entry, depth - 1)
        except OSError:
            pass  # a later write there reports what is wrong


def _holder(lock_path: Path) -> str:
    """`` (pid N)`` of the command holding ``lock_path`` (it writes its pid there), or ""."""
    try:
        text = lock_path.read_text()[:20].strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


def _write_pid(lock_path: Path) -> None:
    """Record this process's pid in the lock file it holds (best effort: some platforms refuse)."""
    try:
        lock_path.write_text(f"{os.getpid()}\n")
    except OSError:
        pass


def _missing_parents(folder: Path) -> list[Path]:
    """The ancestors of ``folder`` (itself included) that do not exist, deepest first."""
    missing = []
    while not folder.exists() and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    return missing


@contextmanager
def locked_folder(path: str | os.PathLike[str], what: str = "--out") -> Iterator[Path]:
    """Hold ``path``'s lock for the block (filelock, on ``.<name>.lyra-gym.lock`` beside the folder,
    symbolic links followed; removed on exit, as are parent folders created for it that stay
    empty). Taken before the folder is checked, so of two commands into one folder the second
    is refused (:class:`OutputError` naming the holder's pid), and no command ever sees
    another's half-written files. The leftovers of interrupted commands in the folder are
    removed on entry (:func:`remove_leftovers`). Yields ``Path(path)``; creates nothing in it."""
    if not os.fspath(path):
        raise OutputError(f"{what}: empty path")
    real = _real(path)
    _refuse_git(real, what)
    if real.exists() and not real.is_dir():
        raise OutputError(f"{what} {path}: is a file, not a folder")
    _check_writable_parent(real, path, what)
    created = _missing_parents(real.parent)
    real.parent.mkdir(parents=True, exist_ok=True)
    lock_path = real.parent / f".{real.name or 'root'}{LOCK_SUFFIX}"
    lock = FileLock(lock_path)
    try:
        lock.acquire(timeout=0)
        if not lock_path.exists():  # its holder removed it as we took it: it was in use just now
            lock.release()
            raise Timeout(str(lock_path))
    except Timeout:
        raise OutputError(f"{what} {path}: in use by another lyra-gym command{_holder(lock_path)}; wait "
                          f"for it to finish, or choose another {what}") from None
    except OSError as err:
        raise OutputError(f"{what} {path}: cannot lock it ({lock_path}: {err.strerror or err})") from None
    try:
        _write_pid(lock_path)
        if real.is_dir():
            remove_leftovers(real)
        yield Path(path)
    finally:
        try:
            lock_path.unlink(missing_ok=True)  # before the release: no command locks a removed file
        except OSError:
            pass  # a platform that cannot remove an open file: filelock's release does
        lock.release()
        for folder in created:
            try:
                folder.rmdir()
            except OSError:
                break  # not empty: the command wrote there


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


def atomic_write_csv(path: str | os.PathLike[str], columns: Sequence[str],
                     rows: Iterable[Mapping[str, Any]]) -> Path:
    """Write ``rows`` (dicts keyed by ``columns``) as a CSV with a header to ``path`` atomically
    (:func:`atomic_write_text`; ``\\n`` line ends); returns the path."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return atomic_write_text(path, text.getvalue())


def owned_names(*patterns: str) -> Callable[[Path], bool]:
    """``owned`` predicate of :func:`check_out_folder`: an entry whose name matches one of the
    glob ``patterns``, or a temporary leftover (:func:`is_temporary`)."""
    return lambda entry: is_temporary(entry) or any(fnmatch.fnmatchcase(entry.name, p) for p in patterns)


def _tmp_sibling(target: Path, kind: str = "") -> Path:
    return target.parent / f".{target.name}{kind}{TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}"


def replace_folder(new: str | os.PathLike[str], target: str | os.PathLike[str]) -> Path:
    """Rename the complete folder ``new`` to ``target``, replacing any folder there as a whole
    (renamed aside first, then removed), so ``target`` is always the old folder or the new one.
    A symbolic link at ``target`` is refused (:class:`OutputError`), never followed: the folder
    it points to may be another command's."""
    target = Path(target)
    if target.is_symlink():
        raise OutputError(f"{target}: is a symbolic link, where a run folder is written; a run folder is "
                          f"replaced as a whole, so it is never followed (remove the link)")
    with interrupts_deferred():  # an interrupt between the renames would leave no target
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
    stage = folder / f".stage{TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}"
    try:
        stage.mkdir()  # inside the try: an interrupt as it returns still removes it
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
