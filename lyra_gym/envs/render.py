"""What ``render()`` returns: the Gantt picture (``"rgb_array"``, ``"human"``) and the text frame (``"ansi"``).

``"rgb_array"``: :func:`episode_frame`, the episode so far as a labelled Gantt picture
(:mod:`lyra_gym.envs.gantt_draw`: a lane per GPU grouped by pool, loaned inference servers
shaded, a bar per job labelled by its id, jobs queued over time, hours on the time axis), an
``H x W x 3`` ``uint8`` array of one shape for every frame (:data:`FRAME_SHAPE`). The env
samples placements after every plan while it renders (:class:`~lyra_gym.run.placements.PlacementRecorder`),
from the episode's first decision on: jobs the warm start left running begin there.

``"human"``: the same picture in a matplotlib window when matplotlib's backend is interactive,
else the ``"ansi"`` text printed to stdout (a headless machine).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lyra_gym.envs.gantt_draw import DPI, HEIGHT_PX, WIDTH_PX, gantt_array, gantt_figure
from lyra_gym.model.config import SimConfig
from lyra_gym.run.placements import PlacementRecorder, Placements
from lyra_gym.sim.cluster import build_servers

#: Shape of every ``"rgb_array"`` frame.
FRAME_SHAPE = (HEIGHT_PX, WIDTH_PX, 3)


def empty_placements(config: SimConfig) -> Placements:
    """No job, no loan: the cluster of ``config`` alone (the frame before ``reset``)."""
    servers = [(s.pool.value, s.num_gpus) for s in build_servers(config.cluster)]
    return Placements(servers, 0.0, 0.0)


def _title(episode: Any) -> str:
    window = episode.window
    return (f"{episode.source.heuristic_name}-guided episode, {window.split} window {window.index} "
            f"({len(episode.engine.jobs)} jobs), step {episode.steps}")


def episode_placements(episode: Any) -> Placements:
    """The episode's placements so far (starting the recorder on its first call)."""
    if episode.recorder is None:
        episode.recorder = PlacementRecorder(episode.engine)
    return episode.recorder.placements()


def episode_frame(episode: Any, config: SimConfig) -> np.ndarray:
    """The ``"rgb_array"`` frame: the Gantt of ``episode`` so far (None before the first reset)."""
    if episode is None:
        return gantt_array(empty_placements(config), "no episode yet: call reset()")
    return gantt_array(episode_placements(episode), _title(episode))


def interactive_backend() -> bool:
    """Can matplotlib open a window here?"""
    import matplotlib
    from matplotlib.backends import BackendFilter, backend_registry

    return matplotlib.get_backend().lower() in backend_registry.list_builtin(BackendFilter.INTERACTIVE)


def show_human(episode: Any, state: dict) -> None:
    """``"human"``: draw the Gantt into one pyplot window kept in ``state``, or print the text frame."""
    if not interactive_backend():
        print(cluster_text(episode.engine), flush=True)
        return
    import matplotlib.pyplot as plt

    picture = gantt_figure(episode_placements(episode), _title(episode))
    if "figure" not in state or not plt.fignum_exists(state["figure"].number):
        state["figure"] = plt.figure(figsize=(WIDTH_PX / DPI, HEIGHT_PX / DPI), dpi=DPI)
    fig = state["figure"]
    fig.clear()
    picture.canvas.draw()
    fig.figimage(np.asarray(picture.canvas.buffer_rgba()))  # type: ignore[attr-defined]
    plt.pause(0.001)


def cluster_text(engine: Any) -> str:
    """The ``"ansi"`` frame of ``engine``'s cluster now: a line of counts, then a line per pool
    (``used/GPUs`` per server; ``L`` marks a loaned one, ``-`` an inference server not on loan)."""
    view = engine.view
    lines = [
        f"t={engine.now / 3600:8.2f} h  queued={len(engine.queue):4d} running={len(engine.running):4d} "
        f"finished={engine.finished}/{len(engine.jobs)}  demand={view.inference_demand} "
        f"loaned={engine.loaned_count} loanable={view.num_loanable} reclaim={view.reclaim_pending}",
    ]
    for pool, ids in (("train", view.training_server_ids), ("infer", view.inference_server_ids)):
        cells = []
        for sid in ids:
            s = engine.servers[sid]
            mark = "L" if s.loaned else ("-" if pool == "infer" else "")
            cells.append(f"{mark}{s.used}/{s.num_gpus}")
        lines.append(f"{pool}: " + " ".join(cells))
    return "\n".join(lines)
