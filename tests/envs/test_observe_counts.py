"""The guided environments' observe and decode from what they keep and count (issue 24, the
env step's speed), against the same answers computed afresh:

- ``ActionCodec.masks_counted`` is ``masks`` of slots with that structure, and ``decode`` with
  those counts is ``decode`` without them, for every action (out-of-range and masked values too);
- at every step of seeded masked-random episodes: the job slots and their count of running
  inelastic jobs against ``job_slots`` with nothing kept, the masks against ``masks(slots,
  server_ids)``, the decoded guidance with and without the counts, and the observation against
  one built with nothing kept (no rows, occupancy, slot split, nor loaned-type rates by part);
- jobs of one model and ``B0`` but other requested sizes keep apart loaned-type rates by part: each
  shown row is the one a new builder makes for that job alone.
"""

from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lyra_gym  # noqa: F401  (registers the envs)
from lyra_gym.envs.actions import ActionCodec, _valid_range
from lyra_gym.envs.observation import (
    JOB_FEATURES,
    ObservationBuilder,
    engine_constants,
    job_slots,
    job_slots_counted,
    server_slots,
)
from lyra_gym.model.jobs import JobState
from lyra_gym.sim.scheduler import JOB_LEVELS, NEUTRAL_JOB_LEVEL, NEUTRAL_RETURN_LEVEL, RETURN_LEVELS

CONTENDED = str(Path(__file__).resolve().parents[2] / "traces" / "contended.yaml")


class _Spec:
    def __init__(self, elastic: bool) -> None:
        self.elastic = elastic


class _Slot:
    def __init__(self, job_id: str, state: JobState, elastic: bool) -> None:
        self.id, self.state, self.spec = job_id, state, _Spec(elastic)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), k=st.integers(1, 6), m=st.integers(0, 4), b=st.integers(1, 5),
       controls=st.sampled_from([(True, True), (True, False), (False, True)]))
def test_counted_masks_and_decoding_are_the_plain_ones(data, k, m, b, controls):
    codec = ActionCodec(k, m, b, *controls)
    shown = data.draw(st.integers(0, k))
    inelastic = data.draw(st.integers(0, shown))
    # queued or running elastic jobs first (any level), then running inelastic ones (neutral only)
    slots = [_Slot(f"j{i}", data.draw(st.sampled_from([JobState.QUEUED, JobState.RUNNING])), True)
             if i < shown - inelastic else _Slot(f"j{i}", JobState.RUNNING, False) for i in range(shown)]
    for i in range(shown - inelastic):  # a queued inelastic job allows any level too
        if slots[i].state is JobState.QUEUED:
            slots[i].spec.elastic = data.draw(st.booleans())
    servers = list(range(100, 100 + data.draw(st.integers(0, m))))
    counts = (shown, inelastic, len(servers))
    masks = codec.masks_counted(*counts)
    plain = codec.masks(slots, servers)
    assert masks.dtype == bool and masks.tobytes() == plain.tobytes() and not masks.flags.writeable
    assert codec.masks_counted(*counts) is masks  # kept
    valid_share = data.draw(st.sampled_from([0.0, 0.5, 1.0]))
    action = []
    for n, offset in zip(codec.nvec, codec.offsets):
        allowed = np.flatnonzero(plain[offset:offset + n])
        if data.draw(st.floats(0, 1)) < valid_share:
            action.append(int(data.draw(st.sampled_from(allowed.tolist()))))
        else:
            action.append(data.draw(st.integers(-3, int(n) + 2)))
    action_array = np.array(action, dtype=np.int64)
    plain_decoded = codec.decode(action_array, plain, slots, servers)
    assert codec.decode(action_array, masks, slots, servers, counts) == plain_decoded


def test_valid_ranges_by_hand():
    assert [_valid_range(bytes(part)) for part in ([1, 1, 0], [0, 1, 0], [1, 1, 1])] == [(0, 2), (1, 2), (0, 3)]
    assert _valid_range(bytes([1, 0, 1])) is None and _valid_range(bytes([0, 0])) is None  # a gap; none valid
    # the rules as the module docstring states them: any level, any borrow level, any return level;
    # a running inelastic job's slot the neutral level, an empty slot 0, an empty server slot neutral
    assert ActionCodec(3, 2, 4, True, True)._checks == (
        (0, JOB_LEVELS), (0, 5), (0, RETURN_LEVELS), [NEUTRAL_JOB_LEVEL] * 3, [0] * 3, [NEUTRAL_RETURN_LEVEL] * 2)


def test_a_mask_rule_no_range_expresses_is_read_value_by_value():
    """A kind of dimension whose valid values have a gap (here: every other level of a free job
    slot) leaves the counted check no constants, so decode reads every value from the mask."""
    codec = ActionCodec(3, 1, 2, True, True)
    assert codec._checks is not None
    codec._any = bytes([1, 0] * len(codec._any))[:len(codec._any)]
    codec._checks = codec._derive_checks()
    assert codec._checks is None
    slots, counts = [_Slot("j0", JobState.QUEUED, True)], (1, 0, 1)
    masks = codec.masks_counted(*counts)
    action = np.array([1, 0, 0, 2, 1], dtype=np.int64)  # level 1 of j0: masked by the new rule
    decoded = codec.decode(action, masks, slots, [100], counts)
    assert decoded == codec.decode(action, masks.copy(), slots, [100]) and decoded[1] == 1


def _fresh_slots(view, k):
    constants = engine_constants(view)
    kept, constants.running_slots = constants.running_slots, None
    try:
        return job_slots(view, k)
    finally:
        constants.running_slots = kept


def _check_step(env, rng) -> None:
    view = env.engine.view
    slots, inelastic = job_slots_counted(view, env.k)  # from what is kept
    fresh = _fresh_slots(view, env.k)
    assert [j.id for j in env.slots] == [j.id for j in slots] == [j.id for j in fresh]
    assert all(a is b for a, b in zip(env.slots, fresh))
    assert inelastic == sum(j.state is JobState.RUNNING and not j.spec.elastic for j in fresh)
    assert list(env.server_ids) == list(view.loaned_servers()[:env.m]) == server_slots(view, env.m)
    plain = env.codec.masks(env.slots, env.server_ids)
    assert env._masks.tobytes() == plain.tobytes() and env._masks.dtype == plain.dtype
    for share in (0.0, 1.0):  # an action off the mask, and a masked-random one
        nvec = env.codec.nvec
        if share:
            action = np.array([rng.choice(np.flatnonzero(p)) for p in np.split(plain, np.cumsum(nvec)[:-1])])
        else:
            action = rng.integers(-1, nvec + 1)
        assert env._decode(action) == env.codec.decode(action, plain, env.slots, env.server_ids)
    kept = env.obs.tobytes()
    constants = engine_constants(view)
    constants.running_rows.clear()
    constants.queued_rows.clear()
    constants.occupancy = None
    constants.goodput.clear()
    constants.shared_parts = {}  # the loaned-type rates by part, asked afresh (view.goodput)
    constants.shared_goodput = {}
    fresh_obs = env.builder.build(view, env.slots, env.server_ids)
    assert fresh_obs.tobytes() == kept, f"step {env.steps}"
    # remaining_loaned against view.goodput itself (the rates kept by part hold what it says)
    first = view.servers[view.inference_server_ids[0]]
    width, column = env.builder.job_width, JOB_FEATURES.index("remaining_loaned")
    for i, job in enumerate(env.slots):
        rate = view.goodput(job, job.spec.num_gpus, first.gpu_type, first.num_gpus)
        remaining = job.remaining_work if view._engine.knowledge is None else \
            view._engine.knowledge.remaining_work(job._job, view.now)
        value = math.log1p(max(remaining / rate, 0.0) / 60.0) / 10.0 if rate > 0 else 1.0
        assert env.obs[i * width + column] == np.float32(min(value, 1.0)), (i, job)


@pytest.mark.parametrize("env_id, kwargs", [
    ("LyraGym/Cluster-v1", {}),
    ("LyraGym/Loaning-v1", {"config": {"knowledge": {"mode": "estimate"}}}),
    ("LyraGym/Elastic-v1", {"config": {"scaling": "adaptive"}}),
    ("LyraGym/Cluster-v1", {"config": CONTENDED, "num_job_slots": 2, "num_server_slots": 2}),
])
def test_observe_and_decode_from_what_is_kept_are_the_plain_ones(env_id, kwargs):
    env = gym.make(env_id, **kwargs)
    env.reset(seed=5)
    rng = np.random.default_rng(5)
    nvec = env.action_space.nvec
    seen = {"queue over K": 0, "inelastic": 0}
    for _ in range(120):
        inner = env.unwrapped
        _check_step(inner, rng)
        seen["queue over K"] += len(inner.engine.queue) >= inner.k
        seen["inelastic"] += inner._mask_counts[1] > 0
        masks = inner.action_masks()
        action = np.array([rng.choice(np.flatnonzero(p)) for p in np.split(masks, np.cumsum(nvec)[:-1])])
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    assert seen["inelastic"], seen
    if kwargs.get("num_job_slots") == 2:
        assert seen["queue over K"], seen


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1, max_size=40))
def test_struct_native_float32_is_numpys_cast(values):
    """``ObservationBuilder.build`` packs the float64 values with struct's native ``f`` (the C
    cast): the same float32 bits as NumPy's cast (inf beyond float32's range, NaN kept), so the
    clipped observation is the one of ``astype(np.float32)`` then ``clip``."""
    import struct
    import warnings

    code = ObservationBuilder(2, 1)._format.lstrip("0123456789")  # the builder's own format code ("f")
    packed = np.frombuffer(struct.pack(f"{len(values)}{code}", *values), dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy warns of the overflow to inf
        cast = np.array(values, dtype=np.float64).astype(np.float32)
    assert packed.tobytes() == cast.tobytes()
    assert packed.clip(-1.0, 1.0).tobytes() == np.clip(cast, -1.0, 1.0).tobytes()  # the builder's clip


_FORGOTTEN = ("running_rows", "queued_rows", "occupancy", "goodput", "shared_goodput", "shared_parts")


def _fresh_row(view, job, servers: list[int], width: int) -> bytes:
    """``job``'s row in an observation built by a new builder that shows it alone, with nothing kept
    (the engine's kept rows and rates are put back afterwards)."""
    constants = engine_constants(view)
    kept = {name: getattr(constants, name) for name in _FORGOTTEN}
    constants.running_rows, constants.queued_rows, constants.goodput = {}, {}, {}
    constants.occupancy = constants.shared_goodput = constants.shared_parts = None
    try:
        return ObservationBuilder(1, len(servers) or 1).build(view, [job], servers)[:width].tobytes()
    finally:
        for name, value in kept.items():
            setattr(constants, name, value)


def test_loaned_rates_by_part_tell_apart_jobs_of_one_model_and_batch_but_other_sizes():
    # Two toy jobs with the same model and B0 (an explicit batch of 4) but 4 and 2 requested GPUs:
    # their loaned-type (T4) rates differ (4 vs 2 workers), so each needs its own list of rates
    # by part. Lyra borrows the idle T4 server; at every decision, every shown job's row is the
    # row a new builder makes for it alone, and remaining_loaned is read off view.goodput.
    from lyra_baselines.lyra import LyraScheduler
    from lyra_gym.model.demand import DemandCurve
    from lyra_gym.model.jobspec import JobSpec
    from lyra_gym.run.simulate import build_engine
    from tests.toy import TOY, config

    jobs = [JobSpec("wide", 0.0, 4, 1000.0, "toy", False, 4, 4, batch_size=4),
            JobSpec("narrow", 0.0, 2, 3000.0, "toy", False, 2, 2, batch_size=4),
            JobSpec("late", 500.0, 4, 800.0, "toy", False, 4, 4, batch_size=4)]
    engine = build_engine(jobs, LyraScheduler(), config(training=1, gpus=4, inference=1), 0, TOY,
                          DemandCurve.constant(0))
    builder = ObservationBuilder(3, 1)
    width, column = builder.job_width, JOB_FEATURES.index("remaining_loaned")
    engine.begin()
    seen = {"both shown": 0, "loaned": 0}
    while engine.next_decision() and engine.now < 2000:
        view = engine.view
        slots, servers = job_slots(view, builder.k), server_slots(view, builder.m)
        obs = builder.build(view, slots, servers)
        first = view.servers[view.inference_server_ids[0]]
        for i, job in enumerate(slots):
            assert obs[i * width:(i + 1) * width].tobytes() == _fresh_row(view, job, servers, width), (view.now, job)
            rate = view.goodput(job, job.spec.num_gpus, first.gpu_type, first.num_gpus)
            value = math.log1p(job.remaining_work / rate / 60.0) / 10.0
            assert obs[i * width + column] == np.float32(min(value, 1.0)), (view.now, job)
        sizes = {j.spec.num_gpus for j in slots if j.spec.batch_size == 4}
        seen["both shown"] += sizes == {2, 4}
        seen["loaned"] += bool(servers)
        engine.submit(engine.scheduler.decide(view))
    assert seen["both shown"] >= 3 and seen["loaned"] >= 3, seen
