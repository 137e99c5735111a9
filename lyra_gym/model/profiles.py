"""Throughput profiles: how fast a model trains on a GPU type and a worker count.

Profile file format (JSON, ``"format": "lyra-gym-profiles/1"``)::

    {"format": "lyra-gym-profiles/1",
     "metadata": {"reference_gpu": "v100", ...},
     "models": {"resnet50": {
         "local_batch": 256,                 # samples per worker per step
         "restart_overhead_s": 250,          # checkpoint + restore, seconds
         "max_local_batch": 256,             # optional: most samples per worker per step (memory)
         "min_local_batch": 32,              # optional: fewest samples per worker per step measured
         "gpus": {"v100": {"step_compute_s": 0.213,     # forward+backward+optimizer at local_batch, s
                           "step_fixed_s": 0.011,       # optional: part of it not shrinking with the batch, s
                           "allreduce_intra_s": 0.019,  # all-reduce unit inside one server, s
                           "allreduce_inter_s": 0.037,  # all-reduce unit across servers, s
                           "source": "..."}}}}}

Scaling model (synchronous data parallel, no overlap of compute and
communication). For ``n`` workers spread over ``k`` servers whose GPU types are
``T``::

    step(n, k, T) = max_{g in T} step_compute_s[g] + sync
    sync = 0                                         if n == 1
         = max_{g in T} allreduce_intra_s[g] * 2(n-1)/n   if k == 1
         = max_{g in T} allreduce_inter_s[g] * 2(n-1)/n   if k > 1
    throughput = n * local_batch / step      (samples/s)

At another local batch ``m`` samples per worker (the batch-aware scaling rules
of :mod:`lyra_gym.model.scaling`), the compute part is::

    compute(m) = step_fixed_s + (step_compute_s - step_fixed_s) * m / local_batch   (s)

so ``compute(local_batch) == step_compute_s`` exactly (a call without ``m`` is
the model above, bit for bit) and ``throughput = n * m / step``. The optional
per-GPU ``step_fixed_s`` (s, ``0 <= step_fixed_s <= step_compute_s``; absent =
0, compute proportional to the batch) is the part of a step that does not
shrink with the batch. The optional per-model ``max_local_batch`` (samples,
``>= 1``; absent = None, no cap) is the most that fits in GPU memory; the
profile only records it, :mod:`lyra_gym.model.scaling` cuts ``m`` to it
(:meth:`ModelProfile.step_time` takes any ``m > 0``). The optional
``min_local_batch`` (samples, ``>= 1``, at most ``max_local_batch``) is the
smallest local batch measured: a batch-adaptive scheduler (``pollux``) does not
search below it, as the Pollux artifact does not (``min_local_bsz``).

``2(n-1)/n`` is the ring all-reduce's data volume factor; the slowest GPU type
sets the pace of every worker. The shipped ``builtin_profiles.json`` is derived
by ``tools/derive_builtin_profiles.py``, which cites each number's source.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Hashable, Iterable, Mapping

from lyra_gym.errors import LyraGymError, shown
from lyra_gym.model.userfiles import read_user_file

PROFILE_FORMAT = "lyra-gym-profiles/1"
#: Most memos one ProfileSet keeps (:meth:`ProfileSet.memo`); all are dropped beyond.
MEMO_KEYS = 16


class ProfileError(LyraGymError):
    """A profile file or a profile look-up is invalid; the message names the file, model or field."""


@dataclass(frozen=True)
class GpuProfile:
    """Step timings of one model on one GPU type (seconds per step at the model's local batch)."""

    step_compute_s: float
    allreduce_intra_s: float
    allreduce_inter_s: float
    step_fixed_s: float = 0.0  # the part of step_compute_s that does not shrink with the local batch, s

    def compute_s(self, local_batch: float, profile_batch: float) -> float:
        """Compute time of one step at ``local_batch`` samples per worker: the fixed part plus the
        rest of ``step_compute_s`` (measured at ``profile_batch``) in proportion to the batch."""
        if local_batch == profile_batch:
            return self.step_compute_s
        return self.step_fixed_s + (self.step_compute_s - self.step_fixed_s) * local_batch / profile_batch


@dataclass(frozen=True)
class ModelProfile:
    """One model's throughput on each GPU type, plus its restart overhead (s)."""

    name: str
    local_batch: float
    gpus: Mapping[str, GpuProfile]
    restart_overhead_s: float
    max_local_batch: float | None = None  # most samples per worker per step (GPU memory); None: no cap
    min_local_batch: float | None = None  # fewest samples per worker per step measured; None: 1

    def gpu(self, gpu_type: str) -> GpuProfile:
        try:
            return self.gpus[gpu_type]
        except KeyError:
            raise ProfileError(
                f"model {self.name!r} has no profile for GPU type {shown(gpu_type)} (known: {sorted(self.gpus)})"
            ) from None

    def step_time(self, workers: int, servers: int, gpu_types: Iterable[str],
                  local_batch: float | None = None) -> float:
        """Seconds per synchronous step for ``workers`` spread over ``servers`` servers, at
        ``local_batch`` samples per worker (None: the profile's ``local_batch``)."""
        profiles = [self.gpu(g) for g in gpu_types]
        if local_batch is None:
            compute = max(p.step_compute_s for p in profiles)
        else:
            if not (local_batch > 0 and math.isfinite(local_batch)):
                raise ProfileError(f"model {self.name!r}: local_batch must be a finite number > 0 samples, "
                                   f"got {shown(local_batch)}")
            compute = max(p.compute_s(local_batch, self.local_batch) for p in profiles)
        if workers <= 1:
            return compute
        ring = 2.0 * (workers - 1) / workers
        if servers <= 1:
            return compute + ring * max(p.allreduce_intra_s for p in profiles)
        return compute + ring * max(p.allreduce_inter_s for p in profiles)

    def throughput(self, workers: int, servers: int, gpu_types: Iterable[str],
                   local_batch: float | None = None) -> float:
        """Samples per second of ``workers`` workers over ``servers`` servers of the given GPU types,
        at ``local_batch`` samples per worker per step (None: the profile's)."""
        if workers < 1:
            return 0.0
        batch = self.local_batch if local_batch is None else local_batch
        return workers * batch / self.step_time(workers, servers, gpu_types, local_batch)


class ProfileSet:
    """All model profiles of one file, with cached throughput look-ups."""

    def __init__(self, models: Mapping[str, ModelProfile], reference_gpu: str, source: str = "") -> None:
        if not models:
            raise ProfileError(f"{source or 'profiles'}: no models")
        self.models = dict(models)
        self.reference_gpu = reference_gpu
        self.source = source
        self._throughput = lru_cache(maxsize=65536)(self._throughput_uncached)
        self._memos: dict[Hashable, dict] = {}

    def gpu_types(self) -> frozenset[str]:
        """Every GPU type some model of this set is profiled on."""
        return frozenset(gpu for model in self.models.values() for gpu in model.gpus)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        del state["_throughput"]  # a cache of a bound method: rebuilt on unpickling
        del state["_memos"]  # results, recomputed as needed
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._throughput = lru_cache(maxsize=65536)(self._throughput_uncached)
        self._memos = {}

    def memo(self, key: Hashable) -> dict:
        """A dict for the model's own memos of pure functions of these profiles and of ``key``
        (everything else they depend on): the same dict for every equal ``key``, so results outlive
        their caller (:class:`~lyra_gym.model.scaling.ScalingModel` keeps its rates here; an env
        reset builds a new one on the same profiles). Schedulers keep their caches themselves.
        At most :data:`MEMO_KEYS` keys (all dropped beyond); not pickled."""
        memos = self._memos
        found = memos.get(key)
        if found is None:
            if len(memos) >= MEMO_KEYS:
                memos.clear()
            found = memos[key] = {}
        return found

    def model(self, key: str) -> ModelProfile:
        try:
            return self.models[key]
        except KeyError:
            raise ProfileError(f"unknown model key {shown(key)} (known: {', '.join(sorted(self.models))})") from None

    def __contains__(self, key: object) -> bool:
        return key in self.models

    def _throughput_uncached(self, model: str, workers: int, servers: int, gpu_types: frozenset[str],
                             local_batch: float | None = None) -> float:
        return self.model(model).throughput(workers, servers, gpu_types, local_batch)

    def throughput(self, model: str, workers: int, servers: int, gpu_types: frozenset[str],
                   local_batch: float | None = None) -> float:
        """Samples/s of ``model`` (cached); ``gpu_types`` is the set of types the workers sit on;
        ``local_batch`` samples per worker per step (None: the profile's)."""
        if local_batch is None:
            return self._throughput(model, workers, servers, gpu_types)
        return self._throughput(model, workers, servers, gpu_types, local_batch)

    def packed_throughput(self, model: str, workers: int, gpu_type: str, gpus_per_server: int,
                          local_batch: float | None = None) -> float:
        """Samples/s of ``workers`` packed onto as few ``gpu_type`` servers of ``gpus_per_server`` GPUs as possible."""
        servers = math.ceil(workers / gpus_per_server)
        return self.throughput(model, workers, servers, frozenset((gpu_type,)), local_batch)


def _positive(value: object, where: str) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ProfileError(f"{where}: expected a number, got {shown(value)}") from None
    if not math.isfinite(number) or number < 0:
        raise ProfileError(f"{where}: expected a finite number >= 0, got {shown(value)}")
    return number


def parse_profiles(data: Mapping, source: str = "profiles") -> ProfileSet:
    """Build a ProfileSet from the decoded JSON document; errors name ``source`` and the field."""
    if data.get("format") != PROFILE_FORMAT:
        raise ProfileError(f"{source}: field 'format' must be {PROFILE_FORMAT!r}, got {shown(data.get('format'))}")
    reference = data.get("metadata", {}).get("reference_gpu")
    if not isinstance(reference, str):
        raise ProfileError(f"{source}: field 'metadata.reference_gpu' must name a GPU type")
    models = {}
    for name, entry in (data.get("models") or {}).items():
        where = f"{source}: models.{name}"
        gpus = {}
        for gpu, timings in (entry.get("gpus") or {}).items():
            gpus[gpu] = GpuProfile(
                step_compute_s=_positive(timings.get("step_compute_s"), f"{where}.gpus.{gpu}.step_compute_s"),
                allreduce_intra_s=_positive(timings.get("allreduce_intra_s"), f"{where}.gpus.{gpu}.allreduce_intra_s"),
                allreduce_inter_s=_positive(timings.get("allreduce_inter_s"), f"{where}.gpus.{gpu}.allreduce_inter_s"),
            )
            if gpus[gpu].step_compute_s <= 0:
                raise ProfileError(f"{where}.gpus.{gpu}.step_compute_s: must be > 0")
            if "step_fixed_s" in timings:
                fixed = _positive(timings["step_fixed_s"], f"{where}.gpus.{gpu}.step_fixed_s")
                if fixed > gpus[gpu].step_compute_s:
                    raise ProfileError(f"{where}.gpus.{gpu}.step_fixed_s: {fixed} s is more than "
                                       f"step_compute_s ({gpus[gpu].step_compute_s} s)")
                gpus[gpu] = GpuProfile(gpus[gpu].step_compute_s, gpus[gpu].allreduce_intra_s,
                                       gpus[gpu].allreduce_inter_s, fixed)
        if not gpus:
            raise ProfileError(f"{where}.gpus: no GPU types")
        if reference not in gpus:
            raise ProfileError(f"{where}.gpus: no entry for the reference GPU type {reference!r}")
        batch = _positive(entry.get("local_batch"), f"{where}.local_batch")
        if batch <= 0:
            raise ProfileError(f"{where}.local_batch: must be > 0")
        restart = _positive(entry.get("restart_overhead_s", 0.0), f"{where}.restart_overhead_s")
        cap = entry.get("max_local_batch")
        if cap is not None:
            cap = _positive(cap, f"{where}.max_local_batch")
            if cap < 1:
                raise ProfileError(f"{where}.max_local_batch: must be >= 1 sample, got {shown(cap)}")
        low = entry.get("min_local_batch")
        if low is not None:
            low = _positive(low, f"{where}.min_local_batch")
            if low < 1 or (cap is not None and low > cap):
                raise ProfileError(f"{where}.min_local_batch: must be >= 1 sample and <= max_local_batch, "
                                   f"got {shown(low)}")
        models[name] = ModelProfile(name, batch, gpus, restart, cap, low)
    return ProfileSet(models, reference, source)


#: Most bytes of a profile or efficiency file (the shipped ones are under 100 KB); a regular file
#: only (issue 40: ``/dev/zero`` or a FIFO named as a profile hung the reader).
MAX_JSON_FILE_BYTES = 64 * 2**20


def read_json(path: str | os.PathLike, error: type[Exception]) -> Any:
    """A JSON file's data (json only, never pickle); ``error`` naming the file and line if invalid,
    or if ``path`` is not a regular file of at most :data:`MAX_JSON_FILE_BYTES`."""
    raw = read_user_file(path, MAX_JSON_FILE_BYTES, "JSON file", error=error)
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise error(f"{path}: not UTF-8 text (byte {err.start})") from None
    except json.JSONDecodeError as err:
        raise error(f"{path}: not valid JSON (line {err.lineno}: {err.msg})") from None
    except RecursionError:
        raise error(f"{path}: not valid JSON (nested too deeply)") from None


def load_profiles(path: str | os.PathLike) -> ProfileSet:
    """Load a profile JSON file (format above)."""
    return parse_profiles(read_json(path, ProfileError), source=str(path))


def builtin_profiles() -> ProfileSet:
    """The small profile shipped with the package (lyra_gym/data/builtin_profiles.json)."""
    text = resources.files("lyra_gym").joinpath("data/builtin_profiles.json").read_text(encoding="utf-8")
    return parse_profiles(json.loads(text), source="builtin_profiles.json")
