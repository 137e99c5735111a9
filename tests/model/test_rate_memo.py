"""The rate memos (issue 24): memoised rates equal fresh computations bit for bit, are shared by
every ScalingModel of the same profiles, curves and rules (so they outlive an env reset), stay
bounded, and ``NoiseScaleCurve.part_efficiency`` sums exactly what the per-epoch loop it replaced
summed."""

from __future__ import annotations

import bisect
import math
import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_gym.model import profiles as profiles_module
from lyra_gym.model import scaling as scaling_module
from lyra_gym.model.efficiency import NoiseScaleCurve, builtin_efficiency, parse_efficiency
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.model.profiles import builtin_profiles, load_profiles
from lyra_gym.model.scaling import BATCH_LIMITS, NOISE_SCALE_RULES, PROGRESS_BINS, SCALING_RULES, ScalingModel

ROOT = Path(__file__).resolve().parents[2]
T4_PROFILE = ROOT / "traces" / "pollux-t4-profile.json"
CURVES = sorted(builtin_efficiency().models)
FORMAT_1 = {"format": "lyra-gym-efficiency/1", "models": {
    "bert": {"init_batch": 12, "progress": [0.0, 0.3, 1.0], "noise_scale": [50.0, 400.0, 900.0]},
    "resnet18": {"init_batch": 128, "progress": [0.5], "noise_scale": [3000.0]}}}


def bits(x: float) -> str:
    return float(x).hex()


def old_part_efficiency(curve: NoiseScaleCurve, m: float, part: int) -> float:
    """The loop ScalingModel.efficiency_factor ran before part_efficiency, with grad_stats per epoch."""
    lo, hi = part / PROGRESS_BINS, (part + 1) / PROGRESS_BINS
    e = curve.epoch_at(lo)
    start = curve.epoch_end[e - 1] if e > 0 else 0.0
    time = 0.0
    while start < hi and e < len(curve.epoch_end):
        end = curve.epoch_end[e]
        width = min(end, hi) - max(start, lo)
        if width > 0:
            sqr, var = curve.grad_stats(m, (start + end) / 2)
            eff = 1.0 if sqr <= 0 else (curve.init_batch * var / sqr + curve.init_batch) / (
                curve.init_batch * var / sqr + m)
            time += width / eff
        start, e = end, e + 1
    return (hi - lo) / time


@st.composite
def format_2_curves(draw) -> NoiseScaleCurve:
    """A random format-2 curve: increasing batches and epoch ends, statistics >= 0 (some 0)."""
    batches = sorted(set(draw(st.lists(st.floats(1.0, 1e5), min_size=1, max_size=6))))
    inner = sorted(set(draw(st.lists(st.floats(1e-6, 1.0, exclude_max=True), max_size=30))))
    ends = (*inner, 1.0)
    stat = st.one_of(st.just(0.0), st.floats(0.0, 1e6))
    rows = st.lists(stat, min_size=len(ends), max_size=len(ends)).map(tuple)
    sqr = tuple(draw(rows) for _ in batches)
    var = tuple(draw(rows) for _ in batches)
    return NoiseScaleCurve("c", batches[0], (0.5,), (1.0,), tuple(batches), ends, sqr, var)


@settings(max_examples=400, deadline=None)
@given(format_2_curves(), st.floats(0.5, 2e5), st.integers(0, PROGRESS_BINS - 1))
@pytest.mark.slow
def test_part_efficiency_is_the_old_loop_bit_for_bit_on_random_curves(curve, m, part):
    old = old_part_efficiency(curve, m, part)
    new = curve.part_efficiency(m, part / PROGRESS_BINS, (part + 1) / PROGRESS_BINS)
    assert bits(new) == bits(old)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(CURVES), st.floats(0.5, 40000.0), st.integers(0, PROGRESS_BINS - 1))
def test_part_efficiency_is_the_old_loop_bit_for_bit_on_the_shipped_curves(name, m, part):
    curve = builtin_efficiency().model(name)
    for batch in (m, *curve.batches):  # between runs and exactly at each measured run
        old = old_part_efficiency(curve, batch, part)
        assert bits(curve.part_efficiency(batch, part / PROGRESS_BINS, (part + 1) / PROGRESS_BINS)) == bits(old)


def test_part_efficiency_keeps_the_argument_errors():
    curve = builtin_efficiency().model("resnet50")
    with pytest.raises(ValueError, match="batch: expected a finite number"):
        curve.part_efficiency(math.inf, 0.0, 0.05)
    with pytest.raises(ValueError, match=r"progress: must be in \[0, 1\]"):
        curve.part_efficiency(400.0, 0.0, 1.5)


# ---------------------------------------------------------------- memoised vs fresh

PROFILE_FILES = {"builtin": None, "t4": T4_PROFILE}


def fresh_profiles(which: str):
    """A new ProfileSet (so new, empty memos) of the named file."""
    return builtin_profiles() if PROFILE_FILES[which] is None else load_profiles(PROFILE_FILES[which])


def table(kind: str):
    return {"none": None, "v2": builtin_efficiency(), "v1": parse_efficiency(FORMAT_1)}[kind]


queries = st.tuples(  # small domains, so that queries share some arguments and differ in others
    st.sampled_from(["bert", "deepspeech2", "resnet18", "resnet50"]),
    st.sampled_from([1, 2, 4]),              # requested GPUs
    st.sampled_from([None, 12, 48, 192]),    # trace batch (None: the profile's local batch per GPU)
    st.integers(1, 8),                       # workers
    st.sampled_from([1, 4, 8]),              # GPUs per server
    st.sampled_from([12.0, 48.0, 200.0, 1000.0]),  # adaptive rule's chosen batch
    st.sampled_from([0, 1, 7, PROGRESS_BINS - 1]),  # progress part
    st.integers(0, 2),                       # which of the model's GPU types
)


@st.composite
def related_queries(draw) -> list[tuple]:
    """Queries that each differ from a first one in one or two arguments (what a memo keyed on too
    little would answer wrongly)."""
    base = draw(queries)
    family = [base]
    for _ in range(draw(st.integers(1, 30))):
        other = draw(queries)
        changed = draw(st.sets(st.integers(0, len(base) - 1), min_size=1, max_size=2))
        family.append(tuple(o if i in changed else b for i, (b, o) in enumerate(zip(base, other))))
    return draw(st.permutations(family))


def memos_of(model: ScalingModel) -> tuple[dict, ...]:
    return (model._terms, model._factors, model._parts, model._rates, model._bins, model._rate_for,
            model._packed)


def ask(model: ScalingModel, query, uncached: bool = False) -> tuple[str, ...]:
    """Every memoised answer for one query, as exact bit strings (``uncached``: each computed with
    every memo emptied first)."""
    name, gpus, trace_batch, workers, per_server, chosen, part, which_gpu = query
    spec = JobSpec("j", 0.0, gpus, 100.0, name, True, 1, 64, trace_batch)
    gpu_types = sorted(model.profiles.model(name).gpus)
    gpu = gpu_types[which_gpu % len(gpu_types)]
    b0 = model.initial_batch(spec)
    servers = -(-workers // per_server)
    types = frozenset((gpu,))
    batch = model.global_batch(spec, b0, workers, chosen)
    calls = [lambda: model.rate(spec, b0, workers, servers, types, batch, part),
             lambda: model.rate_for(spec, b0, workers, servers, types, chosen, part),
             lambda: model.packed_rate(spec, b0, workers, gpu, per_server, batch, part),
             lambda: model.statistical_efficiency(spec, b0, workers, batch, part),
             lambda: model.needs_bins(spec, b0, batch, workers)]
    if model.has_curve(name):
        calls += [lambda: model.efficiency_factor(name, b0, model.split(spec, b0, workers, batch)[2], part),
                  lambda: model.noise_terms(name, b0, part)]
    answers = []
    for call in calls:
        if uncached:
            for memo in memos_of(model):
                memo.clear()
        answer = call()
        answers.append(tuple(map(bits, answer)) if isinstance(answer, tuple) else bits(answer))
    return tuple(answers)


@pytest.mark.parametrize("kind", ["none", "v1", "v2"])
@pytest.mark.parametrize("noise", NOISE_SCALE_RULES)
@pytest.mark.parametrize("rule", SCALING_RULES)
@settings(max_examples=25, deadline=None)
@given(st.sampled_from(sorted(PROFILE_FILES)), st.sampled_from(BATCH_LIMITS), related_queries())
@pytest.mark.sample(5)
def test_memoised_answers_equal_a_fresh_uncached_computation(rule, noise, kind, which, limit, batch_of_queries):
    warm = ScalingModel(fresh_profiles(which), table(kind), rule, noise, limit)
    for query in batch_of_queries:  # the warm model answers them all, from its memos where it can
        ask(warm, query)
    fresh = ScalingModel(fresh_profiles(which), table(kind), rule, noise, limit)  # memos of its own
    assert fresh._rates is not warm._rates
    for query in reversed(batch_of_queries):
        assert ask(warm, query) == ask(fresh, query, uncached=True)


@settings(max_examples=30, deadline=None)
@given(related_queries())
def test_a_memo_emptied_when_full_still_answers_exactly(some_queries):
    big = ScalingModel(fresh_profiles("t4"), builtin_efficiency(), "adaptive", "absolute")
    expected = [ask(big, q) for q in some_queries]
    old = scaling_module.MEMO_ENTRIES
    scaling_module.MEMO_ENTRIES = 3
    try:
        small = ScalingModel(fresh_profiles("t4"), builtin_efficiency(), "adaptive", "absolute")
        got = [ask(small, q) for q in some_queries]
        assert max(len(m) for m in memos_of(small)) <= 3
    finally:
        scaling_module.MEMO_ENTRIES = old
    assert got == expected


# ---------------------------------------------------------------- sharing

def test_models_of_the_same_profiles_curves_and_rules_share_their_memos():
    profiles = builtin_profiles()
    first = ScalingModel(profiles, builtin_efficiency(), "fixed-local", "relative", "accumulate")
    ask(first, ("resnet50", 4, None, 16, 8, 1.0, 3, 0))
    assert first._rates and first._factors
    # a reloaded table of the same content shares too (a config naming an efficiency file)
    reloaded = parse_efficiency({"format": "lyra-gym-efficiency/2", "models": {
        name: {"init_batch": c.init_batch, "batches": list(c.batches), "epoch_end": list(c.epoch_end),
               "grad_sqr": [list(r) for r in c.grad_sqr], "grad_var": [list(r) for r in c.grad_var]}
        for name, c in builtin_efficiency().models.items()}})
    again = ScalingModel(profiles, reloaded, "fixed-local", "relative", "accumulate")
    assert again._rates is first._rates and again._factors is first._factors
    for other in (ScalingModel(profiles, builtin_efficiency(), "fixed-global", "relative", "accumulate"),
                  ScalingModel(profiles, builtin_efficiency(), "fixed-local", "absolute", "accumulate"),
                  ScalingModel(profiles, builtin_efficiency(), "fixed-local", "relative", "cut"),
                  ScalingModel(profiles, None, "fixed-local", "relative", "accumulate"),
                  ScalingModel(profiles, parse_efficiency(FORMAT_1), "fixed-local", "relative", "accumulate"),
                  ScalingModel(builtin_profiles(), builtin_efficiency(), "fixed-local", "relative", "accumulate")):
        assert other._rates is not first._rates and not other._rates


def test_a_profile_set_keeps_at_most_memo_keys_memos_and_pickles_without_them():
    profiles = builtin_profiles()
    kept = profiles.memo("a")
    kept["x"] = 1.0
    assert profiles.memo("a") is kept
    for i in range(profiles_module.MEMO_KEYS - 1):
        assert profiles.memo(("other", i)) == {}
    assert profiles.memo("a") is kept  # MEMO_KEYS keys: all kept
    profiles.memo(("other", "one more"))  # beyond: all dropped
    assert profiles.memo("a") is not kept and profiles.memo("a") == {}
    profiles.memo("a")["x"] = 1.0
    copy = pickle.loads(pickle.dumps(profiles))
    assert copy.memo("a") == {}  # not pickled
    v100 = frozenset(("v100",))
    assert copy.throughput("bert", 2, 1, v100) == profiles.throughput("bert", 2, 1, v100)


def test_an_env_reset_reuses_the_rates_of_the_episode_before():
    gym = pytest.importorskip("gymnasium")
    import lyra_gym  # noqa: F401  (registers the envs)

    env = gym.make("LyraGym/Cluster-v1")
    env.reset(seed=1)
    first = env.unwrapped.engine.scaling
    env.reset(seed=2)
    second = env.unwrapped.engine.scaling
    assert second is not first and second._rates is first._rates
    env.close()


def test_epoch_index_of_the_old_loop_is_its_loop_index_on_the_shipped_curves():
    # part_efficiency reads each epoch's row at the epoch's middle, as grad_stats did; on the shipped
    # curves that row is the epoch itself
    for curve in builtin_efficiency().models.values():
        starts = (0.0, *curve.epoch_end[:-1])
        assert [curve.epoch_at((a + b) / 2) for a, b in zip(starts, curve.epoch_end)] == list(
            range(len(curve.epoch_end)))
        assert bisect.bisect_right(curve.epoch_end, 1.0) == len(curve.epoch_end)
