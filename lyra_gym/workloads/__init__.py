"""Workloads: the trace CSV format, synthetic presets and their generator, and readers of real
cluster traces (:mod:`~lyra_gym.workloads.realtraces`, one module per format). Builds on
:mod:`lyra_gym.model`.
"""
