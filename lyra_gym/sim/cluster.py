"""Servers of the two pools and their mutable state inside the engine."""

from __future__ import annotations

import enum

from lyra_gym.model.config import ClusterConfig


class Pool(enum.Enum):
    TRAINING = "training"
    INFERENCE = "inference"


class Server:
    """One server. ``used`` GPUs are held by training jobs; ``jobs`` maps job index -> GPUs here.

    An inference server is either ``loaned`` (usable by training) or not; among
    the non-loaned ones the inference demand decides how many are serving, the
    rest are idle and loanable (servers of one pool are interchangeable, so
    serving vs idle is a count, not an identity).
    """

    __slots__ = ("id", "pool", "gpu_type", "num_gpus", "used", "jobs", "loaned")

    def __init__(self, server_id: int, pool: Pool, gpu_type: str, num_gpus: int) -> None:
        self.id = server_id
        self.pool = pool
        self.gpu_type = gpu_type
        self.num_gpus = num_gpus
        self.used = 0
        self.jobs: dict[int, int] = {}
        self.loaned = False

    @property
    def usable(self) -> bool:
        """May training jobs hold GPUs here now?"""
        return self.pool is Pool.TRAINING or self.loaned

    @property
    def free(self) -> int:
        return self.num_gpus - self.used if self.usable else 0


def build_servers(cluster: ClusterConfig) -> list[Server]:
    """Training servers first (ids 0..), then inference servers; ids are list indices."""
    servers: list[Server] = []
    for group in cluster.training:
        for _ in range(group.count):
            servers.append(Server(len(servers), Pool.TRAINING, group.gpu_type, group.gpus_per_server))
    group = cluster.inference
    for _ in range(group.count):
        servers.append(Server(len(servers), Pool.INFERENCE, group.gpu_type, group.gpus_per_server))
    return servers
