"""tools/policy_margin.py: the deviations from the expert, counted by kind, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tools.policy_margin import deviation_kinds, main, table


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


def test_a_run_without_checkpoints_is_a_one_line_error_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "config.yaml").write_text("name: x\n")
    (tmp_path / "checkpoints").mkdir()
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path), "--out", str(tmp_path / "m.csv")])
    assert exit_info.value.code == 2 and "holds no model_<N>_steps.zip" in capsys.readouterr().err
    assert not (tmp_path / "m.csv").exists()
