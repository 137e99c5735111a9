"""Tests of lyra_agents and train.py: training, evaluation, the benchmark, model files."""
