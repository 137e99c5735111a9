"""Every knob of a training run in one dataclass, loaded from YAML and overridable as ``key=value``.

Precedence, lowest first: the dataclass defaults, a YAML file (``agents/configs/<env>.yaml``),
the ``--quick`` overlay (``agents/configs/quick.yaml``, a partial file), then command-line
``--set key=value`` overrides. Unknown keys are errors that name the key, the file, and the
closest known key. A run writes its resolved config as ``config.yaml``; :func:`load_train_config`
reads it back unchanged.

Paths (:data:`PATH_FIELDS`): one read from a YAML file is relative to that file's folder
(:mod:`lyra_gym.model.paths`, with the working directory and then the shipped ``traces/`` as
fallbacks for older files); one given by ``--set`` is relative to the working directory.
:meth:`TrainConfig.to_yaml` writes each so that it resolves from any file: absolute, or a shipped
data file by its shipped name (``traces/contended.yaml``; ``bc_rule``: ``pretrained/NAME``, read
so too). ``runs_dir`` is an output folder: relative to the working directory, wherever it is written.

Frequencies (``eval_freq``, ``checkpoint_freq``) count env steps over all vector envs, like ``total_timesteps``.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import gymnasium as gym
import yaml

import lyra_gym
from lyra_agents.experts import expert_problem
from lyra_agents.shipped import agent_path_beside, portable_agent_path
from lyra_agents.suite import get_suite
from lyra_gym.envs import ALLOC_ENV_ID
from lyra_gym.errors import LyraGymError
from lyra_gym.model.config import MAX_CONFIG_BYTES
from lyra_gym.model.paths import portable, resolve_beside
from lyra_gym.model.userfiles import ALIAS_PROBLEM, YamlProblem, read_user_file, shown, strict_yaml
from lyra_gym.workloads.tracegen import PRESETS

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
QUICK_OVERLAY = CONFIG_DIR / "quick.yaml"

ALGOS = ("maskable_ppo", "ppo", "masked_ppo")
BASELINES = ("group", "value", "vine")
VINE_ROLLOUTS, VINE_BRANCHES = ("guide", "policy"), ("draw", "dimension")
VEC_ENVS, EXTRACTORS = ("auto", "dummy", "subproc"), ("mlp", "deepsets", "slots")
ACTIVATIONS = ("tanh", "relu")
LR_SCHEDULES = ("constant", "linear")
DEVICE_PATTERN = re.compile(r"auto|cpu|cuda(:[0-9]+)?|mps")
MAX_NAME_LENGTH = 100
#: Most environment steps of a run (10 billion: months at the measured 200-400 steps/s).
MAX_TOTAL_TIMESTEPS = 10**10
#: Most hidden layers in ``net_arch``, and the widest layer of ``net_arch`` and the deep-sets encoder
#: (``deepsets_hidden``, ``deepsets_slot_dim``), units: a wider one is a typo that would fail inside torch (memory).
MAX_NET_LAYERS = 16
MAX_NET_WIDTH = 8192
#: Most vector envs (each may be a worker process).
MAX_N_ENVS = 1024


def run_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be part of a run folder's name, or None. It must be one path component:
    non-empty, at most :data:`MAX_NAME_LENGTH` characters, no ``/`` or ``\\``, no control
    characters, not ``.`` or ``..``, no leading or trailing space (``name: x/../../escaped`` once
    wrote outside ``runs_dir``)."""
    if not isinstance(name, str) or not name:
        return f"must be a non-empty text (one folder-name component), got {shown(name)}"
    if "/" in name or "\\" in name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        return f"must be a single folder-name component without '/', '\\' or control characters, got {shown(name)}"
    if name in (".", "..") or name != name.strip():
        return f"must be a plain folder-name component (not '.', '..', no leading or trailing space), got {shown(name)}"
    if len(name) > MAX_NAME_LENGTH:
        return f"must be at most {MAX_NAME_LENGTH} characters, got {len(name)}"
    return None


class TrainConfigError(LyraGymError):
    """A malformed training config or override; the message names the key (and file)."""


@dataclass
class TrainConfig:
    """A training run. Field groups: experiment, environment (``gymnasium.make`` keywords),
    vector envs and normalisation, algorithm (PPO hyperparameters), network, logging and
    evaluation, compute. Units are in the comments."""

    # --- experiment
    name: str = "cluster"                 # config name, the second part of the run directory
    env_id: str = "LyraGym/Cluster-v1"    # any registered LyraGym/ id
    seed: int = 1                         # model seed (SB3 seed=) and vector env seeds seed..seed+n_envs-1
    total_timesteps: int = 1_500_000      # env steps over all vector envs; on --resume, the total to reach
    runs_dir: str = "runs"                # runs/<env>__<name>__<seed>__<time>/
    # --- environment: keywords of gymnasium.make(env_id, ...) (see LyraClusterEnv's Arguments)
    trace: str = "env-14d"                # trace preset name or CSV path
    trace_seed: int = 0
    sim_config: str | None = None         # SimConfig YAML/TOML path; None = defaults
    profiles: str | None = None           # profile JSON path; None = built-in
    window_s: float = 43_200.0            # episode window, s
    test_fraction: float = 0.2            # last share of the trace kept for test windows
    reward: Any = "jct"                   # reward name or {name: weight}
    reward_scale_s: float = 3600.0        # seconds per reward unit
    num_job_slots: int = 32               # K
    num_server_slots: int = 16            # M
    borrow_levels: int = 4                # B
    heuristic: str = "lyra"               # guided heuristic, registry name
    max_steps: int | None = None          # decision points before truncation (Alloc: sub-actions); None: the env's
    worker_levels: int = 10               # L, worker-count options per job (LyraGym/Alloc-v1 only)
    warmup_s: float = 0.0                 # warm start: s of jobs before each window run by the heuristic first
    observation_extras: bool = False      # append lyra_gym.envs.learner_extras (duration history, queue mix)
    scenarios: list[str] = field(default_factory=list)  # train env i on scenarios[i % len] of `suite` (a
    #   generalist: each scenario's trace, cluster config, knowledge, window and warm start); [] = the fields above
    suite: str = "v1"                     # the suite whose scenario names `scenarios` lists
    # --- vector envs and normalisation
    n_envs: int = 8
    vec_env: str = "auto"                 # auto (subproc when it pays) | dummy | subproc (lyra_agents.members)
    normalize_obs: bool = True            # VecNormalize running mean/std of observations (saved)
    normalize_reward: bool = True         # VecNormalize return scaling (training only)
    tie_slot_stats: bool = True           # one mean/std per feature shared by all job (server) slots
    clip_obs: float = 10.0
    # --- algorithm (sb3-contrib MaskablePPO, SB3 PPO, or masked_ppo: agents/masked_ppo.py)
    algo: str = "maskable_ppo"
    learning_rate: float = 3e-4
    lr_schedule: str = "constant"         # constant | linear (to 0 at the end)
    n_steps: int = 256                    # rollout steps per env per update
    batch_size: int = 512
    n_epochs: int = 5
    gamma: float = 0.995                  # per decision point
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    ent_coef: float = 0.003               # entropy is summed over all action dimensions
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float | None = 0.05        # stop an update's epochs early past this KL (None = never)
    # --- masked_ppo only (agents/masked_ppo.py): gamma = 1 returns, grouped rollouts, curriculum
    group_size: int = 4                   # members per group: same reset seed, same arrivals
    baseline: str = "group"               # group (mean return-to-go at equal time) | value (value head) | vine
    vine_states: int = 8                  # baseline vine: branch states per slot per update (group_size draws each)
    vine_rollout: str = "guide"           # baseline vine: who plays a branch to its end (guide | policy: its argmax)
    vine_branch: str = "draw"             # baseline vine: branch actions (draw: the policy's | dimension: one moved)
    expert_coef: float = 0.0              # baseline vine: weight of the expert's NLL on the trunks' states (0: off)
    trace_seeds: list[int] = field(default_factory=list)  # trace seeds cycled over updates ([] = [trace_seed])
    curriculum_start_s: float = 0.0       # episode cap, simulated s after the start (0 = whole episodes)
    curriculum_growth_s: float = 0.0      # s added to the cap per update
    expert: str | None = None             # a heuristic as guide and BC expert: sets heuristic and bc_expert
    # --- imitation warm start (agents/imitation.py): behaviour cloning of the env's expert before PPO
    bc_steps: int = 0                     # expert transitions to collect (0 = no warm start)
    bc_epochs: int = 10                   # passes over them
    bc_batch_size: int = 256
    bc_learning_rate: float = 1e-3
    bc_smoothing: float = 0.0             # masked_ppo: label smoothing over each dimension's valid values
    bc_expert: str = "heuristic"          # whose actions: heuristic (the env's own) | small_first | srpt_x5 | rule
    bc_rule: str | None = None            # bc_expert rule: a preemption rule's folder or rule.json (agents/experts.py)
    dagger_rounds: int = 0                # masked_ppo: DAgger rounds after cloning (clone drives, expert labels)
    # --- network
    net_arch: list[int] = field(default_factory=lambda: [256, 256])  # policy and value MLPs
    activation: str = "tanh"
    extractor: str = "mlp"                # mlp | deepsets (SB3: extractors.py) | slots (masked_ppo: slot_policy.py)
    deepsets_hidden: int = 64             # width of the per-slot encoder phi (slots: of the shared slot head)
    slot_compare: bool = False            # slots: PREEMPT logits against the best running slot's
    deepsets_slot_dim: int = 16           # per-slot codes appended in slot order (0 = invariant only)
    # --- logging, evaluation, checkpoints
    eval_freq: int = 100_000              # env steps between evaluations on test windows (0 = only at the end)
    eval_windows: int = 3                 # test windows per evaluation (paired with lyra)
    final_windows: int = 5                # test windows of the comparison table after training
    checkpoint_freq: int = 250_000        # env steps between checkpoints (0 = none)
    log_interval: int = 1                 # PPO updates between SB3 log dumps
    progress_bar: bool = True
    verbose: int = 0                      # SB3 verbosity (1 also prints SB3's stdout table)
    # --- compute
    device: str = "auto"                  # auto = cuda when available, else cpu
    torch_threads: int = 0                # 0 = auto: half the cores, 1 to 4
    torch_validate_args: bool = False     # torch.distributions argument checks (off: 210 -> 350 steps/s measured)
    resume_from: str | None = None        # set by --resume; recorded for provenance

    # ------------------------------------------------------------------ validation
    def __post_init__(self) -> None:
        self.env_id = lyra_gym.current_env_id(self.env_id)  # a config saved under a -v0 id
        if self.expert is not None:  # one name for the guide and the imitation expert
            self.heuristic, self.bc_expert = self.expert, "heuristic"
        self.validate()

    def validate(self) -> None:
        """Raise :class:`TrainConfigError` naming the first invalid field. Every number is checked
        finite and in range here (``--set learning_rate=nan`` fails now, not inside torch later),
        and ``name`` must be one safe path component (it becomes part of the run folder's name).
        The checks are :data:`_RULES`, in order."""
        for rule in _RULES:
            problem = rule(self)
            if problem:
                raise TrainConfigError(problem)

    # ------------------------------------------------------------------ conversions
    def env_kwargs(self) -> dict[str, Any]:
        """Keywords for ``gymnasium.make(self.env_id, ...)``."""
        return {
            "trace": self.trace, "trace_seed": self.trace_seed, "config": self.sim_config,
            "profiles": self.profiles, "window_s": self.window_s, "test_fraction": self.test_fraction,
            "reward": self.reward, "reward_scale_s": self.reward_scale_s, "num_job_slots": self.num_job_slots,
            "num_server_slots": self.num_server_slots, "borrow_levels": self.borrow_levels,
            "heuristic": self.heuristic, "warmup_s": self.warmup_s,
            **({"max_steps": self.max_steps} if self.max_steps is not None else {}),  # (else the env's default)
            **({"worker_levels": self.worker_levels} if self.env_id == ALLOC_ENV_ID else {}),
        }

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        """The config as a file records it: every path of :data:`PATH_FIELDS` (and ``resume_from``)
        :func:`~lyra_gym.model.paths.portable`, so it resolves from wherever the file is read."""
        paths = {key: (portable_agent_path if key == "bc_rule" else portable)(value)
                 for key in (*PATH_FIELDS, "resume_from") if is_path_value(key, value := getattr(self, key))}
        return yaml.safe_dump({**self.to_dict(), **paths}, sort_keys=False)

    def replace(self, **changes: Any) -> "TrainConfig":
        return dataclasses.replace(self, **changes)

    def updated(self, data: Mapping[str, Any], source: str = "overrides") -> "TrainConfig":
        """A copy with ``data`` applied (keys checked, values converted to the fields' types)."""
        _check_keys(data, source)
        changes = {key: _coerce(key, value, source) for key, value in data.items()}
        try:
            return dataclasses.replace(self, **changes)
        except TrainConfigError as err:
            raise TrainConfigError(f"{source}: {err}") from None


# ---------------------------------------------------------------------- helpers
#: The fields that hold input file paths (``trace`` only when it is not a preset name).
PATH_FIELDS = ("trace", "sim_config", "profiles", "suite", "bc_rule")
_NAMED_SUITES = ("v0", "v1", "v1.1")  # suite names that are not paths (lyra_agents.suite.SUITE_FILES and v0)
_NULL_WORDS = ("null", "none", "~")


def is_path_value(key: str, value: Any) -> bool:
    """Is ``value`` of field ``key`` a file path (not a preset name, not a null word)?"""
    return (isinstance(value, str) and value.strip().lower() not in ("", *_NULL_WORDS)
            and not (key == "trace" and value in PRESETS) and not (key == "suite" and value in _NAMED_SUITES))


def _paths_beside(data: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    """``data`` (a YAML file's keys) with each path of :data:`PATH_FIELDS` resolved beside the
    file (:func:`lyra_gym.model.paths.resolve_beside`)."""
    beside = {"bc_rule": agent_path_beside}  # pretrained/NAME stays a shipped agent's name
    return {**data, **{key: beside.get(key, resolve_beside)(data[key], folder) for key in PATH_FIELDS
                       if key in data and is_path_value(key, data[key])}}


_FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}
_HINTS = typing.get_type_hints(TrainConfig)
_FLOAT_FIELDS = tuple(k for k, h in _HINTS.items() if h is float or float in typing.get_args(h))


def _check_keys(data: Mapping[str, Any], source: str) -> None:
    if not isinstance(data, Mapping):
        raise TrainConfigError(f"{source}: expected a mapping of config keys, got {type(data).__name__}")
    for key in data:
        if key not in _FIELDS:
            close = difflib.get_close_matches(str(key), list(_FIELDS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TrainConfigError(f"{source}: unknown key {shown(key)}{hint} (known keys: {', '.join(_FIELDS)})")


def _coerce(key: str, value: Any, source: str) -> Any:
    """Convert ``value`` (parsed YAML, or a ``--set`` string) to the type of field ``key``."""
    hint = _HINTS[key]
    if hint is Any:  # free-form (reward: a name or {name: weight})
        return _yaml_value(value, f"{source}: {key}") if isinstance(value, str) else value
    if hint == list[str] and isinstance(value, str) and not value.strip().startswith("["):
        return _to_str_list(value)  # "a,b" (or "" for none), not YAML
    args = typing.get_args(hint)
    optional = type(None) in args
    kind = next(a for a in args if a is not type(None)) if optional else (typing.get_origin(hint) or hint)
    value = _parsed_text(value, optional, kind, f"{source}: {key}")
    if value is None:
        if optional:
            return None
        raise TrainConfigError(f"{source}: {key}: may not be null")
    expected = getattr(hint, "__name__", None) or str(hint)
    try:
        converted = _CONVERTERS.get(hint, _CONVERTERS.get(kind, _unconvertible))(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
        converted = _INVALID
    if converted is _INVALID:
        raise TrainConfigError(f"{source}: {key}: expected {expected}, got {shown(value)}")
    return converted


def _yaml_value(text: str, where: str) -> Any:
    """A ``--set`` value parsed as YAML by the training files' rules (:func:`read_yaml`; no aliases:
    ``*name`` is an error naming ``where``); text YAML cannot parse stays text."""
    try:
        return strict_yaml(text, yaml11_bools=True)
    except YamlProblem as err:
        if err.problem == ALIAS_PROBLEM:
            raise TrainConfigError(f"{where}: {ALIAS_PROBLEM}") from None
    return text


def _parsed_text(value: Any, optional: bool, kind: Any, where: str) -> Any:
    """A ``--set`` string as YAML (kept as text where unparsable, or for a text field); the null
    words (``null``, ``none``, ``~``, empty) are None for an optional field. Other values as given."""
    if isinstance(value, str) and optional and value.strip().lower() in (*_NULL_WORDS, ""):
        return None
    if isinstance(value, str) and kind is not str:
        return _yaml_value(value, where)
    return value


_INVALID = object()  # a converter's answer for a value of the wrong type


def _is_number(value: Any) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def _to_int(value: Any) -> Any:
    """A whole number (``3.0``, ``"1e3"`` included), not a bool, not text with a leading zero
    (``010``: octal 8 in YAML 1.1)."""
    if isinstance(value, str) and re.fullmatch(r"\s*[-+]?0[0-9_]+\s*", value):
        return _INVALID
    number = float(value) if _is_number(value) else None
    return int(number) if number is not None and number.is_integer() else _INVALID


def _to_float(value: Any) -> Any:
    return float(value) if _is_number(value) else _INVALID


def _to_int_list(value: Any) -> Any:
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else _INVALID


def _to_str_list(value: Any) -> Any:
    if isinstance(value, str):  # --set scenarios=a,b (YAML reads it as one text)
        value = [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else _INVALID


def _unconvertible(value: Any) -> Any:
    return _INVALID


#: Field type -> converter of a parsed value (``_INVALID``, TypeError or ValueError: the wrong type).
_CONVERTERS: dict[Any, Callable[[Any], Any]] = {
    bool: lambda v: v if isinstance(v, bool) else _INVALID, int: _to_int, float: _to_float, list: _to_int_list,
    list[str]: _to_str_list, str: str}


# ---------------------------------------------------------------------- validation rules
# Each rule returns the message naming the first invalid field of its group, or None;
# TrainConfig.validate reports the first message of _RULES, in this order.
_Rule = Callable[[TrainConfig], str | None]


def _check_name(cfg: TrainConfig) -> str | None:
    problem = run_name_problem(cfg.name)
    return f"name: {problem}" if problem else None


def _check_runs_dir(cfg: TrainConfig) -> str | None:
    if not isinstance(cfg.runs_dir, str) or not cfg.runs_dir.strip() or "\0" in cfg.runs_dir:
        return f"runs_dir: must be a folder path, got {shown(cfg.runs_dir)}"
    return None


def _check_device(cfg: TrainConfig) -> str | None:
    if not DEVICE_PATTERN.fullmatch(str(cfg.device)):
        return f"device: must be auto, cpu, cuda, cuda:N or mps, got {shown(cfg.device)}"
    return None


def _check_finite(cfg: TrainConfig) -> str | None:
    for key in _FLOAT_FIELDS:
        value = getattr(cfg, key)
        if value is not None and not math.isfinite(value):
            return f"{key}: must be a finite number, got {shown(value)}"
    return None


def _bound(keys: tuple[str, ...], fails: Callable[[Any], bool], requirement: str) -> _Rule:
    """A rule: the first of ``keys`` whose value ``fails`` must be ``requirement`` (``">= 0"``, ...)."""
    def check(cfg: TrainConfig) -> str | None:
        for key in keys:
            if fails(getattr(cfg, key)):
                return f"{key}: must be {requirement}, got {shown(getattr(cfg, key))}"
        return None
    return check


def _check_seed_range(cfg: TrainConfig) -> str | None:
    if cfg.seed + max(cfg.n_envs, 1) > 2 ** 32:  # numpy seeds and the vector envs' seed .. seed + n_envs - 1
        return f"seed: must be at most 2**32 - n_envs = {2 ** 32 - max(cfg.n_envs, 1)}, got {cfg.seed}"
    return None


def _check_test_fraction(cfg: TrainConfig) -> str | None:
    if not 0 < cfg.test_fraction < 1:
        return f"test_fraction: must lie in (0, 1), got {cfg.test_fraction}"
    return None


def _check_choices(cfg: TrainConfig) -> str | None:
    choices = {"algo": ALGOS, "vec_env": VEC_ENVS, "extractor": EXTRACTORS, "activation": ACTIVATIONS, "lr_schedule":
               LR_SCHEDULES, "baseline": BASELINES, "vine_rollout": VINE_ROLLOUTS, "vine_branch": VINE_BRANCHES}
    for key, allowed in choices.items():
        if getattr(cfg, key) not in allowed:
            return f"{key}: must be one of {', '.join(allowed)}, got {shown(getattr(cfg, key))}"
    return None


def _check_heuristic(cfg: TrainConfig) -> str | None:
    if cfg.expert is not None and (not cfg.expert or ":" in cfg.expert):
        return f"expert: must be a registered heuristic name, got {shown(cfg.expert)}"
    if ":" in str(cfg.heuristic):  # a loader name (model:PATH, ...) would load files from a run's config
        return f"heuristic: must be a registered heuristic name, got {shown(cfg.heuristic)}"
    return None


def _check_env_id(cfg: TrainConfig) -> str | None:
    if not cfg.env_id.startswith("LyraGym/"):
        return f"env_id: must be a LyraGym/ id, got {shown(cfg.env_id)}"
    if cfg.env_id not in gym.registry:
        known = ", ".join(k for k in gym.registry if k.startswith("LyraGym/"))
        return f"env_id: {shown(cfg.env_id)} is not a registered id (known: {known})"
    return None


def _check_expert(cfg: TrainConfig) -> str | None:
    return expert_problem(cfg.bc_expert, cfg.bc_rule, cfg.env_id)


def _check_scenarios(cfg: TrainConfig) -> str | None:
    if not cfg.scenarios:
        return None
    try:
        suite = get_suite(cfg.suite)
    except ValueError as err:  # SuiteError included: names the suite or its file
        return f"suite: {err}"
    for name in cfg.scenarios:
        try:
            kwargs = suite.get(name).env_kwargs()
        except ValueError as err:
            return f"scenarios: {err}"
        if kwargs is None:
            return (f"scenarios: {shown(name)} redraws its trace preset's elastic share, which an env cannot "
                    "express (train on the others; the benchmark still evaluates it)")
    return None


def _check_masked_ppo(cfg: TrainConfig) -> str | None:
    vine_only = ("expert_coef", cfg.expert_coef > 0), ("vine_branch", cfg.vine_branch != "draw")
    for key in (key for key, used in vine_only if used and cfg.baseline != "vine"):  # the first one
        return f"{key}: only with baseline: vine (its trunks and branches), got {cfg.baseline!r}"
    if cfg.algo == "masked_ppo" and cfg.baseline == "vine" and cfg.vec_env == "subproc":
        return "vec_env: subproc (env processes) serves baseline group or value; the vine forks its envs here"
    if cfg.baseline in ("group", "vine") and cfg.group_size < 2:
        return f"group_size: baseline {cfg.baseline!r} needs at least 2, got {cfg.group_size} (or baseline: value)"
    if any(seed < 0 for seed in cfg.trace_seeds):
        return f"trace_seeds: must be seeds >= 0, got {shown(cfg.trace_seeds)}"
    extractor_algo = {"slots": "masked_ppo", "deepsets": "maskable_ppo or ppo"}.get(cfg.extractor)
    if extractor_algo and (cfg.algo == "masked_ppo") != (cfg.extractor == "slots"):
        return f"extractor: {cfg.extractor} is for algo {extractor_algo}, got {cfg.algo}"
    if cfg.extractor == "slots" and cfg.env_id not in ("LyraGym/Cluster-v2", "LyraGym/Elastic-v2"):
        return f"extractor: slots reads -v2 job slots (LyraGym/Cluster-v2 or Elastic-v2), not {cfg.env_id}"
    if cfg.slot_compare and cfg.extractor != "slots":
        return f"slot_compare: compares job slots of extractor: slots, got extractor: {cfg.extractor}"
    if cfg.dagger_rounds and (cfg.algo != "masked_ppo" or not cfg.bc_steps):
        return (f"dagger_rounds: follow behaviour cloning (bc_steps > 0) of algo masked_ppo, got algo "
                f"{cfg.algo}, bc_steps {cfg.bc_steps}")
    return None


def _check_rollout(cfg: TrainConfig) -> str | None:
    if cfg.n_steps * cfg.n_envs < 2:
        return "n_steps * n_envs: must be >= 2 (PPO advantage normalisation)"
    return None


def _check_discounts(cfg: TrainConfig) -> str | None:
    if not 0 < cfg.gamma <= 1 or not 0 <= cfg.gae_lambda <= 1:
        return f"gamma/gae_lambda: must lie in (0, 1] / [0, 1], got {cfg.gamma}/{cfg.gae_lambda}"
    return None


def _check_net_arch(cfg: TrainConfig) -> str | None:
    arch = cfg.net_arch
    if not arch or any(int(w) < 1 for w in arch):
        return f"net_arch: must be a non-empty list of widths >= 1, got {shown(arch)}"
    if len(arch) > MAX_NET_LAYERS or any(int(w) > MAX_NET_WIDTH for w in arch):
        return (f"net_arch: at most {MAX_NET_LAYERS} layers (MAX_NET_LAYERS) of at most {MAX_NET_WIDTH} "
                f"units (MAX_NET_WIDTH) each, got {shown(arch)}")
    return None


#: TrainConfig.validate's checks, in the order their messages take precedence.
_RULES: tuple[_Rule, ...] = (
    _check_name, _check_runs_dir, _check_device, _check_finite,
    _bound(("seed", "trace_seed"), lambda v: v < 0, ">= 0"),
    _check_seed_range,
    _bound(("window_s", "reward_scale_s", "clip_obs", "clip_range", "max_grad_norm"), lambda v: v <= 0, "> 0"),
    _bound(("warmup_s", "ent_coef", "vf_coef", "curriculum_start_s", "curriculum_growth_s", "expert_coef"),
           lambda v: v < 0, ">= 0"),
    _check_test_fraction, _bound(("target_kl",), lambda v: v is not None and v <= 0, "> 0 or null"),
    _check_choices, _check_heuristic, _check_env_id,
    _bound(("total_timesteps", "n_envs", "n_steps", "batch_size", "n_epochs", "num_job_slots",
            "borrow_levels", "eval_windows", "final_windows", "deepsets_hidden",
            "worker_levels", "bc_epochs", "bc_batch_size", "group_size", "vine_states"), lambda v: v < 1, ">= 1"),
    _bound(("max_steps",), lambda v: v is not None and v < 1, ">= 1 (or null: the env's default)"),
    _bound(("num_server_slots", "eval_freq", "checkpoint_freq", "torch_threads", "deepsets_slot_dim",
            "bc_steps", "dagger_rounds"), lambda v: v < 0, ">= 0"),
    _bound(("total_timesteps",), lambda v: v > MAX_TOTAL_TIMESTEPS, "<= 1e10 (MAX_TOTAL_TIMESTEPS)"),
    _bound(("n_envs",), lambda v: v > MAX_N_ENVS, f"<= {MAX_N_ENVS} (MAX_N_ENVS)"),
    _bound(("deepsets_hidden", "deepsets_slot_dim"), lambda v: v > MAX_NET_WIDTH,
           f"<= {MAX_NET_WIDTH} (MAX_NET_WIDTH)"),
    _check_rollout, _check_masked_ppo, _check_discounts, _check_expert, _check_scenarios,
    _bound(("learning_rate", "bc_learning_rate"), lambda v: v <= 0, "> 0"),
    _bound(("bc_smoothing",), lambda v: not 0 <= v < 1, "in [0, 1)"),
    _check_net_arch,
)


def read_yaml(path: str | os.PathLike) -> dict[str, Any]:
    """A YAML mapping (empty file -> {}) read as the cluster configs are
    (:func:`lyra_gym.model.config.load_config`: YAML 1.2 numbers, no aliases, a key given twice
    refused, a regular file of at most ``MAX_CONFIG_BYTES``; but YAML 1.1 booleans, ``yes`` and
    ``on`` included, as before); errors name the file and line.
    ``OSError`` (missing, no permission) is the caller's."""
    path = Path(path)
    raw = read_user_file(path, MAX_CONFIG_BYTES, "training config file", error=TrainConfigError)
    try:
        data = strict_yaml(raw.decode("utf-8"), yaml11_bools=True) or {}
    except UnicodeDecodeError as err:
        raise TrainConfigError(f"{path}: not UTF-8 text (byte 0x{raw[err.start]:02x})") from None
    except YamlProblem as err:
        raise TrainConfigError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(data, Mapping):
        raise TrainConfigError(f"{path}: expected a mapping of config keys at the top level")
    return dict(data)


def load_train_config(path: str | os.PathLike, base: TrainConfig | None = None) -> TrainConfig:
    """``base`` (default: the dataclass defaults) updated with the YAML file at ``path``; its
    paths relative to the file's folder (module docstring)."""
    data = read_yaml(path)
    return (base or TrainConfig()).updated(_paths_beside(data, Path(path).parent), source=str(path))


def parse_overrides(items: Sequence[str]) -> dict[str, str]:
    """``["key=value", ...]`` -> ``{key: value}`` (values still strings; typed by :meth:`TrainConfig.updated`)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise TrainConfigError(f"--set {shown(item)}: expected key=value")
        out[key.strip()] = value.strip()
    return out


def default_config_path(env_id: str) -> Path | None:
    """``agents/configs/<name>.yaml`` for ``LyraGym/<Name>-vN`` (None when not shipped)."""
    name = env_id.split("/")[-1].rsplit("-v", 1)[0].lower()
    path = CONFIG_DIR / f"{name}.yaml"
    return path if path.exists() else None


def resolve_config(env_id: str | None = None, config_path: str | os.PathLike | None = None, quick: bool = False,
                   overrides: Sequence[str] = (), seed: int | None = None,
                   base: TrainConfig | None = None) -> TrainConfig:
    """The config of a run, from the command line's pieces (see the module docstring for the order).

    :param env_id: ``--env``; picks ``agents/configs/<env>.yaml`` when no file is given.
    :param config_path: ``--config``; a YAML file.
    :param quick: apply ``agents/configs/quick.yaml``.
    :param overrides: ``--set key=value`` items.
    :param seed: ``--seed``.
    :param base: start from this config instead of the defaults (``--resume``).
    """
    cfg = base or TrainConfig()
    if config_path is not None:
        cfg = load_train_config(config_path, cfg)
    elif env_id is not None and base is None:
        path = default_config_path(env_id)
        cfg = load_train_config(path, cfg) if path else cfg.replace(name=env_id.split("/")[-1].lower())
    elif base is None:
        cfg = load_train_config(CONFIG_DIR / "cluster.yaml", cfg)
    if env_id is not None:
        cfg = cfg.updated({"env_id": env_id}, source="--env")
    if quick:
        cfg = load_train_config(QUICK_OVERLAY, cfg)
    if seed is not None:
        cfg = cfg.updated({"seed": seed}, source="--seed")
    if overrides:
        cfg = cfg.updated(parse_overrides(overrides), source="--set")
    return cfg
