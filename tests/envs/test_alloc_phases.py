"""The phases of an Alloc decision point as small classes (``lyra_gym/envs/alloc_phases.py``), the
working plan they share (``alloc_plan.py``) and ``plan.touched_job_ids``.

Hand-computed toy decisions (tests/toy.py): which phase follows which, what each holds, and
that the decision's attributes read the phase they belong to.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from lyra_gym.envs.alloc import JOB, PHASES, PLACE, WAIT, AllocDecision, AllocLayout
from lyra_gym.envs.alloc_phases import BorrowPhase, JobPhase, PlacePhase, ReturnPhase
from lyra_gym.model.demand import DemandCurve
from lyra_gym.sim.plan import TrackedAllocations, touched_job_ids
from toy import engine_at_first_decision, job

LAYOUT = AllocLayout(k=4, m=2, b=2)
PHASE_CLASSES = (BorrowPhase, ReturnPhase, JobPhase, PlacePhase)



def test_touched_job_ids_reads_the_writes_of_tracked_allocations_and_else_every_id():
    current = {"a": {0: 1}, "b": {1: 2}}
    tracked = TrackedAllocations(current, token=None)
    tracked["c"] = {2: 1}
    del tracked["a"]
    tracked["b"] = {1: 2}  # written with the same value: still a candidate
    assert touched_job_ids(tracked, current) == ["c", "a", "b"]
    plain = {"b": {1: 2}, "d": {0: 4}}
    assert touched_job_ids(plain, current) == ["b", "d", "a"]  # first seen first: plan's, then current's
    assert touched_job_ids({}, {}) == []


def test_each_phase_holds_only_its_own_state():
    assert [cls.index for cls in PHASE_CLASSES] == list(range(len(PHASES)))
    assert [cls.__slots__ for cls in PHASE_CLASSES] == [(), ("returns",), ("working",),
                                                        ("job_phase", "selected", "options")]
    assert not any(hasattr(cls(*args), "__dict__") for cls, args in ((BorrowPhase, ()), (ReturnPhase, ())))


def test_borrow_then_return_then_job_and_place_each_phase_in_turn():
    # One 4-GPU training server, one 8-GPU inference server idle until t=100 (then reclaimed).
    demand = DemandCurve(np.array([0.0, 100.0]), np.array([0, 1]))
    engine = engine_at_first_decision([job("A", 0, 8, 10_000, True, 2, 8)], inference=1, demand=demand)
    decision = AllocDecision(engine.view, engine.scheduler, LAYOUT)
    assert type(decision.stage) is BorrowPhase and decision.working is None and decision.proposal is None
    assert decision.options == [] and decision.selected is None
    with pytest.raises(AttributeError, match="no proposal yet"):
        decision.must
    assert decision.cluster_extras()[7] == 0.0  # nothing owed yet
    decision.step(LAYOUT.b)  # borrow all
    job_phase = decision.stage
    assert type(job_phase) is JobPhase and job_phase.working is decision.working
    assert decision.borrow_level == LAYOUT.b and decision.borrow_fraction is None
    decision.step(0)  # pick A
    place = decision.stage
    assert type(place) is PlacePhase and place.selected == 0 and place.job_phase is job_phase
    assert decision.selected == 0 and decision.options is place.options and decision.phase == PLACE
    assert decision.job_extras()[0, 1] == 1.0  # the "selected" feature of A's row
    decision.step(LAYOUT.place_index(1, 2))  # 8 GPUs on the loaned server
    assert decision.stage is job_phase and decision.phase == JOB and decision.options == []
    assert decision.picked == {"A"} and decision.job_extras()[0, :2].tolist() == [1.0, 0.0]
    assert decision.step(LAYOUT.stop) and decision.stage is job_phase  # committed: the job phase stays
    engine.submit(decision.plan)
    while engine.next_decision() and engine.tick_only:
        engine.submit(engine.view.current_plan())
    assert engine.view.reclaim_pending == 1
    decision = AllocDecision(engine.view, engine.scheduler, LAYOUT)
    returning = decision.stage
    assert type(returning) is ReturnPhase and returning.returns == []
    extras = decision.cluster_extras()
    assert extras[1] == 1.0 and extras[7] == 1.0  # phase one-hot; one server still to return (1 / 1)
    decision.step(1)
    assert type(decision.stage) is JobPhase and decision.proposal.give_back == (1,)
    assert returning.returns == [1] and decision.must == {"A"}
    assert decision.cluster_extras()[7] == 0.0


def test_a_decision_pickles_in_each_phase_and_continues_identically():
    engine = engine_at_first_decision([job("A", 0, 4, 1000), job("B", 0, 4, 100)])
    decision = AllocDecision(engine.view, engine.scheduler, LAYOUT)
    decision.step(0)  # place phase
    twin = pickle.loads(pickle.dumps(decision))
    assert type(twin.stage) is PlacePhase and twin.stage.job_phase.working is twin.working
    value = LAYOUT.place_index(0, 0)  # A on the training server's 4 GPUs
    assert np.array_equal(decision.masks(), twin.masks()) and decision.masks()[value] and decision.masks()[WAIT]
    decision.step(value)
    twin.step(value)
    assert np.array_equal(decision.masks(), twin.masks()) and decision.expert() == twin.expert()
    assert decision.step(LAYOUT.auto) and twin.step(LAYOUT.auto)
    assert dict(decision.plan.allocations) == dict(twin.plan.allocations)
