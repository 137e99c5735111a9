"""CUDA benchmark collector: measure each model's training-step time on this machine's GPU type
and write it as a ``lyra-gym-profiles/1`` throughput profile (see ``docs/profiles.md``).

- :mod:`~lyra_gym.collector.models`: the seven benchmark architectures (plain PyTorch, tiny sizes for CPU tests);
- :mod:`~lyra_gym.collector.benchmark`: timing of training steps, inference batches and NCCL all-reduces;
- :mod:`~lyra_gym.collector.profile_writer`: measured profile documents, merging into an existing profile;
- :mod:`~lyra_gym.collector.cli`: ``lyra-gym profile`` / ``python -m lyra_gym.collector``.

Importing this package does not import torch; the submodules do.
"""
