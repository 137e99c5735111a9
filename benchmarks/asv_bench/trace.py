"""Trace generation: ``generate_trace('bench-15d', 0)`` (50,000 jobs) and the production-scale
``lyra-15d`` x10 (500,000 jobs over 15 days; its peak memory too)."""

from __future__ import annotations

from ._common import generate_trace, lyra_15d_preset


class GenerateBench15d:
    """``generate_trace('bench-15d', 0)``."""

    preset = "bench-15d"  # the smoke test swaps in a small preset

    def time_generate(self):
        generate_trace(self.preset, 0)


class GenerateLyra15dX10:
    """``lyra-15d`` at x10: 500,000 jobs, 15 days (``generate_trace('lyra-15d-x10', 0)``)."""

    days = 15.0  # the smoke test sets a cut
    timeout = 300
    warmup_time = 0.0
    repeat = (1, 3, 20.0)

    def setup(self):
        self.preset = lyra_15d_preset(10, self.days)  # at 15 days: the same jobs as the named preset

    def time_generate(self):
        generate_trace(self.preset, 0)

    def peakmem_generate(self):
        generate_trace(self.preset, 0)
