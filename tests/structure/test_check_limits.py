"""tools/check_limits.py: import cycles, module length and complexity against an allow-list, on small trees."""
from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("check_limits", ROOT / "tools" / "check_limits.py")
check_limits = importlib.util.module_from_spec(_spec)
sys.modules["check_limits"] = check_limits  # dataclasses resolve the module's annotations through it
_spec.loader.exec_module(check_limits)


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_import_cycles_are_the_strongly_connected_components():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": set()}
    assert check_limits.import_cycles(graph) == [["a", "b", "c"], ["d", "e"]]
    assert check_limits.import_cycles({"a": {"b"}, "b": set()}) == []


def test_import_graph_reads_relative_function_level_and_type_checking_imports(tmp_path):
    write(tmp_path, {
        "p/__init__.py": "from p import x\n",
        "p/x.py": "from . import y\nimport os\n",
        "p/y.py": "def f():\n    from p.x import thing\n",
        "p/z.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import p.x\n",
        "p/sub/__init__.py": "",
        "p/sub/m.py": "from ..z import g\nfrom .. import y\n",
    })
    graph = check_limits.import_graph(tmp_path, ["p"])
    assert graph == {"p": {"p.x"}, "p.x": {"p.y"}, "p.y": {"p.x"}, "p.z": {"p.x"}, "p.sub": set(),
                     "p.sub.m": {"p.z", "p.y"}}
    assert check_limits.import_cycles(graph) == [["p.x", "p.y"]]


def test_cycles_are_allowed_only_within_an_allowed_set(tmp_path):
    write(tmp_path, {"p/__init__.py": "", "p/a.py": "import p.b\n", "p/b.py": "import p.a\n",
                     "p/c.py": "import p.d\n", "p/d.py": "import p.c\n"})
    limits = check_limits.Limits(cycle_packages=["p"], import_cycles=[["p.a", "p.b", "p.e"], ["p.x", "p.y"]])
    report = check_limits.check_cycles(tmp_path, limits)
    assert [line.split(" (")[0] for line in report.new] == ["import cycle among p.c, p.d"]
    assert report.stale == ["import_cycles: ['p.x', 'p.y'] is no longer a cycle"]
    # a cycle that grows past its allowed set is new
    write(tmp_path, {"p/b.py": "import p.a\nimport p.c\n", "p/d.py": "import p.c\nimport p.a\n"})
    report = check_limits.check_cycles(tmp_path, limits)
    assert [line.split(" (")[0] for line in report.new] == ["import cycle among p.a, p.b, p.c, p.d"]


def test_long_modules_new_allowed_grown_and_stale(tmp_path):
    write(tmp_path, {"a.py": "x = 1\n" * 5, "b.py": "x = 1\n" * 6, "c.py": "x = 1\n" * 7, "d.py": "x = 1\n" * 3})
    limits = check_limits.Limits(max_lines=4, long_modules={"b.py": 6, "c.py": 6, "d.py": 9})
    files = check_limits.python_files(tmp_path, ["."])
    report = check_limits.check_lines(tmp_path, files, limits)
    assert report.new == ["a.py: 5 lines (limit 4)"]
    assert report.notes == ["c.py: 7 lines, grew from 6 (allowed, limit 4)"]
    assert report.stale == ["long_modules: d.py is now within 4 lines"]


def test_complexity_is_ruffs_count_named_by_qualified_function(tmp_path):
    pytest.importorskip("ruff")
    ifs = "".join(f"        if x == {i}:\n            return {i}\n" for i in range(16))  # 1 + 16 branches
    text = f"class C:\n    def g(self, x):\n{ifs}        return -1\n\n\ndef small():\n    return 0\n"
    write(tmp_path, {"m.py": text})
    files = check_limits.python_files(tmp_path, ["m.py"])
    assert check_limits.ruff_complexity(tmp_path, files, 15) == {"m.py::C.g": 17}
    assert check_limits.ruff_complexity(tmp_path, files, 17) == {}


def test_main_fails_on_a_new_violation_and_with_strict_on_a_stale_entry(tmp_path, capsys):
    pytest.importorskip("ruff")
    write(tmp_path, {"p/__init__.py": "", "p/a.py": "import p.b\n", "p/b.py": "import p.a\n"})
    table = '[tool.check_limits]\npaths = ["p"]\ncycle_packages = ["p"]\nmax_lines = 600\n'
    (tmp_path / "pyproject.toml").write_text(table)
    assert check_limits.main(["--root", str(tmp_path)]) == 1
    assert "NEW: import cycle among p.a, p.b" in capsys.readouterr().out
    allowed = 'import_cycles = [["p.a", "p.b"]]\nlong_modules = {"p/a.py" = 700}\n'
    (tmp_path / "pyproject.toml").write_text(table + allowed)
    assert check_limits.main(["--root", str(tmp_path)]) == 0
    assert check_limits.main(["--root", str(tmp_path), "--strict"]) == 1
    assert "stale allow-list entry: long_modules: p/a.py" in capsys.readouterr().out
