"""Load a saved model (see ``docs/trust.md``).

By default nothing is unpickled: :func:`load_model` builds a fresh model from the run's
``config.yaml`` and reads only ``policy.pth`` (and ``policy.optimizer.pth`` when resuming) out
of ``model.zip`` with ``torch.load(..., weights_only=True)``, plus the plain integer counters of
its ``data`` JSON (:func:`lyra_agents.model_files.read_model_zip`). SB3's ``Algorithm.load`` runs only
with ``trust=True``.
"""

from __future__ import annotations

import os
import zipfile
from typing import Any

from stable_baselines3.common.vec_env import VecEnv

from lyra_agents.config import TrainConfig
from lyra_agents.model_build import algo_class, inference_model, make_model, resolve_device
from lyra_agents.model_files import OPTIMIZER_MEMBER, POLICY_MEMBER, ModelFileError, brief_error, read_model_zip


def load_masked_ppo(cfg: TrainConfig, path: str | os.PathLike, device: str = "cpu",
                    with_optimizer: bool = False) -> Any:
    """A :class:`lyra_agents.masked_ppo.MaskedPPO` of ``cfg`` with the weights of ``path`` (its
    ``policy.pth``, and ``policy.optimizer.pth`` ``with_optimizer``), read with
    ``torch.load(weights_only=True)`` (:func:`read_model_zip`): nothing unpickled, trusted or not."""
    from lyra_agents.masked_ppo import MaskedPPO

    members = (POLICY_MEMBER, OPTIMIZER_MEMBER) if with_optimizer else (POLICY_MEMBER,)
    counters, states = read_model_zip(path, members, device)
    model = MaskedPPO(cfg, device)
    try:
        model.load_states(states, counters)
    except (RuntimeError, ValueError, KeyError, TypeError) as err:
        raise ModelFileError(f"{path}: the weights ({', '.join(members)}) do not fit the network of the run's "
                             f"config ({brief_error(err)})") from None
    model.policy.eval()
    return model


def _has_member(path: str | os.PathLike, member: str) -> bool:
    """Whether the zip at ``path`` holds ``member`` (False for an unreadable file: the loader
    that follows names the problem)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return member in archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def load_model(cfg: TrainConfig, path: str | os.PathLike, venv: VecEnv | None = None,
               device: str | None = None, trust: bool = False) -> Any:
    """Load ``path`` with the run's algorithm. With ``venv`` (resuming) training continues on it;
    without, the model is for inference only (schedules are replaced by constants).

    Default (safe): a fresh model built from ``cfg`` (policy class, network, spaces), then the weights
    of ``policy.pth`` (and, resuming, the optimizer state of ``policy.optimizer.pth``) loaded with
    ``torch.load(weights_only=True)`` and strict key/shape checks, and the step counters of ``data``
    (:func:`read_model_zip`). ``algo: masked_ppo``: :func:`load_masked_ppo` (always the safe way).
    ``trust=True``: SB3's ``Algorithm.load``, which unpickles ``data``'s fields;
    except for an exported model (no optimizer state, which SB3's loader insists on) loaded for
    inference: its weights are all there is to trust, read the safe way.
    """
    device = resolve_device(device or cfg.device)
    if cfg.algo == "masked_ppo":
        return load_masked_ppo(cfg, path, device, with_optimizer=venv is not None)
    cls = algo_class(cfg)
    if trust and (venv is not None or _has_member(path, OPTIMIZER_MEMBER)):
        read_model_zip(path, (), device)  # the limits (sizes, nesting) hold for trusted files too
        custom = {} if venv is not None else {
            "learning_rate": 0.0, "lr_schedule": lambda _: 0.0, "clip_range": lambda _: 0.0}  # inference only
        try:
            return cls.load(str(path), env=venv, device=device, custom_objects=custom)
        except Exception as err:  # SB3's loader on a bad file: any error
            raise ModelFileError(f"{path}: cannot be loaded ({type(err).__name__}: {brief_error(err)})") from None
    members = (POLICY_MEMBER,) if venv is None else (POLICY_MEMBER, OPTIMIZER_MEMBER)
    counters, states = read_model_zip(path, members, device)
    model = inference_model(cfg, device) if venv is None else make_model(cfg, venv)
    try:
        if venv is None:
            model.policy.load_state_dict(states["policy"], strict=True)
        else:
            model.set_parameters(states, exact_match=True, device=device)
    except (RuntimeError, ValueError, KeyError, TypeError) as err:
        raise ModelFileError(f"{path}: the weights ({', '.join(members)}) do not fit the network of the run's "
                             f"config ({brief_error(err)})") from None
    model.policy.set_training_mode(False)
    for key, value in counters.items():
        setattr(model, key, value)
    return model
