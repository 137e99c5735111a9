"""Test-wide settings.

Hypothesis runs derandomized by default, so the suite (and CI) draws the same examples on
every run: a green run stays green and a red one reproduces. Set ``HYPOTHESIS_PROFILE=explore``
to draw fresh random examples when hunting for new failures.
"""

import os

from hypothesis import settings

settings.register_profile("deterministic", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))
