"""Lyra-gym: co-simulator of training and inference GPU clusters with capacity loaning and elastic jobs."""

from lyra_gym.envs import ENV_IDS  # noqa: E402,F401  (registers the LyraGym/ environments)
