"""The knowledge model (issue 26 item 1): what schedulers and observations may know of durations.

Hand tests on the toy profile (``tests/toy.py``: one V100 trains 1 sample/s, so a 1-GPU job's
work is its duration): estimates drawn once per job from their own stream, the same for every
policy of a seed; the history predictor learns only of jobs finished before now (a look-ahead
predictor fails the same check); a view under ``estimate`` answers every duration question
from the estimate, never the truth; ``oracle`` leaves results as they were.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from lyra_baselines.fifo import FifoScheduler
from lyra_gym.model.config import ConfigError, config_from_dict, config_to_dict
from lyra_gym.model.demand import DemandCurve
from lyra_gym.model.knowledge import HistoryKnowledge, KnowledgeConfig, grown
from lyra_gym.run.simulate import build_engine
from lyra_gym.sim import engine as engine_module
from lyra_gym.sim.scheduler import DURATION_READS, declared_reads, knowledge_tag
from lyra_gym.sim.view import JobView, KnownJobView
from toy import TOY, config, job, run


def _with(cfg, **knowledge):
    return dataclasses.replace(cfg, knowledge=KnowledgeConfig(**knowledge))


class Recorder(FifoScheduler):
    """FIFO that records, at every decision, what its view says of every job's duration."""

    tick_interval = 150.0

    def __init__(self, order_by_duration: bool = False) -> None:
        super().__init__()
        self.seen: list[tuple[float, str, float, float, float]] = []
        self.by_duration = order_by_duration

    def order(self, view):
        jobs = list(view.queued_jobs())
        return sorted(jobs, key=lambda j: (j.spec.duration, j.index)) if self.by_duration else jobs

    def decide(self, view):
        for j in [*view.queued_jobs(), *view.running_jobs()]:
            self.seen.append((view.now, j.id, j.spec.duration, j.total_work, j.remaining_work))
        return super().decide(view)


def _engine(jobs, scheduler, cfg, seed=0):
    return build_engine(jobs, scheduler, cfg, seed, profiles=TOY, demand=DemandCurve.constant(0))


# ----------------------------------------------------------------------------- config
def test_config_section_round_trips_and_errors_name_the_field():
    cfg = config_from_dict({"knowledge": {"mode": "estimate", "sigma": "0.5", "growth": 3}})
    assert cfg.knowledge == KnowledgeConfig(mode="estimate", sigma=0.5, growth=3.0)
    assert config_to_dict(cfg)["knowledge"] == {"mode": "estimate", "sigma": 0.5, "bias": 1.0, "growth": 3.0,
                                                "prior_s": 3600.0}
    assert config_from_dict(config_to_dict(cfg)) == cfg
    assert config_from_dict({}).knowledge.mode == "oracle"  # the default: the paper's headline
    for bad, field in [({"mode": "psychic"}, "knowledge.mode"), ({"sigma": -0.1}, "knowledge.sigma"),
                       ({"bias": 0}, "knowledge.bias"), ({"growth": 1.0}, "knowledge.growth"),
                       ({"prior_s": 0}, "knowledge.prior_s"), ({"sigmaa": 1}, "knowledge.sigmaa")]:
        with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
            config_from_dict({"knowledge": bad})
    with pytest.raises(ConfigError, match=r"KnowledgeConfig\.growth"):
        KnowledgeConfig(growth=0.5)


def test_growth_rule_by_hand():
    assert grown(100.0, 0.0, 2.0) == 100.0
    assert grown(100.0, 99.9, 2.0) == 100.0
    assert grown(100.0, 100.0, 2.0) == 200.0  # outlived (work done reached it): doubled
    assert grown(100.0, 450.0, 2.0) == 800.0
    assert grown(10.0, 95.0, 3.0) == 270.0


# ----------------------------------------------------------------------------- estimate
def test_estimates_drawn_once_per_job_from_their_own_stream():
    jobs = [job(f"j{i}", 10.0 * i, 1, 100.0 + i) for i in range(6)]
    cfg = _with(config(training=1, gpus=1), mode="estimate", sigma=0.7, bias=1.5)
    a, b = Recorder(), Recorder(order_by_duration=True)
    ea, eb = _engine(jobs, a, cfg, seed=3), _engine(jobs, b, cfg, seed=3)
    # the hand rule: bias x exp(sigma x Z), Z from the third child of SeedSequence(seed)
    z = np.random.default_rng(np.random.SeedSequence(3).spawn(3)[2]).standard_normal(6)
    assert ea.knowledge.ratios == pytest.approx(list(1.5 * np.exp(0.7 * z)), rel=1e-15)
    assert ea.knowledge.ratios == eb.knowledge.ratios  # the same for every policy of a seed
    assert _engine(jobs, Recorder(), cfg, seed=4).knowledge.ratios != ea.knowledge.ratios
    ea.run()
    eb.run()
    # while a job has not outlived its estimate, every decision saw the same believed total
    for recorder, engine in ((a, ea), (b, eb)):
        for jid, ratio, record in zip([j.job_id for j in jobs], engine.knowledge.ratios, engine.jobs):
            totals = {t for _, i, _, t, _ in recorder.seen if i == jid and t == ratio * record.total_work}
            assert len(totals) == 1
    # the scheduler's generator is untouched: the same first draw as under oracle
    oracle = _engine(jobs, Recorder(), config(training=1, gpus=1), seed=3)
    assert oracle.rng.random() == _engine(jobs, Recorder(), cfg, seed=3).rng.random()


def test_estimate_view_never_exposes_the_truth():
    # one 1-GPU job of 1000 s (1000 samples), estimated 1.5x; a second one queued behind it
    jobs = [job("a", 0.0, 1, 1000.0), job("b", 0.0, 1, 400.0)]
    cfg = _with(config(training=1, gpus=1), mode="estimate", sigma=0.0, bias=1.5)
    engine = _engine(jobs, Recorder(), cfg)  # decisions every 150 s
    engine.begin()
    while engine.next_decision():  # "a" runs from 0; stop at the decision at 300 s
        engine.submit(engine.scheduler.decide(engine.view))
        if engine.now >= 300.0:
            break
    assert engine.now == 300.0
    a, b = engine.view.job("a"), engine.view.job("b")
    assert isinstance(a, KnownJobView)
    record = a._job
    truth_left = record.remaining_work(300.0)
    assert truth_left == 700.0
    # every duration field, by hand from the estimate (1500 samples, 1500 s at 1 GPU)
    checked = {
        "spec": (a.spec.duration, 1500.0, 1000.0),
        "total_work": (a.total_work, 1500.0, 1000.0),
        "remaining_work": (a.remaining_work, 1200.0, 700.0),
        "expected_finish": (a.expected_finish, 1500.0, 1000.0),
        "remaining_time_at": (a.remaining_time_at(1), 1200.0, 700.0),
        "snapshot": (a.snapshot()[5], 1200.0, 700.0),  # its remaining_work
    }
    for name, (seen, believed, truth) in checked.items():
        assert seen == pytest.approx(believed, rel=1e-12), name
        assert not math.isclose(seen, truth), name
    assert b.spec.duration == 600.0 and b.total_work == 600.0 and b.remaining_work == 600.0
    assert b.remaining_time_at(1) == 600.0 and b.expected_finish is None
    assert a.spec.job_id == "a" and a.spec.num_gpus == 1  # everything else of the record stays
    # visible in every mode: the work done, attained service, rate, progress part (300/1000: part 6)
    assert a.total_work - a.remaining_work == pytest.approx(300.0)
    assert a.attained_gpu_s == 300.0 and a.rate == 1.0 and a.progress_part == 6
    assert a.progress_part_at(a.remaining_work) == 6  # the engine's part, whatever believed work is given
    # every public name of the view is either answered from the knowledge model or tells nothing
    # of the duration: a new field fails here until it is classified
    neutral = {"id", "index", "state", "allocation", "workers", "preemptions", "first_start",
               "overhead_until", "init_batch", "batch_size", "attained_gpu_s", "waiting_s", "rate",
               "progress_part", "progress_part_at", "statistical_efficiency", "reference_rate", "lost_run_s",
               "goodput", "goodputs", "finish_time",
               "request",  # the record's fields but its duration (asserted below)
               "completed_duration"}  # the trace's duration, once the job has finished (None before)
    assert "duration" not in a.request._fields and a.request == tuple(
        getattr(record.spec, f) for f in a.request._fields)
    public = {n for n in dir(KnownJobView) if not n.startswith("_")}
    assert public == set(checked) | neutral
    assert {n for n in dir(JobView) if not n.startswith("_")} == public
    assert DURATION_READS == {"spec.duration"} | (set(checked) - {"spec"})


def test_outlived_estimate_grows_by_the_rule():
    jobs = [job("a", 0.0, 1, 1000.0)]
    cfg = _with(config(training=1, gpus=1), mode="estimate", sigma=0.0, bias=0.25, growth=2.0)
    recorder = Recorder()
    engine = _engine(jobs, recorder, cfg)
    engine.run()
    # estimate 250 samples; at t (ticks every 150 s, the job runs from 0): done = t
    seen = {t: (total, left) for t, _, _, total, left in recorder.seen}
    assert seen[0.0] == (250.0, 250.0)
    assert seen[150.0] == (250.0, 100.0)
    assert seen[300.0] == (500.0, 200.0)     # outlived at 250: doubled
    assert seen[600.0] == (1000.0, 400.0)    # 500 reached at 500: 1000
    assert seen[900.0] == (1000.0, 100.0)
    assert engine.jobs[0].finish_time == 1000.0  # the truth runs as ever


def test_estimate_observation_features_read_the_estimate():
    from lyra_gym.envs.observation import JOB_FEATURES, ObservationBuilder, job_slots, log_time

    jobs = [job("a", 0.0, 1, 1000.0), job("b", 0.0, 1, 400.0)]
    for mode, believed in (("oracle", 400.0), ("estimate", 600.0)):
        cfg = _with(config(training=1, gpus=1), mode=mode, sigma=0.0, bias=1.5)
        engine = _engine(jobs, FifoScheduler(), cfg)
        engine.begin()
        engine.next_decision()
        engine.submit(engine.scheduler.decide(engine.view))  # "a" runs, "b" waits
        builder = ObservationBuilder(4, 0)
        slots = job_slots(engine.view, 4)
        obs = builder.build(engine.view, slots, [])
        row = obs[: builder.job_width]  # the queued "b" comes first
        assert slots[0].id == "b"
        for name in ("remaining_est", "remaining_now"):
            assert row[JOB_FEATURES.index(name)] == np.float32(log_time(believed)), (mode, name)


def test_sigma_zero_bias_one_estimate_is_the_oracle_for_sjf_and_fifo_reads_nothing():
    jobs = [job(f"j{i}", 30.0 * i, 1 + i % 3, 200.0 + 97.0 * ((i * 7) % 5)) for i in range(12)]
    cfg = config(training=1, gpus=4)
    for policy, knowledge in (("sjf", {"mode": "estimate", "sigma": 0.0}), ("fifo", {"mode": "estimate"}),
                              ("fifo", {"mode": "history"})):
        assert run(jobs, policy, _with(cfg, **knowledge)).jobs == run(jobs, policy, cfg).jobs


# ----------------------------------------------------------------------------- history
HISTORY_JOBS = [job("a", 0.0, 1, 100.0), job("b", 0.0, 1, 1000.0), job("c", 0.0, 1, 50.0),
                job("d", 0.0, 1, 70.0, model="flat")]


def _history_seen(monkeypatch=None, knowledge_class=HistoryKnowledge):
    cfg = _with(config(training=1, gpus=1), mode="history", prior_s=777.0)
    if monkeypatch is not None:
        monkeypatch.setattr(engine_module, "build_knowledge", lambda c, jobs, seed: knowledge_class(jobs, c))
    recorder = Recorder()
    _engine(HISTORY_JOBS, recorder, cfg).run()
    return {(t, i): d for t, i, d, _, _ in recorder.seen}


def _check_no_look_ahead(seen):
    """FIFO on one GPU: a 0-100 s, b 100-1100 s, c 1100-1150 s, d (another model) 1150-1220 s."""
    assert seen[(0.0, "b")] == 777.0 and seen[(0.0, "c")] == 777.0  # nothing finished: the prior
    assert seen[(0.0, "d")] == 777.0
    assert seen[(100.0, "b")] == 100.0 and seen[(100.0, "c")] == 100.0  # a finished at 100 s
    assert seen[(100.0, "d")] == 100.0  # no job of its model yet: every finished job
    assert seen[(1050.0, "c")] == 100.0  # b has not finished yet
    assert seen[(1100.0, "c")] == 550.0  # the mean of a and b
    assert seen[(1150.0, "d")] == pytest.approx((100.0 + 1000.0 + 50.0) / 3)
    # b while it runs (from 100 s, done = t - 100): 100 grown by doubling past the work done
    assert seen[(300.0, "b")] == 400.0 and seen[(900.0, "b")] == 1600.0


def test_history_sees_only_jobs_finished_before_now():
    _check_no_look_ahead(_history_seen())


class LookAheadHistory(HistoryKnowledge):
    """A wrong predictor that knows every job of the trace from the start."""

    def __init__(self, jobs, config):
        super().__init__(jobs, config)
        for record in jobs:
            super().finished(record)

    def finished(self, job):
        pass


def test_the_check_fails_on_a_look_ahead_predictor(monkeypatch):
    with pytest.raises(AssertionError):
        _check_no_look_ahead(_history_seen(monkeypatch, LookAheadHistory))


def test_history_falls_back_by_model_then_everything():
    knowledge = HistoryKnowledge([], KnowledgeConfig(mode="history", prior_s=10.0))
    assert knowledge.predicted_duration("toy", 1) == 10.0

    class Record:
        def __init__(self, model, gpus, duration):
            self.spec = job("x", 0.0, gpus, duration, model=model)

    for model, gpus, duration in (("toy", 1, 100.0), ("toy", 2, 300.0), ("flat", 4, 20.0)):
        knowledge.finished(Record(model, gpus, duration))
    assert knowledge.predicted_duration("toy", 2) == 300.0      # same model and size
    assert knowledge.predicted_duration("toy", 8) == 200.0      # same model
    assert knowledge.predicted_duration("other", 1) == 140.0    # everything


# ----------------------------------------------------------------------------- declarations
def test_policies_declare_what_they_read():
    assert declared_reads("fifo") == frozenset() and knowledge_tag(declared_reads("fifo")) == "none"
    assert declared_reads("sjf") == {"spec.duration"} and knowledge_tag(declared_reads("sjf")) == "spec.duration"
    assert knowledge_tag(None) == "undeclared"
    assert knowledge_tag(frozenset({"remaining_work", "expected_finish"})) == "expected_finish, remaining_work"
    assert declared_reads("model:some/path.zip") is None


def test_policies_cli_shows_reads(capsys):
    from lyra_gym.cli.app import main

    assert main(["policies", "--reads"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert lines["fifo"].endswith("reads: none") and lines["sjf"].endswith("reads: spec.duration")


def test_estimate_engine_copies_mid_run_and_pickles():
    import copy
    import pickle

    jobs = [job(f"j{i}", 40.0 * i, 1 + i % 2, 300.0 + 50.0 * i) for i in range(8)]
    cfg = _with(config(training=1, gpus=2), mode="estimate", sigma=1.0)
    engine = _engine(jobs, Recorder(order_by_duration=True), cfg)
    engine.begin()
    for _ in range(5):
        engine.next_decision()
        engine.submit(engine.scheduler.decide(engine.view))
    twin = copy.deepcopy(engine)
    view = pickle.loads(pickle.dumps(engine.view.job_at(3)))
    assert isinstance(view, KnownJobView) and view.total_work == engine.view.job_at(3).total_work
    for e in (engine, twin):
        while e.next_decision():
            e.submit(e.scheduler.decide(e.view))
        e.finish()
    assert [j.finish_time for j in twin.jobs] == [j.finish_time for j in engine.jobs]
    assert twin.scheduler.seen == engine.scheduler.seen


def test_policies_that_declare_no_duration_read_are_unmoved_by_what_they_are_told():
    """Every registered policy declaring ``reads`` empty (fifo, tiresias, pollux) gives the same jobs
    under estimate (sigma 2, biased) and history as under oracle, on a trace with elastic jobs."""
    from lyra_gym.sim.scheduler import available

    jobs = [job(f"j{i}", 40.0 * i, 1 + i % 4, 300.0 + 113.0 * ((i * 5) % 7), elastic=i % 3 == 0,
                lo=1 if i % 3 == 0 else None, hi=8 if i % 3 == 0 else None) for i in range(16)]
    cfg = config(training=2, gpus=4)
    silent = [name for name in available() if declared_reads(name) == frozenset()]
    assert {"fifo", "tiresias", "pollux"} <= set(silent)
    for policy in silent:
        truth = run(jobs, policy, cfg).jobs
        for knowledge in ({"mode": "estimate", "sigma": 2.0, "bias": 3.0}, {"mode": "history"}):
            assert run(jobs, policy, _with(cfg, **knowledge)).jobs == truth, (policy, knowledge)


class SpecChecker(FifoScheduler):
    """FIFO that, at every decision, reads every job's believed ``spec`` twice and checks it
    against the knowledge asked directly (no memo): the view's kept answer is never stale."""

    tick_interval = 150.0

    def __init__(self) -> None:
        super().__init__()
        self.checked = 0

    def decide(self, view):
        for j in [*view.queued_jobs(), *view.running_jobs()]:
            first = j.spec
            know = view._engine.knowledge
            truth = know.duration(view._engine.jobs[j.index], view._engine.jobs[j.index].work_done_at(view.now))
            assert first.duration == truth and j.spec is first
            self.checked += 1
        return super().decide(view)


@pytest.mark.parametrize("mode", ["estimate", "history"])
def test_believed_spec_kept_only_while_work_done_and_knowledge_are_unchanged(mode):
    # estimates that are outlived (growth changes the belief while the job runs) and, under
    # history, finishes that change other jobs' beliefs between two reads of the same view
    jobs = [job(f"j{i}", 40.0 * i, 1 + i % 2, 300.0 + 170.0 * i) for i in range(8)]
    extra = {"sigma": 0.0, "bias": 0.25, "growth": 2.0} if mode == "estimate" else {"growth": 2.0}
    cfg = _with(config(training=2, gpus=1), mode=mode, **extra)
    checker = SpecChecker()
    _engine(jobs, checker, cfg).run()
    assert checker.checked > 20
