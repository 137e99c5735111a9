"""The asv (airspeed velocity) speed suite: ``asv continuous main HEAD`` from the repository root.

Modules: :mod:`.engine` (fifo and lyra on bench-15d and on the lyra-15d shape at x1 and x10),
:mod:`.trace` (trace generation), :mod:`.envs` (the guided envs' step), :mod:`.alloc_env`
(``LyraGym/Alloc-v1`` sub-actions), :mod:`.agent` (the shipped agent's inference), :mod:`.training`
(``env.step`` in each shipped training configuration, ``train.py``'s throughput). Sizes are class
attributes so ``tests/structure/test_asv_benchmarks_run.py`` can run every benchmark once on a tiny size.
"""
