"""The shipped agent's inference (``agents/pretrained/alloc-contended``: MaskablePPO, DeepSets over
K = 64 job slots, ``LyraGym/Alloc-v1`` on ``traces/contended.yaml``), loaded with the project's safe
loader (``lyra_agents.policy_scheduler.load_policy_scheduler``: nothing unpickled).

* ``AgentSubAction.time_sub_action``: one sub-action's inference: the saved observation statistics
  applied, then the masked deterministic ``model.predict``, on observations recorded from the env
  (test window 0, expert sub-actions) in ``setup``.
* ``AgentDecision.track_ms_per_decision``: wall time per engine decision point when the agent runs
  as a scheduler (``simulate``, engine included) on the first ``hours`` of test window 0, beside
  ``lyra`` on the same jobs: the difference is the agent's cost per decision.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

from ._common import ROOT

MODEL_DIR = ROOT / "agents" / "pretrained" / "alloc-contended"


@cache
def _agent():
    """(scheduler, eval env) of the shipped agent; the run config's relative cluster file is
    resolved against the repository root (asv runs from a temporary folder). Torch threads as
    training sets them (``lyra_agents.model_build.configure_torch``: half the cores, 1 to 4): the loader
    leaves torch's default, and on a busy 2-core machine a second thread makes one small forward
    pass 10-40x slower, which would measure the machine, not the code."""
    from lyra_agents.model_build import configure_torch
    from lyra_agents.policy_scheduler import load_policy_scheduler
    from lyra_agents.vec_envs import make_eval_env

    scheduler = load_policy_scheduler(MODEL_DIR, trust_model_files=False)
    config = scheduler.config
    configure_torch(config)
    if config.sim_config and not Path(config.sim_config).is_absolute():
        config = config.replace(sim_config=str(ROOT / config.sim_config))
    scheduler.config = config
    return scheduler, make_eval_env(config)


@cache
def _observations(count: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """``count`` (raw observation, masks) pairs from test window 0 under the expert's sub-actions."""
    _, env = _agent()
    obs, _ = env.reset(seed=0, options={"split": "test", "window": 0})
    pairs = []
    while len(pairs) < count:
        pairs.append((np.array(obs), env.action_masks()))
        obs, _, term, trunc, _ = env.step(env.expert_action())
        if term or trunc:
            obs, _ = env.reset(seed=0, options={"split": "test", "window": 0})
    return tuple(pairs)


class AgentSubAction:
    samples = 200  # observations cycled through
    timeout = 300
    number = 20

    def setup(self):
        self.scheduler, _ = _agent()
        self.pairs = _observations(self.samples)
        self.i = getattr(self, "i", -1) + 1

    def time_sub_action(self):
        s = self.scheduler
        obs, masks = self.pairs[self.i % len(self.pairs)]
        if s.normalizer is not None:
            obs = s.normalizer.normalize_obs(obs)
        s.model.predict(obs, deterministic=s.deterministic, action_masks=masks)


class AgentDecision:
    params = (["lyra", "model"],)
    param_names = ["policy"]
    hours = 3.0  # of test window 0 (the smoke test sets less)
    timeout = 900

    def setup_cache(self):
        from ._common import simulate

        scheduler, env = _agent()
        window = env.windows.test(0)
        end = window.start_s + self.hours * 3600.0
        jobs = [j for j in window.jobs(env.trace) if j.submit_time < end]
        out = {}
        for policy in self.params[0]:
            if policy == "model":
                scheduler.start_window(window)
            m = simulate(jobs, scheduler if policy == "model" else policy, env.sim_config, seed=window.seed,
                         profiles=env.profiles).metrics
            out[policy] = {"ms_per_decision": round(1e3 * m["sim_wall_s"] / max(m["decisions"], 1), 3),
                           "decisions": m["decisions"], "jobs": len(jobs)}
        return out

    setup_cache.timeout = 900

    def track_ms_per_decision(self, cache, policy):
        return cache[policy]["ms_per_decision"]

    track_ms_per_decision.unit = "ms"
