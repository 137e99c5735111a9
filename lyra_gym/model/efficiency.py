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

Data files come in two formats. ``"lyra-gym-efficiency/1"``: one curve of ``phi``
over progress per model (``progress``, ``noise_scale``), taken from one run; ``phi`` is
then the same at every batch. ``"lyra-gym-efficiency/2"`` (the shipped file) keeps the
measured gradient statistics of every run, at every batch that was measured::

    {"format": "lyra-gym-efficiency/2", "metadata": {...},
     "models": {"resnet18": {
         "init_batch": 128,                 # M0 = the smallest measured batch
         "batches": [128, 256, ..., 4096],  # global batch of each measured run, increasing
         "epoch_end": [0.01, ..., 1.0],     # fraction of the run at which each epoch ends
         "grad_sqr": [[...], ...],          # per batch, per epoch: squared gradient norm
         "grad_var": [[...], ...],          # per batch, per epoch: gradient variance
         "source": {...}}}}

**Interpolation** (the Pollux artifact's ``Application.get_grad_stats(batch_size,
epoch)``, ``simulator/applications.py``): at progress ``p`` the epoch is the first whose
``epoch_end`` exceeds ``p`` (the last epoch at ``p = 1``); at global batch ``M``,
``grad_sqr`` and ``grad_var`` are each interpolated linearly in ``M`` between the two
measured runs around it (``numpy.interp``); outside the measured batches the nearest run's
values are used (**fallback**: held at the end runs). ``phi(p, M) = M0 * grad_var /
grad_sqr``; where the interpolated ``grad_sqr`` is 0 (deepspeech2 rows measured as 0)
``phi`` is infinite and ``E = 1``, as the artifact's gain ``(var + sqr) / (var / scale +
sqr)`` gives. Large-batch runs measure a larger ``phi`` at the same progress (imagenet
mid-run: about 11,400 at 200 against 36,300 at 6,400), so ``E`` at a large batch is read
from the large-batch runs, not extrapolated from the ``M0`` run. A model in a format-1 file
has no batch dependence (``phi`` of its one run at every batch).

The shipped ``data/efficiency.json`` is written by ``tools/derive_efficiency.py`` from
every ``validation-<batch>.csv`` of the Pollux artifact (petuum/adaptdl,
``simulator/traces/<model>/``, Apache-2.0; all copied in ``tests/fixtures/adaptdl_validation``).
Models: ``bert``, ``deepspeech2``, ``ncf``, ``yolov3``, ``resnet18`` (the artifact's
``cifar10``) and ``resnet50`` (its ``imagenet``). ``M0`` is each application's initial batch
as the artifact's (cifar10 128, deepspeech2 20, bert 12, imagenet 200, ncf 256, yolov3 8).
Batch sizes are in the artifact's samples (images, sequences, utterances, user-item pairs).

For a format-1 curve, ``phi`` is interpolated linearly in progress between points; before
the first point and after the last it is held constant.
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

from lyra_gym.errors import LyraGymError, shown
from lyra_gym.model.profiles import read_json

EFFICIENCY_FORMAT = "lyra-gym-efficiency/1"
#: The format with every measured batch (gradient statistics per batch and epoch).
EFFICIENCY_FORMAT_2 = "lyra-gym-efficiency/2"


class EfficiencyError(LyraGymError):
    """An efficiency file, model key or argument is invalid; the message names it."""


def _finite(value: object, name: str) -> float:
    if type(value) is float and -math.inf < value < math.inf:  # the common case, before the ABC check
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise EfficiencyError(f"{name}: expected a number, got {shown(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise EfficiencyError(f"{name}: expected a finite number, got {shown(value)}")
    return number


def _progress(value: object) -> float:
    p = _finite(value, "progress")
    if not 0.0 <= p <= 1.0:
        raise EfficiencyError(f"progress: must be in [0, 1], got {shown(value)}")
    return p


def _batch(value: object, name: str = "batch") -> float:
    b = _finite(value, name)
    if b < 1:
        raise EfficiencyError(f"{name}: must be >= 1 sample, got {shown(value)}")
    return b


@dataclass(frozen=True)
class NoiseScaleCurve:
    """One model's initial batch ``M0`` and its noise scale over training progress (and, from a
    format-2 file, over the batch: ``batches`` / ``epoch_end`` / ``grad_sqr`` / ``grad_var``)."""

    name: str
    init_batch: float
    progress: tuple[float, ...]
    noise_scale: tuple[float, ...]
    batches: tuple[float, ...] = ()
    epoch_end: tuple[float, ...] = ()
    grad_sqr: tuple[tuple[float, ...], ...] = ()
    grad_var: tuple[tuple[float, ...], ...] = ()

    @property
    def max_batch(self) -> float | None:
        """The largest measured batch (the artifact's ``max_batch_size``); None for a format-1 curve."""
        return self.batches[-1] if self.batches else None

    def epoch_at(self, progress: float) -> int:
        """The epoch (row) ``progress`` falls in: the first whose end exceeds it (the last at 1)."""
        return min(bisect.bisect_right(self.epoch_end, progress), len(self.epoch_end) - 1)

    def grad_stats(self, batch: float, progress: float) -> tuple[float, float]:
        """``(grad_sqr, grad_var)`` at global batch ``batch`` and ``progress`` (format 2 only):
        the epoch's row, linear in the batch between measured runs, held at the end runs."""
        e = self.epoch_at(_progress(progress))
        xs = self.batches
        m = _finite(batch, "batch")  # any batch: below the smallest run the smallest run's values hold
        if m <= xs[0]:
            return self.grad_sqr[0][e], self.grad_var[0][e]
        if m >= xs[-1]:
            return self.grad_sqr[-1][e], self.grad_var[-1][e]
        i = bisect.bisect_right(xs, m)  # xs[i-1] <= m < xs[i]
        w = (m - xs[i - 1]) / (xs[i] - xs[i - 1])
        sqr = self.grad_sqr[i - 1][e] + w * (self.grad_sqr[i][e] - self.grad_sqr[i - 1][e])
        var = self.grad_var[i - 1][e] + w * (self.grad_var[i][e] - self.grad_var[i - 1][e])
        return sqr, var

    def part_efficiency(self, batch: float, lo: float, hi: float) -> float:
        """``E`` over progress ``[lo, hi]`` (``lo < hi``) at global batch ``batch`` (format 2, the
        artifact's units): the work-weighted harmonic mean over the epochs the range overlaps of
        ``(M0 phi' + M0) / (M0 phi' + batch)`` with ``phi' = grad_var / grad_sqr`` at each epoch's
        middle and at ``batch`` (1 where ``grad_sqr`` is 0), so ``(hi - lo) / E`` is the time to
        cross the range at unit speed. The same sums as :meth:`grad_stats` epoch by epoch, with the
        batch's bracket of measured runs found once."""
        m = _finite(batch, "batch")
        lo, hi = _progress(lo), _progress(hi)
        xs, sqrs, vars_ = self.batches, self.grad_sqr, self.grad_var
        if m <= xs[0]:
            below = above = 0
            w = None
        elif m >= xs[-1]:
            below = above = len(xs) - 1
            w = None
        else:
            above = bisect.bisect_right(xs, m)  # xs[above-1] <= m < xs[above]
            below = above - 1
            w = (m - xs[below]) / (xs[above] - xs[below])
        ends, m0 = self.epoch_end, self.init_batch
        sqr_lo, sqr_hi, var_lo, var_hi = sqrs[below], sqrs[above], vars_[below], vars_[above]
        e = self.epoch_at(lo)
        start = ends[e - 1] if e > 0 else 0.0
        time = 0.0
        while start < hi and e < len(ends):
            end = ends[e]
            width = min(end, hi) - max(start, lo)
            if width > 0:
                row = self.epoch_at((start + end) / 2)  # e itself unless two ends are adjacent floats
                if w is None:
                    sqr, var = sqr_lo[row], var_lo[row]
                else:
                    sqr = sqr_lo[row] + w * (sqr_hi[row] - sqr_lo[row])
                    var = var_lo[row] + w * (var_hi[row] - var_lo[row])
                eff = 1.0 if sqr <= 0 else (m0 * var / sqr + m0) / (m0 * var / sqr + m)
                time += width / eff
            start, e = end, e + 1
        return (hi - lo) / time

    def noise_scale_at(self, progress: float, batch: float | None = None) -> float:
        """``phi`` (samples) at ``progress`` in [0, 1] and global batch ``batch`` (default ``M0``;
        ignored by a format-1 curve); ``math.inf`` where the gradient's squared norm is 0."""
        p = _progress(progress)
        if self.batches:
            sqr, var = self.grad_stats(self.init_batch if batch is None else batch, p)
            return math.inf if sqr <= 0 else self.init_batch * var / sqr
        xs, ys = self.progress, self.noise_scale
        if p <= xs[0]:
            return ys[0]
        if p >= xs[-1]:
            return ys[-1]
        i = bisect.bisect_right(xs, p)  # xs[i-1] <= p < xs[i]
        w = (p - xs[i - 1]) / (xs[i] - xs[i - 1])
        return ys[i - 1] + w * (ys[i] - ys[i - 1])

    def efficiency(self, batch: float, progress: float, reference_batch: float | None = None) -> float:
        """``(phi + M0) / (phi + batch)`` at ``progress`` with ``phi`` at ``batch``;
        ``reference_batch`` replaces ``M0`` if given; 1 where ``phi`` is infinite."""
        m = _batch(batch)
        m0 = self.init_batch if reference_batch is None else _batch(reference_batch, "reference_batch")
        phi = self.noise_scale_at(progress, m)
        return ratio(phi, m0, m)


def ratio(phi: float, reference: float, batch: float) -> float:
    """``(phi + reference) / (phi + batch)``, 1 when ``phi`` is infinite (gradient norm 0)."""
    if math.isinf(phi):
        return 1.0
    return (phi + reference) / (phi + batch)


class EfficiencyTable:
    """The noise-scale curves of one file, by model key."""

    def __init__(self, models: Mapping[str, NoiseScaleCurve], source: str = "efficiency") -> None:
        if not models:
            raise EfficiencyError(f"{source}: no models")
        self.models = dict(models)
        self.source = source

    @property
    def content_key(self) -> tuple:
        """The curves by model, hashable: equal for two tables of the same content (what a memo of
        results computed from the table is keyed on, so a table reloaded from its file shares it)."""
        return tuple(sorted(self.models.items()))

    def model(self, key: str) -> NoiseScaleCurve:
        try:
            return self.models[key]
        except (KeyError, TypeError):
            raise EfficiencyError(
                f"model: unknown model key {shown(key)} in {self.source} (known: {', '.join(sorted(self.models))})"
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
            raise EfficiencyError(f"throughput: must be >= 0, got {shown(throughput)}")
        return rate * self.efficiency(model, batch, progress, reference_batch)


def _points(value: object, where: str) -> Sequence:
    if not isinstance(value, list) or not value:
        raise EfficiencyError(f"{where}: expected a non-empty list")
    return value


def parse_efficiency(data: Mapping, source: str = "efficiency") -> EfficiencyTable:
    """Build an EfficiencyTable from the decoded JSON document; errors name ``source`` and the field."""
    if not isinstance(data, Mapping) or data.get("format") not in (EFFICIENCY_FORMAT, EFFICIENCY_FORMAT_2):
        got = data.get("format") if isinstance(data, Mapping) else data
        raise EfficiencyError(f"{source}: field 'format' must be {EFFICIENCY_FORMAT!r} or "
                              f"{EFFICIENCY_FORMAT_2!r}, got {shown(got)}")
    if data["format"] == EFFICIENCY_FORMAT_2:
        return _parse_v2(data, source)
    models = {}
    for name, where, entry in _model_entries(data, source):
        init_batch = _finite(entry.get("init_batch"), f"{where}.init_batch")
        if init_batch < 1:
            raise EfficiencyError(f"{where}.init_batch: must be >= 1, got {shown(init_batch)}")
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


def _model_entries(data: Mapping, source: str):
    """(name, where for errors, entry) of each model of a document's ``models`` object."""
    entries = data.get("models")
    if not isinstance(entries, Mapping):
        raise EfficiencyError(f"{source}: field 'models' must be an object")
    for name, entry in entries.items():
        where = f"{source}: models.{name}"
        if not isinstance(entry, Mapping):
            raise EfficiencyError(f"{where}: expected an object")
        yield name, where, entry


def _parse_v2(data: Mapping, source: str) -> EfficiencyTable:
    models = {}
    for name, where, entry in _model_entries(data, source):
        batches = [_finite(b, f"{where}.batches[{i}]")
                   for i, b in enumerate(_points(entry.get("batches"), f"{where}.batches"))]
        if batches[0] < 1 or any(b <= a for a, b in zip(batches, batches[1:])):
            raise EfficiencyError(f"{where}.batches: must be >= 1 and increase strictly, got {batches}")
        init_batch = _finite(entry.get("init_batch"), f"{where}.init_batch")
        if init_batch != batches[0]:
            raise EfficiencyError(f"{where}.init_batch: must be the smallest batch {batches[0]!r}, got {shown(init_batch)}")
        ends = [_finite(x, f"{where}.epoch_end[{i}]")
                for i, x in enumerate(_points(entry.get("epoch_end"), f"{where}.epoch_end"))]
        if any(not 0.0 < x <= 1.0 for x in ends) or any(b <= a for a, b in zip(ends, ends[1:])) or ends[-1] != 1.0:
            raise EfficiencyError(f"{where}.epoch_end: must increase strictly within (0, 1] and end at 1, got {ends}")
        stats = {}
        for col, low in (("grad_sqr", 0.0), ("grad_var", 0.0)):
            rows = _points(entry.get(col), f"{where}.{col}")
            if len(rows) != len(batches):
                raise EfficiencyError(f"{where}.{col}: {len(rows)} rows, batches has {len(batches)}")
            table = []
            for i, row in enumerate(rows):
                values = [_finite(v, f"{where}.{col}[{i}][{e}]") for e, v in enumerate(_points(row, f"{where}.{col}[{i}]"))]
                if len(values) != len(ends):
                    raise EfficiencyError(f"{where}.{col}[{i}]: {len(values)} epochs, epoch_end has {len(ends)}")
                if any(v < low for v in values):
                    raise EfficiencyError(f"{where}.{col}[{i}]: must be >= 0")
                table.append(tuple(values))
            stats[col] = tuple(table)
        # the M0 run's phi at each epoch's midpoint, for readers of the format-1 fields
        mids = tuple((a + b) / 2 for a, b in zip((0.0, *ends[:-1]), ends))
        phis = tuple(math.inf if q <= 0 else init_batch * v / q for q, v in zip(stats["grad_sqr"][0], stats["grad_var"][0]))
        models[name] = NoiseScaleCurve(name, init_batch, mids, phis, tuple(batches), tuple(ends),
                                       stats["grad_sqr"], stats["grad_var"])
    if not models:
        raise EfficiencyError(f"{source}: no models")
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
