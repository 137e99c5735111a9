"""Training callbacks: small classes, one hook each. The logger records a key and a value.

- :class:`ClusterMetricsCallback` (``_on_step``): every finished episode's
  ``info["final_metrics"]`` -> ``custom/*`` scalars (mean over the episodes of
  each logging period).
- :class:`TestWindowEvalCallback` (``_on_rollout_start`` once ``eval_freq`` steps
  have passed, and once at the end, after the last update): the policy and the Lyra heuristic on the same held-out test
  windows and seeds -> ``eval/jct_policy``, ``eval/jct_lyra``,
  ``eval/jct_vs_lyra`` (policy / lyra: lower is better, 1 = parity).
- :class:`ConfigTextCallback` (``_on_training_start``): the resolved config as
  TensorBoard text (``config/yaml``, ``config/hyperparameters``) and what produced the run
  (``config/provenance``: lyra_gym version and commit, env id).
- :class:`ProgressBarCallback` (``_on_step``): a tqdm bar. SB3's own
  ``progress_bar=True`` needs ``rich``, which this project does not depend on.
- Checkpoints: SB3's ``CheckpointCallback`` with ``save_vecnormalize=True``, plus the
  statistics as a plain ``.npz`` (:class:`StatsCheckpointCallback`, :func:`checkpoint_callback`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback

if TYPE_CHECKING:
    from tqdm import tqdm

from lyra_agents.evaluate import evaluate_model, evaluate_scheduler, held_out_windows, mean

CUSTOM_KEYS = {  # TensorBoard key -> final_metrics key
    "custom/jct_mean_s": "jct_mean_s",
    "custom/queue_mean_s": "queue_mean_s",
    "custom/gpu_usage_training": "gpu_usage_training",
    "custom/servers_borrowed": "servers_borrowed",
    "custom/preemptions": "preemptions",
    "custom/inference_violations": "inference_violations",
    "custom/gpu_usage_effective_overall": "gpu_usage_effective_overall",  # the headline usage
    "custom/overhead_gpu_share": "overhead_gpu_share",
    "custom/migrations": "migrations",
    "custom/reclaim_disruptions": "reclaim_disruptions",
}


class ClusterMetricsCallback(BaseCallback):
    """Per-episode cluster metrics from ``info["final_metrics"]`` as ``custom/*`` scalars."""

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", ()):
            metrics = info.get("final_metrics")
            if metrics is None:
                continue
            for key, source in CUSTOM_KEYS.items():
                if metrics.get(source) is not None:
                    self.logger.record_mean(key, float(metrics[source]))
            self.logger.record_mean("custom/jobs_unfinished", float(metrics.get("jobs_unfinished", 0)))
        return True


class TestWindowEvalCallback(BaseCallback):
    """Every ``eval_freq`` env steps (0 = only at the end of training), the deterministic policy
    on the first ``windows`` test windows beside the heuristic on the same windows and seeds.
    Evaluations happen between rollouts (the step is logged as the env steps so far), and
    the last one after the final update, so it scores exactly the saved model.

    :param env: a bare evaluation env (``lyra_agents.vec_envs.make_eval_env``).
    :param windows: how many test windows.
    :param eval_freq: env steps (all vector envs together) between evaluations.
    :param reference: the heuristic compared against (registry name), default ``lyra``.
    :param at_start: also evaluate before the first update (after an imitation warm start: what
        behaviour cloning alone gives, logged at step 0, so the curve shows what PPO adds).
    """

    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, env: Any, windows: int, eval_freq: int, reference: str = "lyra", verbose: int = 0,
                 at_start: bool = False) -> None:
        super().__init__(verbose)
        self.env = env
        self.windows = held_out_windows(env, windows)
        self.eval_freq = eval_freq
        self.reference = reference
        self._reference_jct: float | None = None
        self._last_eval = -eval_freq if at_start else 0
        self.history: list[dict[str, float]] = []

    def _on_rollout_start(self) -> None:
        # at a rollout boundary the policy is the one just updated (mid-rollout it would be
        # evaluated before the update that follows the rollout)
        if self.eval_freq and self.num_timesteps - self._last_eval >= self.eval_freq or self._last_eval < 0:
            self.evaluate()

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        if self._last_eval != self.num_timesteps:
            self.evaluate()

    def evaluate(self) -> dict[str, float]:
        self._last_eval = self.num_timesteps
        if self._reference_jct is None:  # the heuristic is deterministic on fixed windows: once
            self._reference_jct = mean(evaluate_scheduler(self.reference, self.env, self.windows), "jct_mean_s")
        rows = evaluate_model(self.model, self.env, self.windows, self.model.get_vec_normalize_env())
        result = {
            "eval/jct_policy": mean(rows, "jct_mean_s"),
            f"eval/jct_{self.reference}": self._reference_jct,
            f"eval/jct_vs_{self.reference}": mean(rows, "jct_mean_s") / self._reference_jct,
            "eval/queue_policy": mean(rows, "queue_mean_s"),
            "eval/unfinished_policy": mean(rows, "jobs_unfinished"),
        }
        for key, value in result.items():
            self.logger.record(key, value)
        self.logger.dump(self.num_timesteps)
        self.history.append({"timesteps": float(self.num_timesteps), **result})
        return result


def markdown_table(rows: Mapping[str, Any], header: str = "param") -> str:
    """``rows`` as a two-column Markdown table (how TensorBoard shows text)."""
    return f"|{header}|value|\n|-|-|\n" + "\n".join(f"|{k}|{v}|" for k, v in rows.items())


class ConfigTextCallback(BaseCallback):
    """The run's resolved config as TensorBoard text, once, at the start of training; with
    ``made_by`` (:func:`lyra_gym.provenance.provenance` and the env id) also ``config/provenance``."""

    def __init__(self, config_yaml: str, hyperparameters: dict[str, Any],
                 made_by: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.config_yaml = config_yaml
        self.hyperparameters = hyperparameters
        self.made_by = dict(made_by or {})

    def _on_training_start(self) -> None:
        exclude = ("stdout", "log", "json", "csv")
        self.logger.record("config/yaml", "```yaml\n" + self.config_yaml + "```", exclude=exclude)
        self.logger.record("config/hyperparameters", markdown_table(self.hyperparameters), exclude=exclude)
        if self.made_by:
            self.logger.record("config/provenance", markdown_table(self.made_by, "what"), exclude=exclude)
        self.logger.dump(self.num_timesteps)

    def _on_step(self) -> bool:
        return True


class ProgressBarCallback(BaseCallback):
    """A tqdm bar over the run's remaining env steps."""

    def __init__(self, total: int) -> None:
        super().__init__()
        self.total = total
        self.bar: tqdm | None = None

    def _on_training_start(self) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(total=self.total, unit="step", dynamic_ncols=True, mininterval=0.5, smoothing=0.1)

    def _on_step(self) -> bool:
        assert self.bar is not None  # made at the training start
        self.bar.update(self.training_env.num_envs)
        return True

    def _on_training_end(self) -> None:
        assert self.bar is not None
        self.bar.close()


class StatsCheckpointCallback(CheckpointCallback):
    """SB3's ``CheckpointCallback`` (model zip, statistics pickle) that also writes the statistics as
    ``model_vecnormalize_<N>_steps.npz`` (plain arrays: what :func:`lyra_agents.model_loading.load_model` users read).
    Every file is written atomically, the statistics first (:func:`lyra_agents.artifacts.save_stats`,
    :func:`~lyra_agents.artifacts.save_model`): SB3's own save writes in place, so a full disk left a
    truncated checkpoint under its final name."""

    def _on_step(self) -> bool:
        if self.n_calls % self.save_freq != 0:
            return True
        from lyra_agents.artifacts import save_model, save_stats

        vecnorm = self.model.get_vec_normalize_env()
        if self.save_vecnormalize and vecnorm is not None:
            save_stats(vecnorm, self._checkpoint_path("vecnormalize_", extension="npz"),
                       self._checkpoint_path("vecnormalize_", extension="pkl"))
        save_model(self.model, self._checkpoint_path(extension="zip"))
        return True


class RoundCheckpointCallback(BaseCallback):
    """``algo: masked_ppo``'s checkpoints: at the first rollout's start (``model_0_steps.zip``: the
    imitation start, before any update, for paired comparisons) and after an update (at the next
    rollout's start) once ``every_steps`` env steps have passed, ``model_<N>_steps.zip`` and its statistics
    ``model_vecnormalize_<N>_steps.npz`` in ``folder``, each written atomically, the statistics first."""

    def __init__(self, folder: Path, every_steps: int) -> None:
        super().__init__()
        self.folder, self.every_steps, self._last = Path(folder), every_steps, -every_steps

    def _on_rollout_start(self) -> None:
        from lyra_agents.artifacts import CHECKPOINT_PREFIX, save_model, save_stats

        steps = self.model.num_timesteps
        if steps - self._last < self.every_steps:
            return
        self._last = steps
        self.folder.mkdir(parents=True, exist_ok=True)
        stats = self.folder / f"{CHECKPOINT_PREFIX}_vecnormalize_{steps}_steps.npz"
        save_stats(self.model.get_vec_normalize_env(), stats)
        save_model(self.model, self.folder / f"{CHECKPOINT_PREFIX}_{steps}_steps.zip")

    def _on_step(self) -> bool:
        return True


def checkpoint_callback(run_dir: Path, every_steps: int, n_envs: int) -> CheckpointCallback:
    """``run_dir/checkpoints/model_<N>_steps.zip`` + ``model_vecnormalize_<N>_steps.npz`` (and SB3's
    ``.pkl``) every ``every_steps`` env steps (SB3 counts calls, each ``n_envs`` steps)."""
    from lyra_agents.artifacts import CHECKPOINT_DIR, CHECKPOINT_PREFIX

    return StatsCheckpointCallback(max(every_steps // n_envs, 1), str(run_dir / CHECKPOINT_DIR),
                                   name_prefix=CHECKPOINT_PREFIX, save_vecnormalize=True)
