"""The simulator: the discrete-event engine and what a scheduler sees of it.

- What a scheduler reads and returns: :mod:`~lyra_gym.sim.view` (the read-only ``ClusterView``,
  ``JobView``, ``ServerView``), :mod:`~lyra_gym.sim.plan` (the ``Plan`` it answers),
  :mod:`~lyra_gym.sim.scheduler` (the ``Scheduler`` base, ``Guidance``, the registry by name),
  :mod:`~lyra_gym.sim.params` (declared scheduler parameters), :mod:`~lyra_gym.sim.import_spec`
  (``MODULE:ATTRIBUTE`` specs), :mod:`~lyra_gym.sim.placement` (the placement rules).
- The engine: :class:`lyra_gym.sim.engine.Engine` keeps the loop and applies plans; its seams are
  :mod:`~lyra_gym.sim.events` (the event queue), :mod:`~lyra_gym.sim.validate` (``validate_plan``,
  a pure check of a Plan), :mod:`~lyra_gym.sim.reclaim` (the reclaim ledger and rule),
  :mod:`~lyra_gym.sim.journal` (the running allocations of the plans handed out),
  :mod:`~lyra_gym.sim.occupancy` (who holds which GPUs), :mod:`~lyra_gym.sim.topology` (the
  free-capacity index), :mod:`~lyra_gym.sim.cluster` (server records), :mod:`~lyra_gym.sim.overheads`
  (restart and rescale costs), :mod:`~lyra_gym.sim.rates` (memoised profile look-ups),
  :mod:`~lyra_gym.sim.accounting` (GPU-second integrals and event counts),
  :mod:`~lyra_gym.sim.trace_jobs` (a trace's job records) and :mod:`~lyra_gym.sim.inputs` (the
  efficiency table, the progress bar).

Internal: import the public names from the package face (``from lyra_gym import Plan, Scheduler``).
"""
