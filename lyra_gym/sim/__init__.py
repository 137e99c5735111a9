"""The simulator's seams: the parts of the discrete-event engine that are units of their own.

:mod:`~lyra_gym.sim.events` (the event queue), :mod:`~lyra_gym.sim.reclaim` (the reclaim
ledger and the default reclaim rule), :mod:`~lyra_gym.sim.validate` (``validate_plan``, a pure
check of a Plan against a state), :mod:`~lyra_gym.sim.journal` (the running allocations of the
current plans handed out), :mod:`~lyra_gym.sim.accounting` (GPU-second integrals and event
counts), :mod:`~lyra_gym.sim.trace_jobs` (a trace's job records) and
:mod:`~lyra_gym.sim.inputs` (what an engine is given: efficiency table, progress bar).
:class:`lyra_gym.sim.engine.Engine` keeps the loop and the application of plans.
"""
