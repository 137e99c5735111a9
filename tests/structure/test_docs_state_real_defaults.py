"""Every text that states a default states the real one (``allow_mixed_gpu_types``: the README, the
docs and the docstrings against ``SimConfig()``)."""

from __future__ import annotations

import re
from pathlib import Path

from lyra_gym.model.config import SimConfig

ROOT = Path(__file__).resolve().parents[2]


_CLAIM = re.compile(r"allow_mixed_gpu_types`*(?::\s*(true|false))?`*\s*\(default(?:\s+(true|false))?\)")


def test_every_doc_states_the_real_default_of_allow_mixed_gpu_types():
    truth = str(SimConfig().allow_mixed_gpu_types).lower()
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for package in ("lyra_gym", "baselines", "agents"):
        files += sorted((ROOT / package).rglob("*.py"))
    claims = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in _CLAIM.finditer(line):
                claims.append((f"{path.relative_to(ROOT)}:{number}", match.group(1) or match.group(2)))
    assert len(claims) >= 2, claims  # the pattern still finds the docs
    wrong = [where for where, said in claims if said != truth]
    assert not wrong, f"these say the default of allow_mixed_gpu_types is not {truth}: {wrong}"
