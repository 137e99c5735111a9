"""Statistical efficiency of large batches, from measured gradient noise scales.

A synchronous data-parallel job that trains with a total batch of ``M``
samples per step gets less out of each sample than at a smaller batch: the
gradient's noise is averaged away faster than it needs to be. Pollux (Qiao et
al., OSDI 2021) measures this with the gradient noise scale ``phi``
(McCandlish et al. 2018) and defines the efficiency of batch ``M`` relative to
the initial batch ``M0`` as::

    E(M) = (phi + M0) / (phi + M)

``E(M0) = 1``; ``E`` falls as ``M`` grows and rises with ``phi``; a sample at
batch ``M`` is worth ``E(M)`` samples at ``M0``. **Goodput** = throughput
(samples/s) x ``E`` = progress per second in ``M0``-samples. ``phi`` grows
during training (late gradients are small next to their noise), so large
batches pay off later in a run.

Data file format (JSON, ``"format": "lyra-gym-efficiency/1"``)::

    {"format": "lyra-gym-efficiency/1", "metadata": {...},
     "models": {"resnet18": {
         "init_batch": 256,                  # M0, samples per step
         "progress": [0.005, ..., 0.995],    # fractions of the run, strictly increasing, in [0, 1]
         "noise_scale": [205.3, ..., 73360], # phi at those points, samples
         "source": {...}}}}                  # citation; other fields are informational

The shipped ``data/efficiency.json`` is written by
``tools/derive_efficiency.py`` from the Pollux artifact's validation traces
(petuum/adaptdl, ``simulator/traces/<model>/validation-<batch>.csv``,
Apache-2.0): ``phi = M0 * grad_var / grad_sqr`` per epoch, the formula of its
``simulator/goodput.py`` (``GoodputFunction.efficiency``). Models: ``bert``,
``deepspeech2``, ``ncf``, ``yolov3``, ``resnet18`` (the artifact's
``cifar10``) and ``resnet50`` (its ``imagenet``); see the tool for the
assumptions. Batch sizes are in the artifact's samples (images, sequences,
utterances, user-item pairs).

Between points ``phi`` is interpolated linearly in progress; before the
first point and after the last it is held constant (the points sit at epoch
midpoints, so ``progress = 0`` and ``1`` fall just outside them).

The artifact's simulator also interpolates the gradient statistics between
runs made at different batch sizes; here ``phi`` depends on progress only,
taken from the run at ``M0``.
"""

from __future__ import annotations

import bisect
import json
import math
import numbers
import os
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Mapping, Sequence

from lyra_gym.profiles import read_json

EFFICIENCY_FORMAT = "lyra-gym-efficiency/1"


class EfficiencyError(ValueError):
    """An efficiency file, model key or argument is invalid; the message names it."""


def _finite(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise EfficiencyError(f"{name}: expected a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise EfficiencyError(f"{name}: expected a finite number, got {value!r}")
    return number


def _progress(value: object) -> float:
    p = _finite(value, "progress")
    if not 0.0 <= p <= 1.0:
        raise EfficiencyError(f"progress: must be in [0, 1], got {value!r}")
    return p


def _batch(value: object, name: str = "batch") -> float:
    b = _finite(value, name)
    if b < 1:
        raise EfficiencyError(f"{name}: must be >= 1 sample, got {value!r}")
    return b


@dataclass(frozen=True)
class NoiseScaleCurve:
    """One model's initial batch ``M0`` and its noise scale at points of training progress."""

    name: str
    init_batch: float
    progress: tuple[float, ...]
    noise_scale: tuple[float, ...]

    def noise_scale_at(self, progress: float) -> float:
        """``phi`` (samples) at ``progress`` in [0, 1]: linear between points, constant beyond the ends."""
        p = _progress(progress)
        xs, ys = self.progress, self.noise_scale
        if p <= xs[0]:
            return ys[0]
        if p >= xs[-1]:
            return ys[-1]
        i = bisect.bisect_right(xs, p)  # xs[i-1] <= p < xs[i]
        w = (p - xs[i - 1]) / (xs[i] - xs[i - 1])
        return ys[i - 1] + w * (ys[i] - ys[i - 1])

    def efficiency(self, batch: float, progress: float, reference_batch: float | None = None) -> float:
        """``(phi + M0) / (phi + batch)`` at ``progress``; ``reference_batch`` replaces ``M0`` if given."""
        m = _batch(batch)
        m0 = self.init_batch if reference_batch is None else _batch(reference_batch, "reference_batch")
        phi = self.noise_scale_at(progress)
        return (phi + m0) / (phi + m)


class EfficiencyTable:
    """The noise-scale curves of one file, by model key."""

    def __init__(self, models: Mapping[str, NoiseScaleCurve], source: str = "efficiency") -> None:
        if not models:
            raise EfficiencyError(f"{source}: no models")
        self.models = dict(models)
        self.source = source

    def model(self, key: str) -> NoiseScaleCurve:
        try:
            return self.models[key]
        except (KeyError, TypeError):
            raise EfficiencyError(
                f"model: unknown model key {key!r} in {self.source} (known: {', '.join(sorted(self.models))})"
            ) from None

    def __contains__(self, key: object) -> bool:
        return key in self.models

    def noise_scale(self, model: str, progress: float) -> float:
        """Gradient noise scale ``phi`` of ``model`` (samples) at ``progress`` in [0, 1]."""
        return self.model(model).noise_scale_at(progress)

    def efficiency(self, model: str, batch: float, progress: float, reference_batch: float | None = None) -> float:
        """Statistical efficiency of total batch ``batch`` (samples, >= 1) of ``model`` at ``progress``,
        relative to the model's ``M0`` (or to ``reference_batch``)."""
        return self.model(model).efficiency(batch, progress, reference_batch)

    def goodput(self, throughput: float, model: str, batch: float, progress: float,
                reference_batch: float | None = None) -> float:
        """``throughput`` (samples/s, >= 0) x efficiency: progress per second in reference-batch samples."""
        rate = _finite(throughput, "throughput")
        if rate < 0:
            raise EfficiencyError(f"throughput: must be >= 0, got {throughput!r}")
        return rate * self.efficiency(model, batch, progress, reference_batch)


def _points(value: object, where: str) -> Sequence:
    if not isinstance(value, list) or not value:
        raise EfficiencyError(f"{where}: expected a non-empty list")
    return value


def parse_efficiency(data: Mapping, source: str = "efficiency") -> EfficiencyTable:
    """Build an EfficiencyTable from the decoded JSON document; errors name ``source`` and the field."""
    if not isinstance(data, Mapping) or data.get("format") != EFFICIENCY_FORMAT:
        got = data.get("format") if isinstance(data, Mapping) else data
        raise EfficiencyError(f"{source}: field 'format' must be {EFFICIENCY_FORMAT!r}, got {got!r}")
    entries = data.get("models")
    if not isinstance(entries, Mapping):
        raise EfficiencyError(f"{source}: field 'models' must be an object")
    models = {}
    for name, entry in entries.items():
        where = f"{source}: models.{name}"
        if not isinstance(entry, Mapping):
            raise EfficiencyError(f"{where}: expected an object")
        init_batch = _finite(entry.get("init_batch"), f"{where}.init_batch")
        if init_batch < 1:
            raise EfficiencyError(f"{where}.init_batch: must be >= 1, got {init_batch!r}")
        xs = [_finite(x, f"{where}.progress[{i}]")
              for i, x in enumerate(_points(entry.get("progress"), f"{where}.progress"))]
        ys = [_finite(y, f"{where}.noise_scale[{i}]")
              for i, y in enumerate(_points(entry.get("noise_scale"), f"{where}.noise_scale"))]
        if len(xs) != len(ys):
            raise EfficiencyError(f"{where}: progress has {len(xs)} points, noise_scale {len(ys)}")
        if any(not 0.0 <= x <= 1.0 for x in xs) or any(b <= a for a, b in zip(xs, xs[1:])):
            raise EfficiencyError(f"{where}.progress: must increase strictly within [0, 1], got {xs}")
        if any(y < 0 for y in ys):
            raise EfficiencyError(f"{where}.noise_scale: must be >= 0, got {ys}")
        models[name] = NoiseScaleCurve(name, init_batch, tuple(xs), tuple(ys))
    return EfficiencyTable(models, source)


def load_efficiency(path: str | os.PathLike) -> EfficiencyTable:
    """Load an efficiency JSON file (format above)."""
    return parse_efficiency(read_json(path, EfficiencyError), source=str(path))


@lru_cache(maxsize=1)
def builtin_efficiency() -> EfficiencyTable:
    """The table shipped with the package (lyra_gym/data/efficiency.json); loaded once."""
    text = resources.files("lyra_gym").joinpath("data/efficiency.json").read_text(encoding="utf-8")
    return parse_efficiency(json.loads(text), source="efficiency.json")


def noise_scale(model: str, progress: float, table: EfficiencyTable | None = None) -> float:
    """Gradient noise scale ``phi`` (samples) of ``model`` at ``progress`` in [0, 1] (shipped table by default)."""
    return (table or builtin_efficiency()).noise_scale(model, progress)


def efficiency(model: str, batch: float, progress: float, reference_batch: float | None = None,
               table: EfficiencyTable | None = None) -> float:
    """``(phi + M0) / (phi + batch)`` for ``model`` at ``progress``: 1 at ``M0``, below 1 above it.

    :param model: model key (``bert``, ``deepspeech2``, ``ncf``, ``resnet18``, ``resnet50``, ``yolov3``).
    :param batch: total batch per step, samples (>= 1).
    :param progress: fraction of the job's training done, in [0, 1].
    :param reference_batch: batch to compare with instead of the measured ``M0`` (e.g. a job's requested one).
    :param table: an EfficiencyTable; default the shipped one.
    """
    return (table or builtin_efficiency()).efficiency(model, batch, progress, reference_batch)


def goodput(throughput: float, model: str, batch: float, progress: float,
            reference_batch: float | None = None, table: EfficiencyTable | None = None) -> float:
    """``throughput`` (samples/s) x :func:`efficiency`: samples/s worth of progress at the reference batch."""
    return (table or builtin_efficiency()).goodput(throughput, model, batch, progress, reference_batch)
