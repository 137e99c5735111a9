"""Draw a labelled Gantt picture of a run's :class:`~lyra_gym.run.placements.Placements`.

Layout (one figure, :data:`WIDTH_PX` x :data:`HEIGHT_PX` pixels whatever the data, so every
frame of an env has one shape):

* top panel: one lane per GPU, grouped by server and by pool: the training servers first, then
  (below a thick line) the inference servers, whose stretches on loan to training are shaded
  green. A job's segment is a bar in its server's lanes (the lowest lanes free when it starts),
  coloured per job and labelled with its id where the bar is large enough to hold the text.
* bottom panel: jobs queued over time (a step line).
* a time axis in hours from trace start, a legend, a title.

Drawn with matplotlib's object API on an Agg canvas (no pyplot, no global state): the same
placements give the same pixels.
"""

from __future__ import annotations

import zlib
from typing import Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from lyra_gym.run.placements import Placements, Segment

WIDTH_PX, HEIGHT_PX, DPI = 1200, 720, 100
#: Most job ids written on bars (the largest bars first).
MAX_LABELS = 80
LOAN_COLOUR = "#9be39b"
QUEUE_COLOUR = "#d62728"
POOL_LINE = "#222222"


class GanttError(ValueError):
    """Placements that cannot be drawn (e.g. a server holding more GPUs than it has)."""


def job_colour(job_id: str) -> tuple[float, float, float, float]:
    """A colour of matplotlib's tab20 per job id (CRC-32 of the id: the same in every process)."""
    from matplotlib import colormaps

    return colormaps["tab20"](zlib.crc32(job_id.encode()) % 20)


def server_rows(servers: Sequence[tuple[str, int]]) -> tuple[list[int], int, int]:
    """``(first lane of each server, lanes of the training pool, all lanes)``: training servers
    first, then a gap of one lane, then the inference servers (ids in order within a pool)."""
    first = [0] * len(servers)
    lane = 0
    for pool in ("training", "inference"):
        if pool == "inference" and lane:
            lane += 1  # the gap between the pools
        train_lanes = lane
        for sid, (kind, gpus) in enumerate(servers):
            if kind == pool:
                first[sid] = lane
                lane += gpus
    return first, train_lanes, lane


def assign_lanes(segments: Sequence[Segment], servers: Sequence[tuple[str, int]]) -> list[list[int]]:
    """The GPU lanes (0 .. GPUs - 1 of its server) of each segment: at its start it takes the lowest
    lanes free then (segments that end at an instant free their lanes before others start)."""
    events = sorted([(s.end_s, 0, i) for i, s in enumerate(segments)]
                    + [(s.start_s, 1, i) for i, s in enumerate(segments)])
    free: dict[int, list[int]] = {}
    lanes: list[list[int]] = [[] for _ in segments]
    for t, starting, i in events:
        seg = segments[i]
        pool = free.setdefault(seg.server, list(range(servers[seg.server][1])))
        if not starting:
            pool.extend(lanes[i])
            pool.sort()
        elif len(pool) < seg.gpus:
            raise GanttError(f"server {seg.server} holds more than its {servers[seg.server][1]} GPUs "
                             f"at {t:.1f} s (job {seg.job_id})")
        else:
            lanes[i], pool[:] = pool[:seg.gpus], pool[seg.gpus:]
    return lanes


def _runs(lanes: list[int]) -> list[tuple[int, int]]:
    """Contiguous ``(first lane, count)`` runs of sorted ``lanes``."""
    runs: list[tuple[int, int]] = []
    for lane in lanes:
        if runs and runs[-1][0] + runs[-1][1] == lane:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((lane, 1))
    return runs


def _box(x0: float, x1: float, y0: float, y1: float) -> list[tuple[float, float]]:
    return [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]


def _draw_jobs(ax, placements: Placements, first: list[int], x_span: float, lanes_total: int) -> None:
    segments = placements.jobs
    lanes = assign_lanes(segments, placements.servers)
    boxes, colours, spots = [], [], []
    for seg, seg_lanes in zip(segments, lanes):
        x0, x1 = seg.start_s / 3600, seg.end_s / 3600
        colour = job_colour(seg.job_id)
        for lane, count in _runs(seg_lanes):
            y0 = first[seg.server] + lane
            boxes.append(_box(x0, x1, y0, y0 + count))
            colours.append(colour)
            spots.append(((x1 - x0) * count, seg.job_id, x0, x1, y0, count))
    edge = "white" if len(boxes) < 400 else "none"
    ax.add_collection(PolyCollection(boxes, facecolors=colours, edgecolors=edge, linewidths=0.3))
    # labels: the largest bars first, where the id fits (pixels per hour and per lane of the panel)
    width_px, height_px = ax.bbox.width, ax.bbox.height
    px_hour, px_lane = width_px / max(x_span, 1e-9), height_px / max(lanes_total, 1)
    labelled: set[str] = set()
    for _, job_id, x0, x1, y0, count in sorted(spots, key=lambda s: (-s[0], s[1])):
        if len(labelled) >= MAX_LABELS:
            break
        if job_id in labelled or count * px_lane < 9 or (x1 - x0) * px_hour < 6.5 * len(job_id) + 4:
            continue
        labelled.add(job_id)
        ax.text((x0 + x1) / 2, y0 + count / 2, job_id, ha="center", va="center", fontsize=7, clip_on=True)


def _draw_pools(ax, placements: Placements, first: list[int], train_lanes: int, lanes_total: int,
                x0: float, x1: float) -> None:
    servers = placements.servers
    loans = [_box(a / 3600, b / 3600, first[sid], first[sid] + servers[sid][1]) for sid, a, b in placements.loans]
    ax.add_collection(PolyCollection(loans, facecolors=LOAN_COLOUR, edgecolors="none", alpha=0.6))
    if len(servers) <= 96:  # a thin line between servers
        for sid, (_, gpus) in enumerate(servers):
            ax.axhline(first[sid] + gpus, color="#cccccc", linewidth=0.4, zorder=0)
    ticks, names = [], []
    n_train = sum(1 for kind, _ in servers if kind == "training")
    n_inf = len(servers) - n_train
    if n_train:
        ticks.append(train_lanes / 2)
        names.append(f"training\n{n_train} servers")
    if n_inf:
        ticks.append((train_lanes + (1 if n_train else 0) + lanes_total) / 2)
        names.append(f"inference\n{n_inf} servers\n(green: on loan)")
    if n_train and n_inf:
        ax.axhspan(train_lanes, train_lanes + 1, color=POOL_LINE, linewidth=0)
    ax.set_yticks(ticks, names, fontsize=8)
    ax.set_ylim(lanes_total, 0)
    ax.set_xlim(x0, x1)
    ax.set_ylabel("GPUs (one lane each)", fontsize=8)


def gantt_figure(placements: Placements, title: str = "") -> Figure:
    """The Gantt picture of ``placements`` (module docstring) as a matplotlib Figure."""
    fig = Figure(figsize=(WIDTH_PX / DPI, HEIGHT_PX / DPI), dpi=DPI)
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(2, 1, height_ratios=(5, 1), left=0.1, right=0.98, top=0.88, bottom=0.08, hspace=0.08)
    ax = fig.add_subplot(grid[0])
    queue_ax = fig.add_subplot(grid[1], sharex=ax)
    x0 = placements.start_s / 3600
    x1 = max(placements.end_s / 3600, x0 + 1 / 60)
    first, train_lanes, lanes_total = server_rows(placements.servers)
    _draw_pools(ax, placements, first, train_lanes, lanes_total, x0, x1)
    _draw_jobs(ax, placements, first, x1 - x0, lanes_total)
    ax.tick_params(labelbottom=False)

    if placements.queue:
        times = [t / 3600 for t, _ in placements.queue] + [x1]
        counts = [q for _, q in placements.queue]
        counts.append(counts[-1])
        queue_ax.fill_between(times, counts, step="post", color=QUEUE_COLOUR, alpha=0.25, linewidth=0)
        queue_ax.step(times, counts, where="post", color=QUEUE_COLOUR, linewidth=1)
        queue_ax.set_ylim(0, max(1, max(counts)) * 1.15)
    queue_ax.set_ylabel("queued\njobs", fontsize=8)
    queue_ax.set_xlabel("time since trace start (h)", fontsize=9)
    queue_ax.tick_params(labelsize=8)
    ax.tick_params(labelsize=8)

    n_jobs = len({s.job_id for s in placements.jobs})
    fig.suptitle(title or "Gantt", x=0.1, y=0.98, ha="left", fontsize=11)
    fig.text(0.1, 0.925, f"{n_jobs} jobs ran, {len(placements.loans)} loans, "
             f"{x0:.2f} h to {placements.end_s / 3600:.2f} h", fontsize=8, color="#444444")
    handles = [Patch(color=job_colour("j"), label="a job's GPUs (a colour per job, id on the bar)"),
               Patch(color=LOAN_COLOUR, alpha=0.6, label="inference server on loan to training"),
               Line2D([], [], color=QUEUE_COLOUR, label="jobs queued")]
    fig.legend(handles=handles, loc="upper right", bbox_to_anchor=(0.98, 0.995), ncol=1, fontsize=8, frameon=False)
    return fig


def gantt_array(placements: Placements, title: str = "") -> np.ndarray:
    """The picture as an ``HEIGHT_PX x WIDTH_PX x 3`` ``uint8`` array."""
    fig = gantt_figure(placements, title)
    canvas = fig.canvas
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[:, :, :3].copy()  # type: ignore[attr-defined]


def write_gantt_png(placements: Placements, path: str, title: str = "") -> None:
    """Write the picture to ``path`` (PNG)."""
    gantt_figure(placements, title).savefig(path, dpi=DPI)
