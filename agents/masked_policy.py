"""The network of :mod:`lyra_agents.masked_ppo`: an MLP policy over a MultiDiscrete action space
with masks (one ``masked_fill`` over all dimensions at once), and an MLP value head.
:class:`lyra_agents.slot_policy.SlotPolicy` is the other network (``extractor: slots``)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


def padding_index(nvec: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """(index, real): ``index[d, l]`` is the flat logit of level ``l`` of dimension ``d``, or the
    extra column ``sum(nvec)`` (padding); ``real`` marks the levels that exist."""
    levels, total = int(nvec.max()), int(nvec.sum())
    starts = np.concatenate([[0], np.cumsum(nvec)[:-1]])
    index = np.full((len(nvec), levels), total, dtype=np.int64)
    for d, (start, n) in enumerate(zip(starts, nvec)):
        index[d, :n] = np.arange(start, start + n)
    return torch.as_tensor(index), torch.as_tensor(index < total)


def mlp(width: int, hidden: list[int], out: int, activation: str) -> nn.Sequential:
    """``width`` inputs, a ``tanh`` or ``relu`` layer per ``hidden`` width, ``out`` linear outputs."""
    act = {"tanh": nn.Tanh, "relu": nn.ReLU}[activation]
    layers: list[nn.Module] = []
    for size in hidden:
        layers += [nn.Linear(width, size), act()]
        width = size
    return nn.Sequential(*layers, nn.Linear(width, out))


class MaskedPolicy(nn.Module):
    """An MLP policy over a MultiDiscrete action space with masks, and an MLP value head.
    (:class:`lyra_agents.slot_policy.SlotPolicy` is the other network: ``extractor: slots``;
    both give :meth:`logits` and share the rest.)

    :param obs_size: observation length.
    :param nvec: levels of each action dimension.
    :param net_arch: hidden widths (both heads).
    :param activation: ``tanh`` or ``relu``.
    """

    index: torch.Tensor
    real: torch.Tensor

    def __init__(self, obs_size: int, nvec: np.ndarray, net_arch: list[int], activation: str) -> None:
        super().__init__()
        nvec = np.asarray(nvec, dtype=np.int64)
        self.pi = mlp(obs_size, net_arch, int(nvec.sum()), activation)
        self.vf = mlp(obs_size, net_arch, 1, activation)
        index, real = padding_index(nvec)
        self.register_buffer("index", index, persistent=False)
        self.register_buffer("real", real, persistent=False)

    def logits(self, obs: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
        """Flat logits ``[batch, sum(nvec)]`` (``masks`` unused here; the slot policy reads them)."""
        return self.pi(obs)

    def log_probs(self, obs: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
        """Per-dimension log-probabilities ``[batch, dims, levels]``; -inf where masked or padding.
        ``masks``: ``[batch, sum(nvec)]`` booleans (the env's ``action_masks()``). A dimension with
        no valid value (never from these envs) is treated as all valid."""
        logits = self.logits(obs, masks)
        pad = logits.new_zeros(logits.shape[0], 1)
        padded = torch.cat([logits, pad], dim=1)[:, self.index]                    # [B, D, L]
        valid = torch.cat([masks, masks.new_zeros(masks.shape[0], 1)], dim=1)[:, self.index]
        valid = valid | (self.real & ~valid.any(dim=2, keepdim=True))
        return torch.log_softmax(padded.masked_fill(~valid, -torch.inf), dim=2)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.vf(obs).squeeze(1)

    @staticmethod
    def chosen(logp: torch.Tensor, actions: torch.Tensor, dims: torch.Tensor | None = None) -> torch.Tensor:
        """Summed log-probability of ``actions`` ``[batch, dims]`` (-inf if any value is masked);
        ``dims`` (``[batch, dims]``, 0 or 1): only the dimensions it marks."""
        picked = logp.gather(2, actions.unsqueeze(2)).squeeze(2)
        return (picked if dims is None else picked * dims).sum(dim=1)

    @staticmethod
    def entropy(logp: torch.Tensor) -> torch.Tensor:
        """Summed entropy over dimensions; masked values (p = 0, log p = -inf) count 0."""
        finite_logp = logp.masked_fill(~torch.isfinite(logp), 0.0)  # no -inf anywhere in the gradient
        return -(logp.exp() * finite_logp).sum(dim=(1, 2))
