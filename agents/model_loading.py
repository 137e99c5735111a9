"""Load a saved model (see ``docs/trust.md``).

By default nothing is unpickled: :func:`load_model` builds a fresh model from the run's
``config.yaml`` and reads only ``policy.pth`` (and ``policy.optimizer.pth`` when resuming) out
of ``model.zip`` with ``torch.load(..., weights_only=True)``, plus the plain integer counters of
its ``data`` JSON (:func:`lyra_agents.model_files.read_model_zip`). SB3's ``Algorithm.load`` runs only
with ``trust=True``.
"""

from __future__ import annotations

import os

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import VecEnv

from lyra_agents.config import TrainConfig
from lyra_agents.model_build import _inference_model, algo_class, make_model, resolve_device
from lyra_agents.model_files import OPTIMIZER_MEMBER, POLICY_MEMBER, ModelFileError, _brief, _has_member, read_model_zip


def load_model(cfg: TrainConfig, path: str | os.PathLike, venv: VecEnv | None = None,
               device: str | None = None, trust: bool = False) -> BaseAlgorithm:
    """Load ``path`` with the run's algorithm. With ``venv`` (resuming) training continues on it;
    without, the model is for inference only (schedules are replaced by constants).

    Default (safe): a fresh model built from ``cfg`` (policy class, network, spaces), then the weights
    of ``policy.pth`` (and, resuming, the optimizer state of ``policy.optimizer.pth``) loaded with
    ``torch.load(weights_only=True)`` and strict key/shape checks, and the step counters of ``data``
    (:func:`read_model_zip`). ``trust=True``: SB3's ``Algorithm.load``, which unpickles ``data``'s fields;
    except for an exported model (no optimizer state, which SB3's loader insists on) loaded for
    inference: its weights are all there is to trust, read the safe way.
    """
    cls = algo_class(cfg)
    device = resolve_device(device or cfg.device)
    if trust and (venv is not None or _has_member(path, OPTIMIZER_MEMBER)):
        read_model_zip(path, (), device)  # the limits (sizes, nesting) hold for trusted files too
        custom = {} if venv is not None else {
            "learning_rate": 0.0, "lr_schedule": lambda _: 0.0, "clip_range": lambda _: 0.0}  # inference only
        try:
            return cls.load(str(path), env=venv, device=device, custom_objects=custom)
        except Exception as err:  # noqa: BLE001 - SB3's loader on a bad file: any error
            raise ModelFileError(f"{path}: cannot be loaded ({type(err).__name__}: {_brief(err)})") from None
    members = (POLICY_MEMBER,) if venv is None else (POLICY_MEMBER, OPTIMIZER_MEMBER)
    counters, states = read_model_zip(path, members, device)
    model = _inference_model(cfg, device) if venv is None else make_model(cfg, venv)
    try:
        if venv is None:
            model.policy.load_state_dict(states["policy"], strict=True)
        else:
            model.set_parameters(states, exact_match=True, device=device)
    except (RuntimeError, ValueError, KeyError, TypeError) as err:
        raise ModelFileError(f"{path}: the weights ({', '.join(members)}) do not fit the network of the run's "
                             f"config ({_brief(err)})") from None
    model.policy.set_training_mode(False)
    for key, value in counters.items():
        setattr(model, key, value)
    return model
