"""Imports go to the module that defines a name (issue 41 item 5): no private name crosses a module
boundary, and nothing inside the project imports the user face ``lyra_agents.factory``."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: folder -> the import name it is installed as
PACKAGES = {"lyra_gym": "lyra_gym", "baselines": "lyra_baselines", "agents": "lyra_agents"}
FACE = "lyra_agents.factory"

# No exceptions: every private name stays in its module, and nothing inside the project imports the face.
PRIVATE_LEFTOVERS: set[tuple[str, str]] = set()
FACE_LEFTOVERS: set[str] = set()


def module_name(path: Path) -> str:
    """``agents/model_files.py`` -> ``lyra_agents.model_files`` (a package's ``__init__`` is the package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    parts[0] = PACKAGES[parts[0]]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    """Every module of the three packages by its import name."""
    return {module_name(path): path for folder in PACKAGES for path in sorted((ROOT / folder).rglob("*.py"))}


def imported_names(source: str, module: str, is_package: bool, modules: set[str]) -> set[str]:
    """``MODULE.NAME`` for every name ``source`` (the text of ``module``) takes from a project module:
    ``from M import N`` (relative and multi-line ones too), and ``alias.N`` where ``alias`` is a
    project module it imported (``import M as alias`` or ``from P import M``)."""
    found, aliases = set(), {}
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join(here[:len(here) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] not in PACKAGES.values():
                continue
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target)
                if target in modules:
                    aliases[alias.asname or alias.name] = target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    aliases[alias.asname or alias.name] = alias.name if alias.asname else alias.name.split(".")[0]
                    found.add(alias.name)
    for node in ast.walk(tree):
        chain, value = [], node
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if chain and isinstance(value, ast.Name) and value.id in aliases:
            dotted = ".".join([aliases[value.id], *reversed(chain)])
            while dotted.rpartition(".")[0] and dotted.rpartition(".")[0] not in modules:
                dotted = dotted.rpartition(".")[0]  # alias.mod.NAME.attr -> alias.mod.NAME
            found.add(dotted)
    return found


def private_imports(modules: dict[str, Path]) -> set[tuple[str, str]]:
    """(file, ``MODULE._NAME``) for each private name a module takes from another module."""
    names = set(modules)
    out = set()
    for module, path in modules.items():
        for target in imported_names(path.read_text(), module, path.name == "__init__.py", names):
            owner, _, name = target.rpartition(".")
            if owner != module and name.startswith("_") and not name.startswith("__"):
                out.add((path.relative_to(ROOT).as_posix(), target))
    return out


def test_the_scanner_finds_every_form_of_a_private_import():
    modules = {"lyra_gym.a", "lyra_gym.b", "lyra_gym.pkg", "lyra_gym.pkg.c"}
    source = (
        "from lyra_gym.a import (\n    public,\n    _multi_line,\n)\n"
        "from .pkg.c import _relative\n"
        "from lyra_gym import a\n"
        "import lyra_gym.pkg.c as c\n"
        "x = a._by_attribute + c._aliased + c.public.attr\n"
    )
    found = imported_names(source, "lyra_gym.b", False, modules)
    assert {"lyra_gym.a._multi_line", "lyra_gym.pkg.c._relative", "lyra_gym.a._by_attribute",
            "lyra_gym.pkg.c._aliased", "lyra_gym.pkg.c.public"} <= found


def test_no_private_name_is_imported_across_modules():
    found = private_imports(package_modules())
    new = sorted(found - PRIVATE_LEFTOVERS)
    assert not new, "make each public (renamed, with a docstring) or move it to its one user:\n" + "\n".join(
        f"{path}: {target}" for path, target in new)
    fixed = sorted(PRIVATE_LEFTOVERS - found)
    assert not fixed, f"no longer imported: drop from PRIVATE_LEFTOVERS: {fixed}"


def project_sources() -> list[Path]:
    """The project's own code: the packages, ``train.py``, tools, benchmarks and examples (not tests)."""
    files = [ROOT / "train.py"]
    for folder in (*PACKAGES, "tools", "benchmarks", "examples"):
        files += sorted((ROOT / folder).rglob("*.py"))
    return files


@pytest.mark.parametrize("source", [
    "from lyra_agents.factory import make_model\n",
    "import lyra_agents.factory\n",
    "from lyra_agents import factory\n",
    "def f():\n    from lyra_agents.factory import (\n        load_model,\n    )\n",
])
def test_the_scanner_finds_every_form_of_a_face_import(source):
    modules = set(package_modules())
    assert any(t == FACE or t.startswith(FACE + ".")
               for t in imported_names(source, "lyra_agents.evaluate", False, modules))


def test_nothing_inside_the_project_imports_the_factory_face():
    modules = package_modules()
    names = set(modules)
    users = set()
    for path in project_sources():
        relative = path.relative_to(ROOT).as_posix()
        if relative == "agents/factory.py":
            continue
        module = module_name(path) if path.relative_to(ROOT).parts[0] in PACKAGES else path.stem
        targets = imported_names(path.read_text(), module, path.name == "__init__.py", names)
        if any(t == FACE or t.startswith(FACE + ".") for t in targets):
            users.add(relative)
    assert users - FACE_LEFTOVERS == set(), "import each name from the module that defines it"
    assert FACE_LEFTOVERS - users == set(), "no longer imports the face: drop from FACE_LEFTOVERS"


def test_the_factory_face_exports_only_public_names_of_their_defining_modules():
    pytest.importorskip("stable_baselines3")
    import importlib

    face = importlib.import_module(FACE)
    for name in face.__all__:
        assert not name.startswith("_"), name
        obj = getattr(face, name)
        home = getattr(obj, "__module__", None)
        if home is not None and home.startswith("lyra_agents."):
            assert home != FACE, name  # defined elsewhere, only re-exported here
