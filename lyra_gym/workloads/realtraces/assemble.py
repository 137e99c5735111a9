"""Turning raw records into jobs: seeded model and elastic draws, submit times from 0 (see
:mod:`lyra_gym.workloads.realtraces` for the mapping)."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping

import numpy as np

from lyra_gym.model.jobspec import JobSpec
from lyra_gym.workloads.realtraces.common import ConvertedJobs, RawJob, SkipCounts

#: Elastic share used when none is given (same assumption as the synthetic presets).
DEFAULT_ELASTIC_SHARE = 0.3


def _known_models(known_models: Collection[str] | None) -> list[str]:
    if known_models is not None:
        keys = list(dict.fromkeys(known_models))
    else:
        from lyra_gym.model.profiles import builtin_profiles

        keys = list(builtin_profiles().models)
    if not keys:
        raise ValueError("known_models: no model keys")
    return keys


def default_model_mix(known_models: Collection[str] | None = None) -> dict[str, float]:
    """The synthetic presets' model mix restricted to ``known_models`` (default: the built-in
    profile's keys) and renormalised; uniform over them if the presets' keys are all absent."""
    from lyra_gym.workloads.tracegen import PRESETS

    keys = _known_models(known_models)
    base = dict(PRESETS["small-1d"].model_mix)
    mix = {k: base[k] for k in keys if k in base}
    if not mix:
        mix = {k: 1.0 for k in keys}
    total = sum(mix.values())
    return {k: v / total for k, v in mix.items()}


def _check_mix(mix: Mapping[str, float], keys: list[str]) -> dict[str, float]:
    clean = {}
    for key, p in mix.items():
        if key not in keys:
            raise ValueError(f"model_mix: unknown model key {key!r} (known: {', '.join(sorted(keys))})")
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or p < 0:
            raise ValueError(f"model_mix[{key!r}]: must be a finite number >= 0, got {p!r}")
        clean[key] = float(p)
    if sum(clean.values()) <= 0:
        raise ValueError("model_mix: the probabilities must not all be 0")
    return clean


def _assemble(raws: list[RawJob], seed: int, model_mix: Mapping[str, float] | None, elastic_share: float,
              known_models: Collection[str] | None) -> list[JobSpec]:
    if not 0.0 <= elastic_share <= 1.0:
        raise ValueError(f"elastic_share: must be in [0, 1], got {elastic_share!r}")
    keys = _known_models(known_models)
    mix = _check_mix(model_mix if model_mix is not None else default_model_mix(keys), keys)
    raws = sorted(raws, key=lambda r: r.submit)  # stable: ties keep file order
    n = len(raws)
    rng = np.random.default_rng(seed)
    names = list(mix)
    p = np.array([mix[k] for k in names], dtype=float)
    models = rng.choice(len(names), size=n, p=p / p.sum()) if n else np.zeros(0, dtype=int)
    elastic = rng.random(n) < elastic_share
    t0 = raws[0].submit if raws else 0.0
    jobs = []
    for r, m, e in zip(raws, models.tolist(), elastic.tolist()):
        g = r.gpus
        lo, hi = (max(1, g // 2), 2 * g) if e else (g, g)
        jobs.append(JobSpec(r.job_id, r.submit - t0, g, r.duration, names[m], bool(e), lo, hi))
    return jobs


def convert_records(fmt: str, raw_fn, source: str, seed: int, model_mix, elastic_share: float,
                    known_models) -> ConvertedJobs:
    """The jobs of one input: ``raw_fn(skips)`` reads ``(raw jobs, records read)``, counting skips;
    each format's loader calls this with its own reader."""
    skips = SkipCounts()
    raws, records = raw_fn(skips)
    jobs = _assemble(raws, seed, model_mix, elastic_share, known_models)
    return ConvertedJobs(jobs, source, fmt, records, skips.counts)
