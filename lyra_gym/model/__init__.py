"""The model: what a job and a cluster are, before any simulation.

Job records (:mod:`~lyra_gym.model.jobspec`, :mod:`~lyra_gym.model.jobs`), the run's configuration
(:mod:`~lyra_gym.model.config`), throughput profiles, the scaling and statistical-efficiency
models, inference demand and feasibility. Imports nothing above :mod:`lyra_gym.errors`.
"""
