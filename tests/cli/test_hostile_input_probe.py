"""The hostile-input probe (tools/probe_inputs.py, docs/reliability.md) finds nothing on this code:
every case is a one-line refusal (or a valid input accepted), never a traceback, a silent
acceptance, a hang or a changed input. The default suite runs a sample of every family (the
issue-40 reproducers among them); the whole probe (~1,000 cases) is marked slow."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import probe_inputs

BAD = ("traceback", "silent", "hang", "data lost")


def _cases(family: str, every: int) -> list[probe_inputs.Case]:
    cases = list(probe_inputs.FAMILIES[family](random.Random(f"0-{family}")))
    return cases[::every]


@pytest.mark.parametrize("family, every", [("config", 12), ("trace", 6), ("policy-param", 40), ("sweep", 1),
                                           ("output", 1), ("argv", 25)])
def test_a_sample_of_each_probe_family_is_refused_clearly(family, every):
    found = {case.name: probe_inputs._classify_random(case, *probe_inputs.run_case(case, timeout=60))
             for case in _cases(family, every)}
    assert {name: outcome for name, outcome in found.items() if outcome[0] in BAD} == {}


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(probe_inputs.FAMILIES))
def test_the_whole_probe_finds_nothing(family):
    found = {case.name: probe_inputs._classify_random(case, *probe_inputs.run_case(case, timeout=60))
             for case in _cases(family, 1)}
    assert {name: outcome for name, outcome in found.items() if outcome[0] in BAD} == {}


def test_the_probe_classifies_each_outcome():
    """The classifier itself, on cases whose outcome is known: a payload run, an input changed,
    an accepted invalid input, a clear refusal."""
    ok = probe_inputs.Case("t", "valid", "lyra-gym", ["policies"], valid=True)
    assert probe_inputs.run_case(ok, 30) == ("clear", "accepted")
    refused = probe_inputs.Case("t", "unknown policy", "lyra-gym", probe_inputs._SIM[:2] + ["nonsense", "--trace",
                                                                                            "trace.csv"])
    assert probe_inputs.run_case(refused, 30)[0] == "clear"
    silent = probe_inputs.Case("t", "valid marked invalid", "lyra-gym", ["policies"])
    assert probe_inputs.run_case(silent, 30) == ("silent", "exit 0")
    payload = probe_inputs.Case("t", "payload", "lyra-gym", ["policies"],
                                setup=lambda work: (work / "PWNED").write_text("x"))
    assert probe_inputs.run_case(payload, 30) == ("silent", "code from a data file ran")
    clobber = probe_inputs.Case("t", "clobber", "lyra-gym", ["trace", "generate", "--out", "trace.csv",
                                                             "--overwrite"])
    assert probe_inputs.run_case(clobber, 30)[0] == "data lost"  # a legitimate overwrite, seen as one
