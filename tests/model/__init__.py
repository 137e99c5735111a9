"""Tests of lyra_gym.model: job records, config, profiles, scaling, efficiency, demand, knowledge."""
