"""Test-wide settings.

Two tiers. The default run (``python -m pytest``, a few CPU-minutes) holds every guarantee on a
sample of its cases; ``python -m pytest -m slow`` runs the rest (CI runs both):

- ``@pytest.mark.slow``: a long end-to-end check (a subprocess, a training run, a whole benchmark)
  whose guarantee a faster default test also holds in part.
- ``@pytest.mark.sample(k)`` on a parametrized test: only ``k`` of its cases run by default, spread
  evenly over its list (the first always among them); the others are marked slow.

Hypothesis runs derandomized by default, so the suite (and CI) draws the same examples on
every run: a green run stays green and a red one reproduces. Set ``HYPOTHESIS_PROFILE=explore``
to draw fresh random examples when hunting for new failures.
"""

import os
from collections import defaultdict

import pytest
from hypothesis import settings

settings.register_profile("deterministic", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


def spread(n: int, k: int) -> set[int]:
    """``k`` of the indices ``0..n-1``, evenly spread, ``0`` first (all of them when ``n <= k``)."""
    return set(range(n)) if n <= k else {(j * n) // k for j in range(k)}


@pytest.hookimpl(tryfirst=True)  # before the mark expression deselects by ``slow``
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks slow every case of a ``sample(k)`` test outside its ``k`` spread ones."""
    groups: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        if item.get_closest_marker("sample") is not None:
            groups[item.nodeid.split("[")[0]].append(item)
    for cases in groups.values():
        marker = cases[0].get_closest_marker("sample")
        k = marker.args[0] if marker.args else 1
        keep = spread(len(cases), k)
        for i, item in enumerate(cases):
            if i not in keep:
                item.add_marker(pytest.mark.slow)
