"""Heuristic schedulers for lyra-gym, found by name through the registry."""
