"""Rules of the Blox GPU-table importer (pal_opt.io.blox) that no other test pinned."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest

from pal_opt.errors import InstanceError
from pal_opt.io import load_blox
from pal_opt.io.blox import instance_from_frames
from pal_opt.model import GpuState


def _csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_quoted_job_ids_in_job_ids_name_the_queued_job(tmp_path):
    # pandas writes a list of text ids as "['7']": the quotes are not part of the id
    gp = _csv(tmp_path / "g.csv", ["GPU_ID", "Node_ID", "IN_USE", "JOB_IDS", "PerfVar_classA"],
              [[0, 0, True, "['7']", 1.0], [1, 0, True, '["7"]', 1.1], [2, 1, False, "", 1.0], [3, 1, False, "", 1.0]])
    jp = _csv(tmp_path / "j.csv", ["job_id", "num_gpus", "perfclass"], [["7", 2, "classA"]])
    inst = load_blox(gp, jp)
    assert [j.placement for j in inst.jobs] == [(0, 1)]
    assert inst.cluster.state.tolist() == [GpuState.FREE] * 4


def test_a_failed_gpu_held_by_a_job_outside_the_queue_is_failed_not_busy(tmp_path):
    gp = _csv(tmp_path / "g.csv", ["GPU_ID", "Node_ID", "IN_USE", "JOB_IDS", "FAILED", "PerfVar_classA"],
              [[0, 0, True, "99", True, 1.0], [1, 0, True, "99", False, 1.0], [2, 1, False, "", False, 1.0]])
    inst = load_blox(gp, None)
    assert inst.cluster.state.tolist() == [GpuState.FAILED, GpuState.BUSY, GpuState.FREE]


def test_gpu_type_cells_are_read_without_surrounding_blanks():
    # a DataFrame's cells are not stripped on the way in (a CSV's are): the type names must be
    gpus = pd.DataFrame({"GPU_ID": [0, 1, 2], "Node_ID": [0, 0, 1], "IN_USE": [False] * 3,
                         "GPU_TYPE": ["V100", " V100 ", "K80 "], "PerfVar_classA": [1.0, 1.0, 1.0]})
    jobs = pd.DataFrame({"job_id": [1], "num_gpus": [1], "perfclass": ["classA"]})
    cl = instance_from_frames(gpus, jobs).cluster
    assert sorted(cl.type_names) == ["K80", "V100"]
    assert [cl.type_names[int(t)] for t in cl.type_of] == ["V100", "V100", "K80"]


def test_a_perfvar_column_without_a_class_name_is_refused(tmp_path):
    gp = _csv(tmp_path / "g.csv", ["GPU_ID", "Node_ID", "IN_USE", "PerfVar_classA", "PerfVar_"],
              [[0, 0, False, 1.0, 1.0], [1, 0, False, 1.0, 1.0]])
    with pytest.raises(InstanceError, match="'PerfVar_' names no class"):
        load_blox(gp, None)
