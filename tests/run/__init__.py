"""Tests of lyra_gym.run: one simulation, its metrics and results (golden digests included)."""
