"""Lyra's running elastic jobs, kept across decisions (part of ``LyraMemory``): the base and
flexible workers of each (in start order) and the flexible GPUs per server and per cell.

They follow the engine through its change feed (``ClusterView.change_feed``): a decision visits
only the jobs started, stopped, finished or resized since the last one, O(changes) instead of
O(running jobs); they are rebuilt from the running allocations at the first decision of a run
and whenever the feed was lost. ``Decision`` copies them (C-level dict copies) and lays the
plan's own edits (a reclaim answer's) over the copy; without such edits it edits them in place
and they are undone at the next sync (:meth:`RunningElastic.lend`). ``tests/baselines/test_lyra_kept_state.py``
and the equivalence harness (``tests/baselines/test_reference_equivalence.py``) check them.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from lyra_gym.sim.journal import ChangeFeed
from lyra_gym.sim.view import ClusterView, JobView

Split = Callable[[JobView, Mapping[int, int]], "tuple[dict[int, int], dict[int, int]]"]


class RunningElastic:
    """The running elastic jobs as the engine has them now (after :meth:`sync`).

    :param split: base and flexible workers of a job's allocation (``lyra_state.split_alloc``).
    :param cell_of: the index's cell of each server id.
    :param kinds: job id -> its view if elastic, else None (shared with ``LyraMemory``; filled here).
    :param views: job id -> its view (shared with ``LyraMemory``; filled here).
    """

    def __init__(self, split: Split, cell_of: Sequence[int], kinds: dict[str, JobView | None],
                 views: dict[str, JobView]) -> None:
        self.split, self.cell_of, self.kinds, self.views = split, cell_of, kinds, views
        self.feed: ChangeFeed | None = None
        self.view: ClusterView | None = None  # the view whose engine the feed follows
        self.allocs: dict[str, Mapping[int, int]] = {}  # job id -> allocation, start order
        self.seq: dict[str, int] = {}  # job id -> start sequence (its place in that order)
        self.base: dict[str, dict[int, int]] = {}  # job id -> base workers {server: GPUs}, start order
        self.flex: dict[str, dict[int, int]] = {}  # job id -> flexible workers, start order
        self.jobs: dict[str, JobView] = {}  # job id -> view, start order
        self.flex_on: dict[int, int] = {}  # server id -> flexible GPUs there (non-zero only)
        self.flex_cells: dict[int, int] = {}  # cell -> flexible GPUs there (non-zero only)
        self.generation = 0  # bumped whenever ``flex_on``/``flex_cells`` may change (a rebuild, a put, a drop)
        # a decision's edits to ``base``/``flex`` lent to it in place (:meth:`lend`): (job id, old
        # base, old flex; None: absent), undone at the next sync
        self.edits: list[tuple[str, dict[int, int] | None, dict[int, int] | None]] | None = None

    def lend(self) -> list[tuple[str, dict[int, int] | None, dict[int, int] | None]]:
        """The list a decision that edits ``base`` and ``flex`` in place (instead of copies)
        records each edit's old values in; the edits are undone at the next :meth:`sync`."""
        self.edits = []
        return self.edits

    def restore(self) -> None:
        """Undo the edits of the decision ``base`` and ``flex`` were lent to (each key back in its
        place: an overwritten key keeps its place, an added one is dropped)."""
        edits, self.edits = self.edits, None
        if edits:
            base, flex = self.base, self.flex
            for job_id, old_base, old_flex in reversed(edits):
                if old_base is None or old_flex is None:
                    del base[job_id], flex[job_id]
                else:
                    base[job_id], flex[job_id] = old_base, old_flex

    def sync(self, view: ClusterView) -> None:
        """Catch up with the engine's running allocations (at a decision, before any plan)."""
        self.restore()
        changes = self.feed.changed() if self.view is view and self.feed is not None else None
        if changes is None:
            self._rebuild(view)
            return
        starts = []
        allocs, seqs = self.allocs, self.seq
        for job_id, (alloc, seq) in changes.items():
            if self.kind(view, job_id) is None:
                continue  # inelastic: no flexible workers
            old = allocs.get(job_id)
            if old is not None:
                if alloc is old:
                    continue
                if alloc is not None and seqs[job_id] == seq:  # resized in place: keeps its place
                    self._drop_flex(job_id)
                    self._put(job_id, alloc)
                    continue
                self._remove(job_id)  # stopped, finished or restarted
            if alloc is not None:
                starts.append((seq, job_id, alloc))
        starts.sort()  # started since: after every job running before, in start order
        for seq, job_id, alloc in starts:
            seqs[job_id] = seq
            self._put(job_id, alloc)

    def _rebuild(self, view: ClusterView) -> None:
        self.view, self.feed = view, view.change_feed()
        self.generation += 1
        self.allocs, self.seq, self.base, self.flex, self.jobs = {}, {}, {}, {}, {}
        self.flex_on, self.flex_cells = {}, {}
        for job_id, (alloc, seq) in self.feed.running().items():  # start order
            if alloc is not None and self.kind(view, job_id) is not None:
                self.seq[job_id] = seq
                self._put(job_id, alloc)

    def kind(self, view: ClusterView, job_id: str) -> JobView | None:
        """The job's view if it is elastic, else None (cached)."""
        kinds = self.kinds
        if job_id in kinds:
            return kinds[job_id]
        job = self.views.get(job_id)
        if job is None:
            job = self.views[job_id] = view.job(job_id)
        kind = kinds[job_id] = job if job.spec.elastic else None
        return kind

    def _put(self, job_id: str, alloc: Mapping[int, int]) -> None:
        """Record (or replace in place) a running job's allocation and its split."""
        job = self.kinds[job_id]
        assert job is not None
        base, flex = self.split(job, alloc)
        self.allocs[job_id], self.base[job_id], self.flex[job_id], self.jobs[job_id] = alloc, base, flex, job
        self.generation += 1
        if flex:
            add_flex(self.flex_on, self.flex_cells, self.cell_of, flex, 1)

    def _drop_flex(self, job_id: str) -> None:
        self.generation += 1
        flex = self.flex[job_id]
        if flex:
            add_flex(self.flex_on, self.flex_cells, self.cell_of, flex, -1)

    def _remove(self, job_id: str) -> None:
        self._drop_flex(job_id)
        del self.allocs[job_id], self.seq[job_id], self.base[job_id], self.flex[job_id], self.jobs[job_id]


def add_flex(flex_on: dict[int, int], flex_cells: dict[int, int], cell_of: Sequence[int],
             flex: Mapping[int, int], sign: int) -> None:
    """Add (``sign`` 1) or take away (-1) a job's flexible workers ``flex`` to the per-server and
    per-cell sums, keeping only non-zero entries."""
    for sid, g in flex.items():
        n = flex_on.get(sid, 0) + sign * g
        if n:
            flex_on[sid] = n
        else:
            del flex_on[sid]
        c = cell_of[sid]
        n = flex_cells.get(c, 0) + sign * g
        if n:
            flex_cells[c] = n
        else:
            del flex_cells[c]


__all__ = ["RunningElastic", "add_flex"]
