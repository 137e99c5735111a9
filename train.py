"""Train an RL agent on a LyraGym environment, then compare it with the Lyra heuristic.

    python train.py --quick                          # ~4 CPU-min train-evaluate-compare cycle
    python train.py --env LyraGym/Elastic-v1         # agents/configs/elastic.yaml (~1 h)
    python train.py --config my.yaml --set n_envs=4 learning_rate=1e-4 --seed 3
    python train.py --env LyraGym/Alloc-v1           # full control, BC warm start, contended cluster
    python train.py --resume runs/<run>/checkpoints/model_250000_steps.zip --set total_timesteps=3000000

A run writes ``runs/<env>__<config>__<seed>__<time>/``: ``config.yaml`` (resolved),
TensorBoard events (SB3's scalars, ``custom/*`` cluster metrics, ``eval/*`` against
Lyra, the config as text), ``progress.csv``, ``checkpoints/``, ``model.zip``,
``vecnormalize.npz`` (observation statistics, plain arrays), SB3's ``vecnormalize.pkl`` and
``compare.json`` and ``learning_curve.png`` (every evaluation; ``--plot RUN...`` draws several
runs). ``--resume`` loads weights and statistics without unpickling anything
(``--trust-model-files``: SB3's pickle path, for trusted old runs; see ``docs/trust.md``).
The saved model runs as a scheduler: ``lyra-gym compare --policies lyra,model:runs/<run>/model.zip``.

Runs from any folder: a path inside a YAML config (``trace``, ``sim_config``, ``profiles``) is
relative to that file's folder, one given by ``--set`` to the working directory, and ``config.yaml``
records each so it resolves from anywhere (:mod:`lyra_agents.config`, :mod:`lyra_gym.model.paths`).
What produced a run (lyra_gym version and commit, env id) is in ``config.yaml``'s first line,
``compare.json``'s rows and the TensorBoard text ``config/provenance``.

Every option, input file and the ``--resume`` source (a run folder or one of its checkpoints; an
exported or shipped model has no optimizer state and is refused, saying so) is checked before the
run folder is created: a refused start is one line on stderr, exit status 2, and leaves nothing
under ``runs_dir``. The config's ``name`` (from YAML, ``--set`` or a resumed run's config) must be
one safe folder-name component.

Every model, checkpoint and statistics file (``model.zip``, ``checkpoints/*.zip``, ``vecnormalize.npz``
and ``.pkl``, ``config.yaml``, ``compare.json``) is written to a hidden temporary name and renamed
once complete, the statistics before their model (:mod:`lyra_agents.artifacts`): a full disk is one
line and exit status 1, Ctrl-C or SIGTERM one line and exit status 130, and neither leaves half a file
under its final name.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import pickle
import sys
import time
import zipfile
from pathlib import Path
from typing import Any, Sequence

import torch
from stable_baselines3.common.logger import configure

from lyra_agents.callbacks import (
    ClusterMetricsCallback, ConfigTextCallback, ProgressBarCallback, TestWindowEvalCallback, checkpoint_callback,
)
from lyra_agents.config import TrainConfigError, load_train_config, resolve_config
from lyra_agents.evaluate import compare_saved, comparison_table, recorded
from lyra_agents.imitation import behaviour_clone, collect_demonstrations
from lyra_agents.artifacts import (
    CONFIG_FILE, DISK_ERRORS, MODEL_FILE, VECNORM_FILE, VECNORM_STATS_FILE, Artifacts, WriteError, find_artifacts,
    new_run_dir, save_model, save_stats, written,
)
from lyra_gym.interrupts import sigterm_as_interrupt
from lyra_agents.model_build import configure_torch, make_model
from lyra_agents.model_files import OPTIMIZER_MEMBER, POLICY_MEMBER, read_model_zip, trust_requested, warn_trusted
from lyra_agents.model_loading import load_model
from lyra_agents.vec_envs import build_training_envs, make_eval_env
from lyra_gym.provenance import provenance
from lyra_gym.outputs import OutputError, check_out_folder


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", help="LyraGym/ env id; picks agents/configs/<env>.yaml (default LyraGym/Cluster-v1)")
    parser.add_argument("--config", help="a YAML file mapping onto lyra_agents.config.TrainConfig")
    parser.add_argument("--quick", action="store_true", help="apply agents/configs/quick.yaml (~4 CPU-min on 2 cores)")
    parser.add_argument("--seed", type=int, help="run seed (model and vector envs)")
    parser.add_argument("--set", dest="overrides", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                        help="override config keys, e.g. --set n_envs=4 net_arch=[128,128]")
    parser.add_argument("--resume", metavar="PATH",
                        help="continue from a run folder, its model.zip or a checkpoint zip (its config is the base); "
                             "an exported or shipped model cannot be resumed (no optimizer state)")
    parser.add_argument("--trust-model-files", action="store_true",
                        help="--resume through SB3's pickle loading (model.zip fields, vecnormalize.pkl): "
                             "can run code from the files; only for files you trust")
    parser.add_argument("--no-compare", action="store_true", help="skip the comparison with lyra after training")
    parser.add_argument("--backend", choices=("sb3", "rllib"), default="sb3",
                        help="sb3 (default) or rllib (RLlib PPO, agents/rllib_backend.py; needs ray[rllib])")
    parser.add_argument("--plot", nargs="+", metavar="RUN",
                        help="draw the learning curves of these run folders (every seed; lyra and the expert as "
                             "lines) into learning_curves.png, or --out, and exit")
    parser.add_argument("--out", help="with --plot: the PNG to write (default learning_curves.png)")
    return parser.parse_args(argv)


def plot_runs(runs: Sequence[str | Path], out: Path, band: bool = False) -> None:
    """Draw the learning curves of ``runs`` into ``out`` (:mod:`lyra_agents.learning_curve`)."""
    from lyra_agents.learning_curve import plot_learning_curves

    plot_learning_curves([Path(r) for r in runs], out, band=band)


def plot_run(run_dir: Path) -> None:
    """``run_dir/learning_curve.png``, every evaluation of the run; a failure to draw is one line, not an error."""
    try:
        plot_runs([run_dir], run_dir / "learning_curve.png")
        print(f"learning curve: {run_dir / 'learning_curve.png'}")
    except (ImportError, OSError, ValueError) as err:
        print(f"train.py: no learning curve drawn ({err})", file=sys.stderr)


def warm_start(model, venv, cfg) -> None:
    """Behaviour cloning of the expert (``cfg.bc_*``: the env's heuristic or a rule of
    :mod:`lyra_agents.experts`; :mod:`lyra_agents.imitation`), logged as ``bc/*``."""
    t0 = time.perf_counter()
    demos = collect_demonstrations(venv, cfg.bc_steps, cfg.gamma)
    history = behaviour_clone(model, demos, cfg.bc_epochs, cfg.bc_batch_size, cfg.bc_learning_rate, cfg.seed,
                              normalizer=venv if cfg.normalize_obs else None, value_coef=cfg.vf_coef)
    for epoch, row in enumerate(history):
        for key, value in row.items():
            model.logger.record(f"bc/{key}", value)
        model.logger.dump(epoch)
    last = history[-1]
    print(f"behaviour cloning of {cfg.bc_expert}: {len(demos.obs)} expert steps ({demos.episodes} episodes), "
          f"{cfg.bc_epochs} epochs in {time.perf_counter() - t0:.0f} s; agreement {last['agreement']:.3f}, "
          f"nll {last['nll']:.3f}")


class StartError(ValueError):
    """A run that must not start (bad option, input file or resume source): one line, exit 2."""


def check_resume_source(files: Artifacts, given: str) -> None:
    """Refuse, before anything is built, a ``--resume`` model that cannot continue training: not a
    zip, not an SB3 model, or one without optimizer state (``lyra_agents.export`` output, the shipped
    ``agents/pretrained/`` agents), which runs as a scheduler but was never meant to be resumed."""
    try:
        with zipfile.ZipFile(files.model) as archive:
            names = set(archive.namelist())
    except zipfile.BadZipFile:
        raise StartError(f"--resume {given}: {files.model} is not a zip file (an SB3 model.zip or checkpoint "
                         f"was expected)") from None
    except OSError as err:
        raise StartError(f"--resume {given}: cannot read {files.model} ({err.strerror or err})") from None
    if POLICY_MEMBER not in names:
        raise StartError(f"--resume {given}: {files.model} is not an SB3 model file (no {POLICY_MEMBER} inside)")
    if OPTIMIZER_MEMBER not in names:
        raise StartError(f"--resume {given}: {files.model} holds no optimizer state ({OPTIMIZER_MEMBER}): it is an "
                         f"exported (lyra_agents.export) or shipped model, which runs as a scheduler (model:PATH) but "
                         f"cannot continue training; pass a run folder or one of its checkpoints "
                         f"(runs/<run>/checkpoints/model_N_steps.zip) instead")
    try:  # the weights and optimizer state themselves (torch.load(weights_only=True): nothing unpickled)
        read_model_zip(files.model, (POLICY_MEMBER, OPTIMIZER_MEMBER))
    except (ValueError, RuntimeError, OSError, EOFError, pickle.UnpicklingError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise StartError(f"--resume {given}: cannot read the weights in {files.model} ({first})") from None


def check_start(cfg) -> Any:
    """Everything a run reads or writes, checked before its folder exists: the device, the env
    (trace, cluster config, profiles, heuristic, reward: built once, the evaluation env returned)
    and ``runs_dir`` (not a file, writable)."""
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise StartError(f"device: {cfg.device!r} requested but CUDA is not available here (use auto or cpu)")
    try:
        check_out_folder(cfg.runs_dir, overwrite=True, what="runs_dir")
    except OutputError as err:
        raise StartError(str(err)) from None
    try:
        return make_eval_env(cfg)
    except (ValueError, KeyError, OSError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        if isinstance(err, OSError) and err.filename:
            message = f"{err.filename}: {err.strerror or err}"
        raise StartError(f"{cfg.env_id} with this config: {message}") from None


def resolve_start(args: argparse.Namespace, trust: bool) -> tuple[Any, Artifacts | None, Any, Any]:
    """The run's config, its ``--resume`` source (or None), that source's normalizer statistics file
    and the evaluation env: config defaults < YAML < ``--quick`` < ``--env``/``--seed`` < ``--set``
    (a resumed run's config is the base); every option, input file and the resume source checked
    before the run folder is created (:class:`TrainConfigError`, :class:`FileNotFoundError`,
    :class:`StartError`)."""
    resume = find_artifacts(args.resume) if args.resume else None
    if resume:
        check_resume_source(resume, args.resume)
    cfg = resolve_config(args.env, args.config, args.quick, args.overrides, args.seed,
                         base=load_train_config(resume.config) if resume else None)
    resume_stats = resume.normalizer_file(trust) if resume else None
    eval_env = check_start(cfg)
    return cfg, resume, resume_stats, eval_env


def build_model(cfg, resume: Artifacts | None, resume_stats: Any, trust: bool) -> tuple[Any, Any]:
    """The training envs and the model (seeded: SB3 seed= for the model, reset seeds seed+i for the
    envs), still before the run folder: a resumed model that does not fit the config is a
    :class:`ValueError` naming its file (the envs are closed on a ValueError or OSError)."""
    venv = build_training_envs(cfg, resume_stats, trust=trust)
    try:
        if resume is None:
            return venv, make_model(cfg, venv)
        try:
            return venv, load_model(cfg, resume.model, venv, trust=trust)
        except (RuntimeError, pickle.UnpicklingError) as err:  # torch: a state dict of other shapes
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ValueError(f"{resume.model}: does not fit the config ({first})") from None
    except (ValueError, OSError):
        venv.close()
        raise


def train_model(model, venv, eval_env, cfg, run_dir: Path, remaining: int, resumed: bool) -> TestWindowEvalCallback:
    """Train ``remaining`` more steps (evaluations, checkpoints, progress bar as configured), then
    save the model and the normalizer (plain arrays and SB3's pickle) into ``run_dir`` and close the
    envs. Returns the evaluation callback (its history)."""
    evaluator = TestWindowEvalCallback(eval_env, cfg.eval_windows, cfg.eval_freq, at_start=not resumed)
    made_by = {**provenance(), "env_id": cfg.env_id}  # TensorBoard text config/provenance (issue 27)
    callbacks = [ConfigTextCallback(cfg.to_yaml(), cfg.to_dict(), made_by), ClusterMetricsCallback(), evaluator]
    if cfg.checkpoint_freq:
        callbacks.append(checkpoint_callback(run_dir, cfg.checkpoint_freq, cfg.n_envs))
    if cfg.progress_bar:
        callbacks.append(ProgressBarCallback(max(remaining, 0)))
    try:
        if remaining > 0:
            model.learn(remaining, callback=callbacks, log_interval=cfg.log_interval, reset_num_timesteps=not resumed)
        # every file atomically, the statistics first: a model file on disk always has its statistics
        save_stats(venv, run_dir / VECNORM_STATS_FILE, run_dir / VECNORM_FILE)  # plain arrays; SB3's pickle
        save_model(model, run_dir / MODEL_FILE)
    except BaseException:
        with contextlib.suppress(Exception):  # workers stopped by the same Ctrl-C: their pipes are closed
            venv.close()
        raise
    venv.close()
    return evaluator


def compare_run(run_dir: Path, env_id: str) -> None:
    """Compare the saved model (run as a PolicyScheduler) with lyra on held-out test windows; print
    the table and write ``compare.json`` (each row with the env id, lyra_gym version and commit)."""
    results = compare_saved(run_dir)
    print(f"\nmean JCT (s) on {len(results['policy'])} held-out test windows, same seeds "
          f"(policy = saved model through the engine as a scheduler):")
    print(comparison_table(results))
    with written(run_dir / "compare.json") as tmp:
        tmp.write_text(json.dumps(recorded(results, env_id), indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Train as the options say; exit status 0, 2 for a refused start, 1 for a file that could not be
    written (disk full: one line), 130 when interrupted (Ctrl-C or SIGTERM: one line, the run folder keeps
    its whole files, each written atomically)."""
    args = parse_args(argv)
    if args.plot:
        missing = [run for run in args.plot if not Path(run).is_dir()]
        if missing:
            print(f"train.py: error: --plot: no such run folder: {missing[0]}", file=sys.stderr)
            return 2
        out = Path(args.out or "learning_curves.png")
        plot_runs(args.plot, out)  # every run its own line (seeds evaluate at different steps)
        print(f"wrote {out}")
        return 0
    try:
        with sigterm_as_interrupt():
            if args.backend == "rllib":
                from lyra_agents.rllib_backend import train_rllib
                return train_rllib(args)
            return _train(args)
    except KeyboardInterrupt:
        print("train.py: interrupted", file=sys.stderr)
        return 130


def _train(args: argparse.Namespace) -> int:
    start = time.perf_counter()

    # --- config and every input, checked before the run folder is created
    trust = trust_requested(True if args.trust_model_files else None)
    try:
        cfg, resume, resume_stats, eval_env = resolve_start(args, trust)
    except (TrainConfigError, FileNotFoundError, StartError) as err:
        print(f"train.py: error: {err}", file=sys.stderr)
        return 2
    if resume:
        if cfg.algo == "masked_ppo":
            print("train.py: error: --resume: algo masked_ppo runs cannot be resumed yet (start a new run)",
                  file=sys.stderr)
            return 2
        if trust:
            warn_trusted(resume.model)
        cfg = cfg.replace(resume_from=str(resume.model))
    threads = configure_torch(cfg)
    if cfg.algo == "masked_ppo":
        return _train_masked(args, cfg, eval_env, threads, start)

    # --- envs and model, still before the run folder
    try:
        venv, model = build_model(cfg, resume, resume_stats, trust)
    except (ValueError, OSError) as err:
        print(f"train.py: error: {'--resume ' + args.resume + ': ' if resume else ''}{err}", file=sys.stderr)
        return 2
    run_dir = new_run_dir(cfg)
    try:
        _run(args, cfg, run_dir, venv, model, eval_env, resumed=resume is not None, threads=threads, start=start)
    except KeyboardInterrupt:
        print(f"train.py: interrupted; {run_dir} keeps the files written so far (each whole: checkpoints "
              f"can be resumed)", file=sys.stderr)
        return 130
    except OSError as err:
        if not isinstance(err, WriteError) and err.errno not in DISK_ERRORS:
            raise
        why = err if isinstance(err, WriteError) else f"cannot write in {run_dir}: {err.strerror}"
        print(f"train.py: error: {why}", file=sys.stderr)
        return 1
    print(f"\nsaved {run_dir / MODEL_FILE} and {VECNORM_STATS_FILE}; total {time.perf_counter() - start:.0f} s")
    print(f"tensorboard --logdir {cfg.runs_dir}")
    return 0


def _run(args: argparse.Namespace, cfg: Any, run_dir: Path, venv: Any, model: Any, eval_env: Any, resumed: bool,
         threads: int, start: float) -> None:
    """Write the config, warm-start, train and save into ``run_dir``, then compare with lyra
    (``start``: when the command started, by ``time.perf_counter``)."""
    made_by = provenance()  # a comment, so the file still loads as the run's config (issue 27)
    with written(run_dir / CONFIG_FILE) as tmp:
        tmp.write_text(f"# lyra_gym_version: {made_by['lyra_gym_version']}, "
                       f"lyra_gym_commit: {made_by['lyra_gym_commit']}\n" + cfg.to_yaml())
    model.set_logger(configure(str(run_dir), ["tensorboard", "csv"] + (["stdout"] if cfg.verbose else [])))
    remaining = cfg.total_timesteps - model.num_timesteps
    print(f"run {run_dir}  env {cfg.env_id}  algo {cfg.algo}  {cfg.n_envs} x {type(venv.venv).__name__}  "
          f"device {model.device}  torch threads {threads}  steps {model.num_timesteps} -> {cfg.total_timesteps}")
    if cfg.bc_steps and not resumed:
        warm_start(model, venv, cfg)

    # --- train, then compare the saved model with lyra on held-out test windows
    evaluator = train_model(model, venv, eval_env, cfg, run_dir, remaining, resumed=resumed)
    train_s = time.perf_counter() - start
    if evaluator.history and evaluator.history[0]["timesteps"] == 0 and len(evaluator.history) > 1:
        first = evaluator.history[0]  # the imitation warm start alone, before any PPO update
        print(f"after behaviour cloning (step 0): jct policy {first['eval/jct_policy']:.0f} s, "
              f"ratio {first['eval/jct_vs_lyra']:.3f}")
    if evaluator.history:
        last = evaluator.history[-1]
        print(f"trained {model.num_timesteps} steps in {train_s:.0f} s; last eval on {len(evaluator.windows)} "
              f"test windows: jct policy {last['eval/jct_policy']:.0f} s, lyra {last['eval/jct_lyra']:.0f} s, "
              f"ratio {last['eval/jct_vs_lyra']:.3f}")
    if args.quick:
        print("--quick is a smoke run of the whole cycle, not a learning result: it should end near lyra "
              "(JCT/lyra about 1.0-1.06 on 2 test windows; docs/training.md, 'How long a run takes')")
    plot_run(run_dir)
    if not args.no_compare:
        compare_run(run_dir, cfg.env_id)


def _train_masked(args: argparse.Namespace, cfg: Any, eval_env: Any, threads: int, start: float) -> int:
    """``algo: masked_ppo`` (:mod:`lyra_agents.masked_ppo`): the same run folder, logger, evaluations,
    checkpoints, atomic saves and comparison as the SB3 path; exit status as :func:`main`."""
    from lyra_agents.callbacks import RoundCheckpointCallback
    from lyra_agents.artifacts import CHECKPOINT_DIR
    from lyra_agents.masked_ppo import MaskedPPO
    from lyra_agents.model_build import resolve_device
    from stable_baselines3.common.callbacks import CallbackList

    model = MaskedPPO(cfg, resolve_device(cfg.device))
    run_dir = new_run_dir(cfg)
    try:
        made_by = provenance()
        with written(run_dir / CONFIG_FILE) as tmp:
            tmp.write_text(f"# lyra_gym_version: {made_by['lyra_gym_version']}, "
                           f"lyra_gym_commit: {made_by['lyra_gym_commit']}\n" + cfg.to_yaml())
        model.logger = configure(str(run_dir), ["tensorboard", "csv"] + (["stdout"] if cfg.verbose else []))
        print(f"run {run_dir}  env {cfg.env_id}  algo masked_ppo  {cfg.n_envs} groups x {cfg.group_size}  "
              f"device {model.device}  torch threads {threads}  steps 0 -> {cfg.total_timesteps}")
        if cfg.bc_steps:
            t0, epochs = time.perf_counter(), itertools.count()

            def report(rows: list[dict[str, float]]) -> None:  # logged and printed as each round ends
                for row in rows:
                    for key, value in row.items():
                        model.logger.record(f"bc/{key}", value)
                    model.logger.dump(next(epochs))
                if cfg.dagger_rounds:
                    print(f"  round {int(rows[-1]['round'])}: {int(rows[-1]['steps'])} states, agreement "
                          f"{rows[-1]['agreement']:.3f} ({time.perf_counter() - t0:.0f} s)", flush=True)

            history = model.behaviour_clone(report)
            dagger = f" ({cfg.dagger_rounds} DAgger rounds)" if cfg.dagger_rounds else ""
            print(f"behaviour cloning of {cfg.bc_expert}: {int(history[-1]['steps'])} expert steps{dagger}, "
                  f"{cfg.bc_epochs} epochs in {time.perf_counter() - t0:.0f} s; "
                  f"agreement {history[-1]['agreement']:.3f}, nll {history[-1]['nll']:.3f}")
        evaluator = TestWindowEvalCallback(eval_env, cfg.eval_windows, cfg.eval_freq, at_start=True)
        callbacks = [ConfigTextCallback(cfg.to_yaml(), cfg.to_dict(), {**made_by, "env_id": cfg.env_id}),
                     ClusterMetricsCallback(), evaluator]
        if cfg.checkpoint_freq:
            callbacks.append(RoundCheckpointCallback(run_dir / CHECKPOINT_DIR, cfg.checkpoint_freq))
        try:
            model.learn(cfg.total_timesteps, callback=CallbackList(callbacks))
            save_stats(model.get_vec_normalize_env(), run_dir / VECNORM_STATS_FILE)
            save_model(model, run_dir / MODEL_FILE)
        finally:
            model.close()
        cpu = sum(model.timing.values())
        print(f"trained {model.num_timesteps} steps in {time.perf_counter() - start:.0f} s; process time: "
              + ", ".join(f"{k} {v:.0f} s ({v / max(cpu, 1e-9):.0%})" for k, v in model.timing.items()))
        first, last = evaluator.history[0], evaluator.history[-1]
        print(f"eval on {len(evaluator.windows)} test windows: jct/lyra {first['eval/jct_vs_lyra']:.3f} at step 0, "
              f"{last['eval/jct_vs_lyra']:.3f} at step {int(last['timesteps'])}")
        plot_run(run_dir)
        if not args.no_compare:
            compare_run(run_dir, cfg.env_id)
    except KeyboardInterrupt:
        print(f"train.py: interrupted; {run_dir} keeps the files written so far", file=sys.stderr)
        return 130
    except OSError as err:
        if not isinstance(err, WriteError) and err.errno not in DISK_ERRORS:
            raise
        print(f"train.py: error: {err if isinstance(err, WriteError) else err.strerror}", file=sys.stderr)
        return 1
    print(f"\nsaved {run_dir / MODEL_FILE} and {VECNORM_STATS_FILE}; tensorboard --logdir {cfg.runs_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
