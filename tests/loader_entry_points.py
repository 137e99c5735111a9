"""The ``lyra_gym.scheduler_loaders`` entry points that ``pyproject.toml`` declares, made visible
to ``importlib.metadata`` in a checkout whose installed metadata predates them.

An editable install reads its entry points from the ``entry_points.txt`` written when it was
installed; a loader added to ``pyproject.toml`` since then (``policy = ...``) is found only after
``pip install -e .``. :func:`declare_missing_loaders` writes a small ``.dist-info`` folder with the
missing ones into a folder the caller puts on ``sys.path`` (and on ``PYTHONPATH`` for the
subprocesses it starts), exactly what the reinstall would add; nothing when none is missing.
"""
from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
GROUP = "lyra_gym.scheduler_loaders"


def declared_loaders() -> dict[str, str]:
    """``{prefix: "module:function"}`` of the loader group in ``pyproject.toml``."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return dict(data["project"]["entry-points"][GROUP])


def declare_missing_loaders(folder: Path) -> bool:
    """Write a dist-info for the declared loaders not installed into ``folder``; whether it wrote one."""
    installed = {ep.name for ep in entry_points(group=GROUP)}
    missing = {name: target for name, target in declared_loaders().items() if name not in installed}
    if not missing:
        return False
    info = folder / "lyra_gym_dev_loaders-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lyra-gym-dev-loaders\nVersion: 0\n",
                                   encoding="utf-8")
    lines = [f"[{GROUP}]", *(f"{name} = {target}" for name, target in missing.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return True
