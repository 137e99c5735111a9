"""A masked policy whose job-slot logits come from one network shared by every slot (``extractor:
slots`` with ``algo: masked_ppo``; issue 38).

:class:`~lyra_agents.masked_policy.MaskedPolicy` maps the whole observation to every dimension's
logits with one MLP: what it learns about slot 3 teaches it nothing about slot 40. The levers the
heuristics use are rules over a job's own features compared with the rest of the cluster (SRPT
preempts the job with the most remaining work when a much shorter one waits; Tiresias ranks jobs
by attained service), so here every job slot's levels are scored by the same small MLP ``head`` from

- the slot's own row of the observation (and its learner-extras row, when the env has them);
- summaries of the other slots, split by what the ``-v2`` masks say a slot is (running: PREEMPT is
  valid; queued: the neutral level is and PREEMPT is not; empty: neither): the mean and the least value of each job
  column over the queued slots, the mean over the running slots, and the share of slots of each
  kind (all 0 when there is none of a kind);
- the context: the cluster block, the loaned-server rows and the learner extras' cluster entries.

Every decision about any slot trains the same weights, and the policy class holds rules such as
"preempt when my remaining time exceeds the shortest queued one's by this much" (what
:mod:`lyra_agents.preempt_search` searches by hand-chosen form). The borrow and loaned-server
levels come from an MLP over the context; the value head is the same MLP over the whole
observation as :class:`MaskedPolicy`'s.

**Choosing whom** (``slot_compare: true``). Each slot's head sees pooled means, not the other
running slots one by one, so it cannot say "preempt only the best candidate": a rule that
preempts the running job of highest score (:mod:`lyra_agents.preempt_rule`) is out of its reach
whenever several score above its threshold. With the comparison, a running slot's PREEMPT logit
is lowered by ``g * (m - d)``, where ``d`` is its own preference (PREEMPT logit minus neutral
logit), ``m`` the highest preference of the running slots (its own included: ``m - d >= 0``) and
``g = exp(log_g)`` one learned scale (starting at 1). As ``g`` grows only the best candidate keeps
its preference.

:meth:`SlotPolicy.logits_reference` computes the logits slot by slot in plain loops: the
vectorised :meth:`SlotPolicy.logits` must equal it (``tests/agents/test_slot_policy.py``).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from lyra_agents.config import TrainConfig
from lyra_agents.masked_policy import MaskedPolicy, mlp, padding_index
from lyra_gym.envs.levers import PREEMPT
from lyra_gym.sim.scheduler import NEUTRAL_JOB_LEVEL

#: summaries of the other slots per job column: queued mean, queued least, running mean
POOLS = 3


class SlotLayout:
    """Where each part of the flat observation lies (index arrays), from the env's block sizes.

    :param k: job slots; ``job_width``: a job row's width; ``cluster_width``: the cluster block's;
    ``server_rows`` x ``server_width``: the loaned-server block; ``extra_slot_width``: the learner
    extras' per-slot width (0 without extras) and ``extra_cluster_width`` their cluster entries."""

    def __init__(self, k: int, job_width: int, cluster_width: int, server_rows: int, server_width: int,
                 extra_slot_width: int = 0, extra_cluster_width: int = 0) -> None:
        self.k, self.job_width = k, job_width
        jobs = np.arange(k * job_width).reshape(k, job_width)
        context_start = k * job_width
        context_size = cluster_width + server_rows * server_width
        extras_start = context_start + context_size
        extras = extras_start + np.arange(k * extra_slot_width).reshape(k, extra_slot_width)
        tail_start = extras_start + k * extra_slot_width
        context = np.concatenate([np.arange(context_start, extras_start),
                                  np.arange(tail_start, tail_start + extra_cluster_width)])
        self.size = tail_start + extra_cluster_width
        self.rows = np.concatenate([jobs, extras], axis=1)          # [K, row width]: a slot's own entries
        self.context = context                                       # cluster, servers, extras' cluster
        self.row_width, self.context_width = self.rows.shape[1], len(context)
        self.slot_input = self.row_width + POOLS * job_width + 2 + self.context_width


class SlotPolicy(MaskedPolicy):
    """Job-slot logits from one shared MLP per slot; the rest from an MLP over the context
    (masked log-probabilities, chosen and entropy: :class:`MaskedPolicy`'s).

    :param layout: the observation's blocks (:class:`SlotLayout`).
    :param nvec: levels of each action dimension; the first ``layout.k`` are the job slots.
    :param net_arch: hidden widths of the value head and of the rest's MLP.
    :param slot_hidden: hidden widths of the shared slot head.
    :param activation: ``tanh`` or ``relu``.
    :param compare: lower each running slot's PREEMPT logit by its shortfall from the best running
        slot's preference (module docstring, "Choosing whom").
    """

    def __init__(self, layout: SlotLayout, nvec: np.ndarray, net_arch: list[int], slot_hidden: list[int],
                 activation: str, compare: bool = False) -> None:
        nn.Module.__init__(self)  # not MaskedPolicy's: no whole-observation policy MLP here
        nvec = np.asarray(nvec, dtype=np.int64)
        k = layout.k
        if len(nvec) < k or set(nvec[:k].tolist()) != {PREEMPT + 1}:
            raise ValueError(f"extractor slots: the first {k} action dimensions must be -v2 job slots")
        self.layout, self.levels = layout, int(nvec[0])
        self.head = mlp(layout.slot_input, slot_hidden, self.levels, activation)
        rest = int(nvec[k:].sum())
        self.rest = mlp(layout.context_width, net_arch, rest, activation) if rest else None
        self.vf = mlp(layout.size, net_arch, 1, activation)
        self.log_g = nn.Parameter(torch.zeros(())) if compare else None  # the comparison's scale, log
        index, real = padding_index(nvec)
        self.rows: torch.Tensor
        self.context: torch.Tensor
        self.register_buffer("index", index, persistent=False)
        self.register_buffer("real", real, persistent=False)
        self.register_buffer("rows", torch.as_tensor(layout.rows), persistent=False)
        self.register_buffer("context", torch.as_tensor(layout.context), persistent=False)

    def _kinds(self, masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(queued, running) ``[batch, K]`` floats (1/0) from the job slots' masks."""
        slot_masks = masks[:, :self.layout.k * self.levels].reshape(len(masks), self.layout.k, self.levels)
        running = slot_masks[:, :, PREEMPT]
        queued = slot_masks[:, :, NEUTRAL_JOB_LEVEL] & ~running
        return queued.float(), running.float()

    def logits(self, obs: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
        """Flat logits ``[batch, sum(nvec)]``: the job slots' from the shared head, then the rest's."""
        batch, k, width = len(obs), self.layout.k, self.layout.job_width
        rows = obs[:, self.rows]                                            # [B, K, row width]
        jobs = rows[:, :, :width]
        context = obs[:, self.context]                                      # [B, C]
        queued, running = self._kinds(masks)
        n_queued, n_running = queued.sum(1, keepdim=True), running.sum(1, keepdim=True)
        q_mean = (jobs * queued[:, :, None]).sum(1) / n_queued.clamp(min=1)
        r_mean = (jobs * running[:, :, None]).sum(1) / n_running.clamp(min=1)
        q_min = jobs.masked_fill(queued[:, :, None] == 0, torch.inf).amin(1)
        q_min = torch.where(n_queued > 0, q_min, torch.zeros_like(q_min))
        shared = torch.cat([q_mean, q_min, r_mean, n_queued / k, n_running / k, context], dim=1)
        slot_in = torch.cat([rows, shared[:, None, :].expand(batch, k, shared.shape[1])], dim=2)
        out = self.head(slot_in)                                            # [B, K, levels]
        if self.log_g is not None:
            out = compared(out, running, self.log_g.exp())
        out = out.reshape(batch, k * self.levels)
        return out if self.rest is None else torch.cat([out, self.rest(context)], dim=1)

    def logits_reference(self, obs: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
        """:meth:`logits` in plain loops, one observation and one slot at a time (for the tests)."""
        k, width = self.layout.k, self.layout.job_width
        out = []
        for row_obs, row_masks in zip(obs, masks):
            jobs = [row_obs[self.rows[j, :width]] for j in range(k)]
            running = [bool(row_masks[j * self.levels + PREEMPT]) for j in range(k)]
            queued = [bool(row_masks[j * self.levels + NEUTRAL_JOB_LEVEL]) and not running[j] for j in range(k)]
            q = [jobs[j] for j in range(k) if queued[j]]
            r = [jobs[j] for j in range(k) if running[j]]
            zero = torch.zeros(width, dtype=obs.dtype)
            q_mean = torch.stack(q).mean(0) if q else zero
            q_min = torch.stack(q).min(0).values if q else zero
            r_mean = torch.stack(r).mean(0) if r else zero
            counts = torch.tensor([len(q) / k, len(r) / k], dtype=obs.dtype)
            context = row_obs[self.context]
            shared = torch.cat([q_mean, q_min, r_mean, counts, context])
            slots = [self.head(torch.cat([row_obs[self.rows[j]], shared])) for j in range(k)]
            if self.log_g is not None:  # each running slot against the best running slot
                prefer = [float(s[PREEMPT] - s[NEUTRAL_JOB_LEVEL]) for s in slots]
                best = max((prefer[j] for j in range(k) if running[j]), default=0.0)
                for j in range(k):
                    if running[j]:
                        lowered = slots[j].clone()
                        lowered[PREEMPT] = lowered[PREEMPT] - self.log_g.exp() * (best - prefer[j])
                        slots[j] = lowered
            rest = [self.rest(context)] if self.rest is not None else []
            out.append(torch.cat(slots + rest))
        return torch.stack(out)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.vf(obs).squeeze(1)


def compared(out: torch.Tensor, running: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """``out`` ([B, K, levels] job-slot logits) with each running slot's (``running`` [B, K], 1/0)
    PREEMPT logit lowered by ``g * (m - d)`` (module docstring, "Choosing whom")."""
    d = out[:, :, PREEMPT] - out[:, :, NEUTRAL_JOB_LEVEL]
    best = d.masked_fill(running == 0, -torch.inf).amax(1, keepdim=True)  # -inf where none runs
    shortfall = torch.where(running > 0, best - d, torch.zeros_like(d))   # >= 0
    preempt = out[:, :, PREEMPT] - g * shortfall
    return torch.cat([out[:, :, :PREEMPT], preempt[:, :, None], out[:, :, PREEMPT + 1:]], dim=2)


def slot_layout(cfg: TrainConfig) -> SlotLayout:
    """The :class:`SlotLayout` of ``cfg``'s env observation (extras included when it has them)."""
    from lyra_agents.spaces import observation_widths
    from lyra_gym.envs.learner_extras import CLUSTER_EXTRAS, SLOT_FEATURES
    from lyra_gym.envs.observation import observation_layout

    job_width, cluster_width = observation_widths(cfg)
    _, rows, server_width = observation_layout(cfg.num_job_slots, cfg.num_server_slots, job_width,
                                               cluster_width)["servers"]
    extras = (len(SLOT_FEATURES), len(CLUSTER_EXTRAS)) if cfg.observation_extras else (0, 0)
    return SlotLayout(cfg.num_job_slots, job_width, cluster_width, rows, server_width, *extras)


def build_policy(cfg: TrainConfig, obs_size: int, nvec: np.ndarray) -> MaskedPolicy:
    """``cfg``'s network: :class:`SlotPolicy` with ``extractor: slots`` (its shared head one hidden
    layer of ``deepsets_hidden`` units; ``slot_compare``), else the whole-observation :class:`MaskedPolicy`."""
    if cfg.extractor != "slots":
        return MaskedPolicy(obs_size, nvec, list(cfg.net_arch), cfg.activation)
    layout = slot_layout(cfg)
    if layout.size != obs_size:
        raise ValueError(f"extractor slots: the layout covers {layout.size} observation entries, not {obs_size}")
    return SlotPolicy(layout, nvec, list(cfg.net_arch), [cfg.deepsets_hidden], cfg.activation, cfg.slot_compare)
