"""The counters of one run that its metrics are made of (:func:`lyra_gym.run.metrics.summarize`).

GPU-seconds are integrated at every clock advance from the GPUs in use then; event counts
(preemptions, starts, servers borrowed, ...) are bumped where they happen.
"""

from __future__ import annotations

from typing import Any

#: The names of :attr:`Accounting.counts`, in the order the metrics list them.
COUNT_NAMES = (
    "preemptions", "suspensions", "scale_ins", "scale_outs", "migrations", "starts",
    "servers_borrowed", "servers_returned", "inference_violations", "reclaim_disruptions",
    "events", "decisions",
)


class Accounting:
    """GPUs in use (``used_training`` on training servers, ``used_loaned`` on loaned ones) and
    their integrals over time (GPU-s), from ``start_time`` (s), and event ``counts``.

    :param gpus_per_inference_server: GPUs of one inference server.
    :param inference_servers: how many inference servers there are.
    """

    __slots__ = ("start_time", "gpus_per_inference_server", "inference_servers", "used_training", "used_loaned",
                 "gpu_s_training", "gpu_s_loaned", "gpu_s_loaned_capacity", "gpu_s_inference_busy", "counts",
                 "sim_wall_s")

    def __init__(self, start_time: float, gpus_per_inference_server: int, inference_servers: int) -> None:
        self.start_time = start_time
        self.gpus_per_inference_server = gpus_per_inference_server
        self.inference_servers = inference_servers
        self.used_training = 0       # GPUs allocated on training servers
        self.used_loaned = 0         # GPUs allocated on loaned servers
        self.gpu_s_training = 0.0
        self.gpu_s_loaned = 0.0
        self.gpu_s_loaned_capacity = 0.0  # GPU-s of the servers on loan, used or not
        self.gpu_s_inference_busy = 0.0   # GPU-s of the inference servers serving demand
        self.counts: dict[str, int] = dict.fromkeys(COUNT_NAMES, 0)
        self.sim_wall_s = 0.0  # wall-clock seconds the run took

    def integrate(self, dt: float, loaned: int, demand: int) -> None:
        """Add ``dt`` s at today's use: ``loaned`` servers on loan, ``demand`` inference servers needed."""
        gpus_inf = self.gpus_per_inference_server
        self.gpu_s_training += self.used_training * dt
        if loaned:  # (else both terms are 0.0: adding them changes nothing)
            self.gpu_s_loaned += self.used_loaned * dt
            self.gpu_s_loaned_capacity += loaned * gpus_inf * dt
        serving = self.inference_servers - loaned
        if demand < serving:
            serving = demand
        self.gpu_s_inference_busy += serving * gpus_inf * dt


def accounted(name: str, doc: str) -> Any:
    """A property of an owner of an ``accounting`` (:class:`Accounting`) forwarded to it
    (``engine.gpu_s_training`` ...)."""
    return property(lambda self: getattr(self.accounting, name),
                    lambda self, value: setattr(self.accounting, name, value), doc=doc)
