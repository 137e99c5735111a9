"""tools/policy_margin.py: the deviations from the expert, counted by kind, by hand."""

from __future__ import annotations

import numpy as np

from tools.policy_margin import deviation_kinds, table


def test_deviations_are_counted_by_the_policys_value_and_loaning_apart():
    # 4 job slots, then a borrow level and two return levels (Cluster-v2's layout)
    argmax = np.array([0, 5, 3, 2, 1, 0, 2])
    flipped = np.array([True, True, True, False, True, True, False])
    # job slots: 0 -> hold, 5 -> preempt, 3 -> weight; slot 3 unflipped; loaning dims 4, 5 flipped
    assert deviation_kinds(argmax, flipped, job_slots=4).tolist() == [1, 1, 1, 2]
    assert deviation_kinds(argmax, np.zeros(7, bool), job_slots=4).tolist() == [0, 0, 0, 0]


def test_the_table_shows_the_kinds_beside_the_total(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("checkpoint,steps,choice_dims,argmax_not_expert,to_hold,to_preempt,to_weight,loaning,"
                    "p_expert_action_median,min_gap_nats_median\nmodel_1000_steps.zip,1000,2865,7,1,2,3,1,0.5,-0.25\n")
    assert table(path).splitlines()[2] == "| 1,000 | 2,865 | 7 (1 / 2 / 3 / 1) | 0.5 | -0.25 |"
