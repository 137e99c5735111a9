"""Safe reading of saved model files: limits, checks and errors (see ``docs/trust.md``).

Every file is data from anywhere: before a member of ``model.zip`` or of a ``.npz`` is
inflated, its declared size is held against :data:`MAX_DATA_BYTES` / :data:`MAX_ARCHIVE_BYTES`
(and read through a bounded reader), and ``data``'s nesting against :data:`MAX_JSON_DEPTH`
before it is parsed. Every problem is a one-line :class:`ModelFileError` naming the file.
:func:`read_model_zip` reads ``model.zip`` unpickling nothing. Pickles are loaded only when
trusted (:func:`trust_requested`: ``--trust-model-files``, ``model:PATH?trust=1`` or
``LYRA_GYM_TRUST_MODEL_FILES=1``), with a one-line warning (:func:`warn_trusted`).
The limits are read here at each check: set them on this module
(``lyra_agents.model_files.MAX_ARCHIVE_BYTES = ...``); a name re-exported elsewhere is a copy, and
setting it there changes nothing.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from lyra_agents.config import TrainConfig, load_train_config
from lyra_gym.errors import LyraGymError

TRUST_ENV = "LYRA_GYM_TRUST_MODEL_FILES"   # =1: unpickle model files as before (only for files you trust)


# Limits on what a saved file may make a load inflate or parse, checked before it is (a hostile
# archive is refused, not inflated). Each is far above any file this gym writes; raise one only for
# files you trust. A 4.6 MB zip whose ``data`` inflated to 1 GiB took 61 s and 2.3 GB before them.
MAX_DATA_BYTES = 16 * 2**20      # model.zip's ``data`` JSON: SB3 writes ~200 KB (the shipped agent: 176 KB)
MAX_ARCHIVE_BYTES = 512 * 2**20  # all members of a model.zip or .npz, inflated (the shipped agent: 4 MB)
MAX_JSON_DEPTH = 64              # nesting of ``data`` (SB3 writes 3 levels); json recurses once per level
MAX_CONFIG_BYTES = 2**20         # config.yaml (a run's is ~1 KB); PyYAML recurses once per nesting level


class UntrustedModelFileError(LyraGymError, FileNotFoundError):
    """A saved file exists only in a format that can run code when loaded (a pickle), and loading
    it was not explicitly trusted. (A ``FileNotFoundError``: the safe file is missing.)"""


def trust_requested(trust: bool | None = None) -> bool:
    """``trust`` when given, else the environment variable ``LYRA_GYM_TRUST_MODEL_FILES`` (1/true/yes)."""
    if trust is not None:
        return bool(trust)
    return os.environ.get(TRUST_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def warn_trusted(path: str | os.PathLike) -> None:
    """The one-line warning printed whenever model files are unpickled."""
    print(f"warning: trusting model files at {path}: unpickling them can run arbitrary code", file=sys.stderr)


class ModelFileError(LyraGymError):
    """A saved model file that cannot be loaded: the one-line message names the file and the problem."""


def brief_error(err: BaseException, limit: int = 300) -> str:
    """``err``'s message on one line, at most ``limit`` characters."""
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_archive(path: str | os.PathLike, archive: zipfile.ZipFile, json_member: str | None = None) -> None:
    """Refuse ``archive`` when a member, or all together, would inflate past :data:`MAX_ARCHIVE_BYTES`
    (``json_member``: :data:`MAX_DATA_BYTES`), from the sizes its directory declares (nothing inflated)."""
    total = 0
    for info in archive.infolist():
        cap, limit = ((MAX_DATA_BYTES, "MAX_DATA_BYTES") if info.filename == json_member
                      else (MAX_ARCHIVE_BYTES, "MAX_ARCHIVE_BYTES"))
        if info.file_size > cap:
            raise ModelFileError(f"{path}: member {info.filename!r} inflates to {info.file_size} bytes, over the "
                                 f"limit of {cap} (lyra_agents.model_files.{limit}): refused without inflating it")
        total += info.file_size
    if total > MAX_ARCHIVE_BYTES:
        raise ModelFileError(f"{path}: its members inflate to {total} bytes, over the limit of {MAX_ARCHIVE_BYTES} "
                             f"(lyra_agents.model_files.MAX_ARCHIVE_BYTES): refused without inflating them")


def read_member(path: str | os.PathLike, archive: zipfile.ZipFile, name: str, cap: int) -> bytes:
    """Member ``name``, inflating at most ``cap`` + 1 bytes (a header that understates the size
    fails its CRC check or the cap, never inflates further)."""
    try:
        with archive.open(name) as fh:
            raw = fh.read(cap + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as err:
        raise ModelFileError(f"{path}: member {name!r}: unreadable ({brief_error(err)})") from None
    if len(raw) > cap:
        raise ModelFileError(f"{path}: member {name!r} inflates past the limit of {cap} bytes")
    return raw


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def json_depth(raw: bytes) -> int:
    """The deepest nesting of ``[``/``{`` in JSON text, strings skipped, counted without parsing."""
    skeleton = np.frombuffer(_JSON_STRING.sub(b"", raw), dtype=np.uint8)
    step = np.isin(skeleton, (ord("["), ord("{"))).astype(np.int64) - np.isin(skeleton, (ord("]"), ord("}")))
    return int(np.cumsum(step).max(initial=0))


def parse_json_member(path: str | os.PathLike, name: str, raw: bytes) -> Any:
    """A member's JSON: UTF-8 and :data:`MAX_JSON_DEPTH` checked before parsing (no RecursionError)."""
    where = f"{path}: member {name!r}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ModelFileError(f"{where}: not UTF-8 (byte {raw[err.start]:#04x} at offset {err.start})") from None
    depth = json_depth(raw)
    if depth > MAX_JSON_DEPTH:
        raise ModelFileError(f"{where}: JSON nested {depth} levels deep, over the limit of {MAX_JSON_DEPTH} "
                             f"(lyra_agents.model_files.MAX_JSON_DEPTH)")
    try:
        return json.loads(text)
    except ValueError as err:
        raise ModelFileError(f"{where}: not JSON ({brief_error(err)})") from None


def read_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every array of a ``.npz`` (``allow_pickle=False``), sizes checked before inflating
    (:func:`check_archive`); any problem is a :class:`ModelFileError` naming the file."""
    try:
        with zipfile.ZipFile(path) as archive:
            check_archive(path, archive)
    except zipfile.BadZipFile:
        raise ModelFileError(f"{path}: not a .npz file (a zip of arrays was expected)") from None
    except OSError as err:
        raise ModelFileError(f"{path}: unreadable ({err.strerror or brief_error(err)})") from None
    arrays = {}
    with np.load(path, allow_pickle=False) as data:
        for key in data.files:
            try:
                arrays[key] = data[key]
            except (ValueError, OSError, EOFError, MemoryError, zipfile.BadZipFile, zlib.error) as err:
                raise ModelFileError(f"{path}: array {key!r}: {brief_error(err)}") from None
    return arrays


def load_run_config(path: str | os.PathLike) -> TrainConfig:
    """A saved run's ``config.yaml`` (:func:`lyra_agents.config.load_train_config`); too large, not UTF-8
    or nested too deeply is a :class:`ModelFileError` naming it."""
    size = Path(path).stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ModelFileError(f"{path}: {size} bytes, over the limit of {MAX_CONFIG_BYTES} for a run config")
    try:
        return load_train_config(path)
    except UnicodeDecodeError:
        raise ModelFileError(f"{path}: not UTF-8 text") from None
    except RecursionError:
        raise ModelFileError(f"{path}: nested too deeply to be a run config") from None


def untrusted_error(path: Path, what: str) -> UntrustedModelFileError:
    """The error for ``what`` (e.g. ``"observation statistics"``) kept at ``path`` only as an
    untrusted pickle: it names the ways to convert or trust it."""
    return UntrustedModelFileError(
        f"{path}: {what} only as a pickle, which is not loaded by default (a crafted file can run code); "
        f"if you trust it, convert it once with `python -m lyra_agents.factory convert {path}` "
        f"or load it with --trust-model-files / model:PATH?trust=1 / {TRUST_ENV}=1")


# plain counters of model.zip's ``data`` JSON that a safe load restores (everything else comes from the config)
_DATA_COUNTERS = {"num_timesteps": int, "_total_timesteps": int, "_num_timesteps_at_start": int,
                  "_n_updates": int, "_episode_num": int, "_current_progress_remaining": float}
POLICY_MEMBER, OPTIMIZER_MEMBER, DATA_MEMBER = "policy.pth", "policy.optimizer.pth", "data"


def read_model_zip(path: str | os.PathLike, members: tuple[str, ...] = (POLICY_MEMBER,),
                   device: str = "cpu") -> tuple[dict[str, Any], dict[str, Any]]:
    """(plain counters of ``data``, ``{member stem: state dict}``) of an SB3 ``model.zip``, unpickling nothing:
    ``data`` is read as JSON and only :data:`_DATA_COUNTERS` of plain type kept (its ``:serialized:``
    cloudpickle fields are never decoded); each ``.pth`` member goes through ``torch.load(weights_only=True)``.
    Sizes and nesting are checked first (module docstring); every problem is a :class:`ModelFileError`."""
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise ModelFileError(f"{path}: not a zip file (an SB3 model.zip was expected)") from None
    except OSError as err:
        raise ModelFileError(f"{path}: unreadable ({err.strerror or brief_error(err)})") from None
    with archive:
        check_archive(path, archive, DATA_MEMBER)
        names = set(archive.namelist())
        missing = [m for m in members if m not in names]
        if missing:
            raise ModelFileError(f"{path}: not an SB3 model file (no {', '.join(missing)} inside)")
        counters: dict[str, Any] = {}
        if DATA_MEMBER in names:
            data = parse_json_member(path, DATA_MEMBER, read_member(path, archive, DATA_MEMBER, MAX_DATA_BYTES))
            for key, kind in _DATA_COUNTERS.items():
                value = data.get(key) if isinstance(data, dict) else None
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    counters[key] = kind(value)
        states = {}
        for member in members:
            try:  # the stream inflates at most the declared size, checked above
                with archive.open(member) as fh:
                    if zipfile.is_zipfile(fh):  # torch's format is itself a zip: its records are limited too
                        with zipfile.ZipFile(fh) as inner:
                            check_archive(f"{path}: member {member!r}", inner)
                    fh.seek(0)
                    state = torch.load(fh, map_location=device, weights_only=True)
            except ModelFileError:
                raise
            except pickle.UnpicklingError:  # torch's long advice on weights_only does not apply here
                raise ModelFileError(f"{path}: member {member!r}: not a PyTorch weights file of tensors only "
                                     f"(torch.load(weights_only=True) refused it)") from None
            except Exception as err:  # whatever else the weights reader raises: the file is bad
                raise ModelFileError(f"{path}: member {member!r}: not a PyTorch weights file "
                                     f"({type(err).__name__}: {brief_error(err, 200)})") from None
            if not isinstance(state, Mapping):
                raise ModelFileError(f"{path}: member {member!r}: a {type(state).__name__}, a state dict was expected")
            states[member[:-len(".pth")]] = state
    return counters, states


