"""Memoised profile look-ups the engine makes at every change of an allocation."""

from __future__ import annotations

from lyra_gym.model.profiles import ProfileSet


class RateTables:
    """Per-model speeds and reference throughputs of ``profiles`` against ``reference_gpu``
    servers of ``reference_gpus_per_server`` GPUs, each computed once."""

    def __init__(self, profiles: ProfileSet, reference_gpu: str, reference_gpus_per_server: int) -> None:
        self.profiles = profiles
        self.reference_gpu = reference_gpu
        self.reference_gpus_per_server = reference_gpus_per_server
        self.speeds: dict[tuple[str, frozenset[str]], float] = {}  # (model, GPU types) -> speed
        self.reference_rates: dict[tuple[str, int], float] = {}  # (model, workers) -> samples/s

    def reference_throughput(self, model: str, workers: int) -> float:
        """Samples/s of ``workers`` reference GPUs packed onto reference servers."""
        key = (model, workers)
        rate = self.reference_rates.get(key)
        if rate is None:
            rate = self.reference_rates[key] = self.profiles.packed_throughput(
                model, workers, self.reference_gpu, self.reference_gpus_per_server)
        return rate

    def speed(self, model: str, gpu_types: frozenset[str]) -> float:
        """Reference-GPU-s of useful work per GPU-s of ``model`` on workers of ``gpu_types``:
        single-GPU throughput on the slowest of the types / on the reference type
        (synchronous data parallel: the slowest type sets every worker's pace)."""
        key = (model, gpu_types)
        speed = self.speeds.get(key)
        if speed is None:
            profiles = self.profiles
            ref = profiles.throughput(model, 1, 1, frozenset((self.reference_gpu,)))
            speed = min(profiles.throughput(model, 1, 1, frozenset((g,))) for g in sorted(gpu_types)) / ref
            self.speeds[key] = speed
        return speed
