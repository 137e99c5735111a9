"""A permutation-invariant encoder of the job slots (DeepSets), as an SB3 features extractor.

The environments' flat observation is laid out as (``lyra_gym/envs/observation.py``)::

    [ K job slots x job_width | cluster_width | M server slots x len(SERVER_FEATURES) ]

(``job_width`` = ``len(JOB_FEATURES)`` in the guided environments, plus the Alloc features in
``LyraGym/Alloc-v1``; likewise ``cluster_width``.)

:class:`JobSetExtractor` applies one small MLP ``phi`` to every job slot (shared
weights), pools the K codes by mean and max (both invariant to the slots'
order), does the same for the M loaned-server slots with its own ``phi``, and
concatenates the pooled codes with the cluster features. The policy's and the
value function's MLPs (``net_arch``) then play the part of DeepSets' ``rho``
(Zaheer et al., "Deep Sets", NeurIPS 2017).

Empty slots are all-zero rows and are encoded like any other row (no masking):
the result stays invariant, and it does not depend on reading the "present"
flag, which observation normalisation shifts and scales.

Per-slot actions. The pooled summary cannot tell the policy *which* slot is
which, but ``Cluster-v1`` and ``Elastic-v1`` set a level per job slot (and
``Loaning-v1`` / ``Cluster-v1`` a level per loaned-server slot). With
``slot_dim > 0`` the extractor also appends a ``slot_dim``-wide code of every
slot in slot order; those codes are permutation-*equivariant* (permuting the
slots permutes them), the pooled part stays invariant. ``slot_dim = 0`` gives
the purely invariant encoder (enough for a value function, or for the borrow
level alone).

Observation normalisation: VecNormalize keeps one mean and standard deviation
per observation entry, i.e. per slot, so identical jobs in different slots
would reach ``phi`` differently scaled. ``lyra_agents.vec_envs`` therefore ties the
statistics across slots (``tie_slot_stats``, on by default).
"""

from __future__ import annotations

import gymnasium as gym
import torch
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from lyra_gym.envs.observation import CLUSTER_FEATURES, JOB_FEATURES, observation_layout

__all__ = ["JobSetExtractor", "observation_layout"]


def _mlp(inputs: int, hidden: int, layers: int = 2) -> nn.Sequential:
    mods: list[nn.Module] = []
    for i in range(layers):
        mods += [nn.Linear(inputs if i == 0 else hidden, hidden), nn.ReLU()]
    return nn.Sequential(*mods)


class JobSetExtractor(BaseFeaturesExtractor):
    """DeepSets over the job slots (and the loaned-server slots) of a LyraGym observation.

    Output: ``[mean_K phi_j | max_K phi_j | cluster features | mean_M phi_s | max_M phi_s]``,
    then, if ``slot_dim > 0``, ``K x slot_dim`` job-slot codes and ``M x slot_dim``
    server-slot codes in slot order.

    :param observation_space: the env's ``Box`` of length ``K*job_width + cluster_width + M*4``.
    :param num_job_slots: K (the env's ``num_job_slots``).
    :param num_server_slots: M (the env's ``num_server_slots``).
    :param job_width: features per job slot (default ``len(JOB_FEATURES)``).
    :param cluster_width: cluster features (default ``len(CLUSTER_FEATURES)``).
    :param hidden: width of both ``phi`` MLPs (two ReLU layers), default 64.
    :param slot_dim: width of the per-slot codes appended in slot order (0 = none), default 0.
    """

    def __init__(self, observation_space: gym.spaces.Box, num_job_slots: int, num_server_slots: int,
                 hidden: int = 64, slot_dim: int = 0, job_width: int = len(JOB_FEATURES),
                 cluster_width: int = len(CLUSTER_FEATURES), slot_extras: int = 0, cluster_extras: int = 0) -> None:
        layout = observation_layout(num_job_slots, num_server_slots, job_width, cluster_width)
        start, m, ns = layout["servers"]
        self.base_size = start + m * ns
        size = self.base_size + num_job_slots * slot_extras + cluster_extras
        if observation_space.shape != (size,):
            raise ValueError(
                f"JobSetExtractor: observation shape {observation_space.shape} does not match K={num_job_slots} "
                f"job slots x {job_width} + {cluster_width} cluster + M={num_server_slots} server "
                f"slots x {ns} + learner extras ({slot_extras} per slot, {cluster_extras}) = {size}")
        k, nj, nc = num_job_slots, job_width, cluster_width
        self.slot_extras, self.cluster_extras = slot_extras, cluster_extras
        features = 2 * hidden + nc + cluster_extras + (2 * hidden if m else 0) + slot_dim * (k + m)
        super().__init__(observation_space, features_dim=features)
        self.k, self.m, self.nj, self.ns, self.nc = k, m, nj, ns, nc
        self.slot_dim = slot_dim
        self.phi_job = _mlp(nj + slot_extras, hidden)
        self.phi_server = _mlp(ns, hidden) if m else None
        self.job_code = nn.Linear(hidden, slot_dim) if slot_dim else None
        self.server_code = nn.Linear(hidden, slot_dim) if slot_dim and m else None

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        batch = observations.shape[0]
        kj = self.k * self.nj
        rows = observations[:, :kj].reshape(batch, self.k, self.nj)
        tail = observations[:, self.base_size:]  # learner extras (lyra_gym.envs.learner_extras), if any
        if self.slot_extras:  # each slot's extras join its row
            per_slot = tail[:, :self.k * self.slot_extras].reshape(batch, self.k, self.slot_extras)
            rows = torch.cat([rows, per_slot], dim=2)
        jobs = self.phi_job(rows)
        parts = [jobs.mean(dim=1), jobs.amax(dim=1), observations[:, kj:kj + self.nc]]
        if self.cluster_extras:
            parts.append(tail[:, self.k * self.slot_extras:])
        codes = []
        if self.job_code is not None:
            codes.append(self.job_code(jobs).reshape(batch, -1))
        if self.phi_server is not None:
            servers = self.phi_server(observations[:, kj + self.nc:self.base_size].reshape(batch, self.m, self.ns))
            parts += [servers.mean(dim=1), servers.amax(dim=1)]
            if self.server_code is not None:
                codes.append(self.server_code(servers).reshape(batch, -1))
        return torch.cat(parts + codes, dim=1)
