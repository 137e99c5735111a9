"""Tests of lyra_gym.workloads: trace files, generators, presets, real-trace readers."""
