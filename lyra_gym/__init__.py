"""Lyra-gym: co-simulator of training and inference GPU clusters with capacity loaning and elastic jobs."""
