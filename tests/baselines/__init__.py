"""Tests of lyra_baselines: the heuristic schedulers, each against hand-computed plans."""
