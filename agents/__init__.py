"""Reinforcement-learning side of lyra-gym: training, trained models as schedulers, evaluation, the benchmark.

- Training: :mod:`lyra_agents.config` (:class:`~lyra_agents.config.TrainConfig`, every knob of a run;
  YAML files in ``agents/configs/``; ``--set key=value``), :mod:`lyra_agents.vec_envs` (seeded,
  normalised vector envs), :mod:`lyra_agents.model_build` (device, threads, algorithm, policy
  network), :mod:`lyra_agents.extractors` (a DeepSets encoder of the job slots),
  :mod:`lyra_agents.callbacks`, :mod:`lyra_agents.imitation` and :mod:`lyra_agents.experts`
  (the behaviour-cloning warm start), :mod:`lyra_agents.masked_ppo` (masked PPO in one file,
  ``algo: masked_ppo``; its networks :mod:`lyra_agents.masked_policy` and :mod:`lyra_agents.slot_policy`,
  its vine :mod:`lyra_agents.vine`), :mod:`lyra_agents.preempt_rule` and :mod:`lyra_agents.preempt_search`
  (a linear preemption rule and its policy search), :mod:`lyra_agents.rllib_backend` (RLlib PPO),
  :mod:`lyra_agents.learning_curve` (a run's held-out evaluation as a figure).
- A run's files: :mod:`lyra_agents.artifacts` (names and paths), :mod:`lyra_agents.normalizer_stats`
  (observation statistics as ``.npz``), :mod:`lyra_agents.model_files` (the limits and checks on
  saved files, trust), :mod:`lyra_agents.model_loading`, :mod:`lyra_agents.export`,
  :mod:`lyra_agents.convert_cli`; :mod:`lyra_agents.factory` is a face that re-exports them for users
  (nothing inside the project imports it).
- Models as schedulers: :mod:`lyra_agents.policy_scheduler` (``model:PATH``),
  :mod:`lyra_agents.observation_policy` (``policy:MODULE:FACTORY``), :mod:`lyra_agents.spaces`
  (the spaces a model must match), :mod:`lyra_agents.small_first`.
- Measuring: :mod:`lyra_agents.evaluate` (held-out test windows), :mod:`lyra_agents.paired`
  (paired evaluation over many units), :mod:`lyra_agents.fork_probe` (how much one action changes a
  return), :mod:`lyra_agents.benchmark` with
  :mod:`lyra_agents.suite`, :mod:`lyra_agents.scenarios`, :mod:`lyra_agents.bench_stats`,
  :mod:`lyra_agents.bench_output` and :mod:`lyra_agents.headroom`; :mod:`lyra_agents.leaderboard`
  (submissions checked by rerunning a sample, a page per suite).

``train.py`` at the repository root ties training together.
"""
