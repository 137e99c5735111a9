"""train.py with a rule as the imitation expert of LyraGym/Cluster-v1 (issue 26 item 4).

The rule (found by evaluating fixed policies on suite v1's ``history`` scenario): queued jobs get
levels 4..1 by quartile of requested GPUs among the queued job slots, fewest GPUs first; every
other dimension neutral (lyra's own choice). Alone it gives JCT/lyra IQM 0.81 on ``history``.
Behaviour cloning (``bc_steps``) then imitates this rule instead of lyra, and PPO continues.

Run from the repository root, e.g.:
    python agents/configs/small_first_expert.py --config agents/configs/cluster-history-sf.yaml --no-compare
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from lyra_gym.envs import cluster_env
from lyra_gym.model.jobs import JobState

GPU_SCALE = 64  # the observation's requested_gpus scale (lyra_gym/envs/observation.py)


def small_first_action(self: cluster_env.LyraClusterEnv) -> np.ndarray:
    """Neutral levels, except queued jobs: 4 (fewest GPUs quartile) .. 1 (most GPUs quartile)."""
    action = self.codec.neutral(self.slots)
    queued = [i for i, job in enumerate(self.slots) if job.state is JobState.QUEUED]
    if queued:
        gpus = np.array([self.slots[i].spec.num_gpus / GPU_SCALE for i in queued], dtype=np.float32)
        cuts = np.quantile(gpus, [0.25, 0.5, 0.75])
        for i, g in zip(queued, gpus):
            action[i] = 4 - int(np.searchsorted(cuts, g, side="right"))
    return action


def main(argv: list[str]) -> int:
    cluster_env.LyraClusterEnv.expert_action = small_first_action  # type: ignore[method-assign]
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import train  # the repository's train.py

    return int(train.main(argv))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
