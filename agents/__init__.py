"""Reinforcement-learning side of lyra-gym (agents, configs, callbacks)."""
