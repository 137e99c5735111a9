"""One simulation run: :func:`~lyra_gym.run.simulate.simulate` drives the engine with a scheduler,
then its metrics and timeline are computed and written atomically to a result folder.
"""
