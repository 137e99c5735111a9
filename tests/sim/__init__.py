"""Tests of lyra_gym.sim: the engine, plans and their validation, the views, topology, overheads."""
