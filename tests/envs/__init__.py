"""Tests of lyra_gym.envs: the Gymnasium environments, observations, rewards, forks."""
