"""Rules of the Blox adapter (pal_opt.adapters.blox) that no other test pinned, driven with
objects of Blox's shape."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from pal_opt.adapters.blox import BloxPlacement
from pal_opt.errors import InstanceError, OptionError
from pal_opt.options import SolveOptions


def _gpus(n: int = 4, per: int = 2, **cols: list) -> pd.DataFrame:
    df = pd.DataFrame({"GPU_ID": range(n), "Node_ID": [g // per for g in range(n)], "IN_USE": [False] * n,
                       "JOB_IDS": [None] * n, "PerfVar_classA": [1.0] * n, **cols})
    df["JOB_IDS"] = df["JOB_IDS"].astype(object)
    return df


def _place(policy: BloxPlacement, active: dict, gpu_df: pd.DataFrame, order: list):
    return policy.place(SimpleNamespace(active_jobs=active), SimpleNamespace(gpu_df=gpu_df), {"job_order": order})


def _instance(policy: BloxPlacement, active: dict, gpu_df: pd.DataFrame, order: list):
    return policy.instance(SimpleNamespace(active_jobs=active), SimpleNamespace(gpu_df=gpu_df), {"job_order": order})


@pytest.mark.parametrize("entry, message", [((), "empty entry"), ({(1, "V100"): 1.0}, "Gavel-style")])
def test_a_bad_job_order_entry_is_named(entry, message) -> None:
    active = {1: {"num_GPUs": 1, "perfclass": "classA"}}
    with pytest.raises(InstanceError, match=message) as exc:
        _place(BloxPlacement(None), active, _gpus(), [entry])
    assert exc.value.path == "job_order[0]"


def test_started_wins_over_start_time_and_a_none_key_falls_through_to_the_next() -> None:
    active = {1: {"num_GPUs": 1, "perfclass": "classA", "started": 100.0, "start_time": 5.0,
                  "priority": None, "job_priority": 3}}
    job = _instance(BloxPlacement(None), active, _gpus(), [1]).jobs[0]
    assert job.started == 100.0
    assert job.priority == 3


def test_the_class_comes_from_blox_job_model_key() -> None:
    # Blox's job dicts name the model under "job_model"; the class follows from it
    active = {1: {"num_GPUs": 1, "job_model": "resnet50"}}
    job = _instance(BloxPlacement(None), active, _gpus(), [1]).jobs[0]
    assert job.model == "resnet50" and job.perfclass == "classA"


def test_constructor_refuses_a_boolean_lambda_and_defaults_restart_cost_to_zero() -> None:
    with pytest.raises(OptionError, match="locality_penalty must be a number"):
        BloxPlacement(SimpleNamespace(locality_penalty=True))
    inst = _instance(BloxPlacement(None), {1: {"num_GPUs": 1, "perfclass": "classA"}}, _gpus(), [1])
    assert inst.params.restart_cost == 0.0


def test_options_object_with_backend_or_a_dict_is_refused() -> None:
    from pal_opt.errors import InputTypeError

    with pytest.raises(InputTypeError, match=r"^options: give either options= or keyword options \(and backend=\), "
                                             r"not both$"):  # a pal-opt error (and a TypeError): Python's own before
        BloxPlacement(None, method="ilp", backend="highs", options=SolveOptions(gap=0.1))
    with pytest.raises(OptionError, match="must be a SolveOptions"):
        BloxPlacement(None, method="ilp", options={"gap": 0.1})


def _running_job_kept() -> tuple[dict, pd.DataFrame]:
    gpu_df = _gpus(JOB_IDS=[7, 7, None, None], IN_USE=[True, True, False, False])
    return {7: {"num_GPUs": 2, "perfclass": "classA", "is_running": True}}, gpu_df


def test_a_non_sticky_method_relists_a_job_kept_on_its_gpus() -> None:
    active, gpu_df = _running_job_kept()
    assert _place(BloxPlacement(None, method="packed"), active, gpu_df, [7]) == ([], {7: [0, 1]})


def test_packed_sticky_launches_only_new_jobs() -> None:
    active, gpu_df = _running_job_kept()
    active[8] = {"num_GPUs": 2, "perfclass": "classA", "is_running": False}
    terminate, launch = _place(BloxPlacement(None, method="packed-sticky"), active, gpu_df, [7, 8])
    assert terminate == [] and launch == {8: [2, 3]}


def test_a_terminated_job_comes_back_with_blox_id() -> None:
    # job 5.0 runs on GPU 0, which failed: it must move, so Blox is told to terminate 5.0 (a float, as given)
    gpu_df = _gpus(JOB_IDS=[5.0, None, None, None], IN_USE=[True, False, False, False],
                   FAILED=[True, False, False, False])
    active = {5.0: {"num_GPUs": 1, "perfclass": "classA", "is_running": True}}
    terminate, launch = _place(BloxPlacement(None, method="pal"), active, gpu_df, [5.0])
    assert terminate == [5.0] and [type(j) for j in terminate] == [float]
    assert list(launch) == [5.0] and launch[5.0] != [0]


def test_an_empty_gpu_df_clears_the_last_result() -> None:
    policy = BloxPlacement(None)
    active = {1: {"num_GPUs": 1, "perfclass": "classA"}}
    _place(policy, active, _gpus(), [1])
    assert policy.last_result is not None
    assert _place(policy, active, _gpus().iloc[0:0], [1]) == ([], {})
    assert policy.last_result is None
