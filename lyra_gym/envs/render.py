"""``render_mode="rgb_array"``: a small picture of the cluster, drawn with NumPy alone.

Layout, top to bottom (``H x W x 3``, ``uint8``; the size depends only on the cluster config,
so every frame of an env has the same shape, as video recorders need):

* the training pool, then (after a gap) the inference pool: one cell per server, 32 cells a
  row, in server-id order. A cell is filled from the bottom by its GPUs' state: used by
  training (blue on training servers, green on loaned inference servers), serving inference
  (orange: an inference server that is neither loaned nor loanable), free (grey; dark green on
  a loaned server). A pool of more than :data:`MAX_CELLS` servers is drawn with each cell
  standing for several consecutive servers (their GPUs summed), so the picture stays small.
* two bars: queued jobs as a share of the episode's jobs (red), and inference demand as a
  share of the inference servers (orange).

Deterministic (no randomness, no fonts) and cheap: a few NumPy operations per server.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: Server cells per row.
COLUMNS = 32
#: Most cells per pool (a larger pool shares cells between consecutive servers).
MAX_CELLS = 1024
CELL = 10  # pixels per cell, with a 1-pixel gap on each side
MARGIN = 8
GAP = 6
BAR = 8

BACKGROUND = (24, 24, 24)
FREE = (90, 90, 90)
TRAIN_USED = (66, 135, 245)
LOANED_FREE = (30, 80, 40)
LOANED_USED = (80, 200, 90)
SERVING = (245, 166, 35)
QUEUE = (220, 60, 60)
BAR_BACK = (50, 50, 50)

#: Fill order from the bottom of a cell: (category, colour).
_LAYERS = (("train_used", TRAIN_USED), ("loaned_used", LOANED_USED), ("serving", SERVING),
           ("loaned_free", LOANED_FREE), ("free", FREE))


def _rows(servers: int) -> int:
    cells = min(servers, MAX_CELLS)
    return max(1, math.ceil(cells / COLUMNS)) if servers else 0


def frame_shape(training_servers: int, inference_servers: int) -> tuple[int, int, int]:
    """``(H, W, 3)`` of every frame for a cluster of these sizes (a multiple of 16 each way,
    which video encoders like)."""
    height = MARGIN + CELL * _rows(training_servers) + GAP + CELL * _rows(inference_servers) \
        + GAP + BAR + GAP + BAR + MARGIN
    width = 2 * MARGIN + CELL * COLUMNS
    return (-(-height // 16) * 16, -(-width // 16) * 16, 3)


def blank_frame(training_servers: int, inference_servers: int) -> np.ndarray:
    """The background alone (before ``reset``)."""
    frame = np.empty(frame_shape(training_servers, inference_servers), dtype=np.uint8)
    frame[:] = BACKGROUND
    return frame


def _draw_pool(frame: np.ndarray, top: int, gpus: dict[str, np.ndarray]) -> None:
    """Cells of one pool from ``top``; ``gpus[category]`` = that category's GPUs per server."""
    servers = len(gpus["free"])
    if servers == 0:
        return
    per_cell = math.ceil(servers / MAX_CELLS)
    cells = math.ceil(servers / per_cell)
    pad = cells * per_cell - servers
    summed = {k: np.pad(v, (0, pad)).reshape(cells, per_cell).sum(axis=1) for k, v in gpus.items()}
    total = sum(summed.values())
    inner = CELL - 2
    # Cumulative heights per layer (rounded on the running total so a full cell is exactly full).
    running = np.zeros(cells, dtype=np.float64)
    heights = []
    safe_total = np.where(total > 0, total, 1)
    for name, _ in _LAYERS:
        start = np.rint(running / safe_total * inner).astype(np.int64)
        running = running + summed[name]
        end = np.rint(running / safe_total * inner).astype(np.int64)
        heights.append((start, end))
    for c in range(cells):
        row, col = divmod(c, COLUMNS)
        y1 = top + row * CELL + 1 + inner  # bottom edge (exclusive) of the cell's inside
        x0 = MARGIN + col * CELL + 1
        for (_, colour), (start, end) in zip(_LAYERS, heights):
            if end[c] > start[c]:
                frame[y1 - end[c]:y1 - start[c], x0:x0 + inner] = colour


def _draw_bar(frame: np.ndarray, top: int, share: float, colour: tuple[int, int, int]) -> None:
    width = CELL * COLUMNS
    frame[top:top + BAR, MARGIN:MARGIN + width] = BAR_BACK
    filled = int(round(min(max(share, 0.0), 1.0) * width))
    if filled:
        frame[top:top + BAR, MARGIN:MARGIN + filled] = colour


def cluster_frame(engine: Any) -> np.ndarray:
    """The picture of ``engine``'s cluster now (see the module docstring)."""
    view = engine.view
    training = [engine.servers[i] for i in view.training_server_ids]
    inference = [engine.servers[i] for i in view.inference_server_ids]
    frame = blank_frame(len(training), len(inference))

    used = np.array([s.used for s in training], dtype=np.int64)
    size = np.array([s.num_gpus for s in training], dtype=np.int64)
    zero = np.zeros(len(training), dtype=np.int64)
    _draw_pool(frame, MARGIN, {"train_used": used, "loaned_used": zero, "serving": zero,
                               "loaned_free": zero, "free": size - used})

    loanable = set(view.loanable_servers())
    used = np.array([s.used for s in inference], dtype=np.int64)
    size = np.array([s.num_gpus for s in inference], dtype=np.int64)
    loaned = np.array([s.loaned for s in inference], dtype=bool)
    serving = np.array([not s.loaned and s.id not in loanable for s in inference], dtype=bool)
    zero = np.zeros(len(inference), dtype=np.int64)
    top = MARGIN + CELL * _rows(len(training)) + GAP
    _draw_pool(frame, top, {
        "train_used": zero,
        "loaned_used": np.where(loaned, used, 0),
        "serving": np.where(serving, size, 0),
        "loaned_free": np.where(loaned, size - used, 0),
        "free": np.where(loaned | serving, 0, size),
    })

    top += CELL * _rows(len(inference)) + GAP
    _draw_bar(frame, top, len(engine.queue) / max(1, len(engine.jobs)), QUEUE)
    top += BAR + GAP
    _draw_bar(frame, top, view.inference_demand / max(1, len(inference)), SERVING)
    return frame


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
