"""Reinforcement-learning side of lyra-gym (agents, configs, callbacks).

- :mod:`lyra_agents.config`: :class:`~lyra_agents.config.TrainConfig`, every knob of a run; YAML files in
  ``agents/configs/`` (one per env id, plus the ``--quick`` overlay); ``--set key=value``.
- :mod:`lyra_agents.factory`: seeded vector envs, ``VecNormalize`` (slot-tied statistics), the model
  (MaskablePPO by default, PPO selectable), run directories and saved artefacts.
- :mod:`lyra_agents.extractors`: a DeepSets encoder of the job slots (SB3 features extractor).
- :mod:`lyra_agents.callbacks`: ``custom/*`` cluster metrics, ``eval/*`` against Lyra on test
  windows, config as TensorBoard text, a progress bar, checkpoints.
- :mod:`lyra_agents.evaluate`: a model, the expert, or any scheduler on held-out test windows.
- :mod:`lyra_agents.policy_scheduler`: a trained model as a Scheduler (``model:PATH``).

``train.py`` at the repository root ties them together.
"""
