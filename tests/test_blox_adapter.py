"""The Blox adapter, driven with objects of exactly Blox's shape (no Blox import)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from pal_opt.adapters.blox import BloxPlacement
from pal_opt.check import check
from pal_opt.errors import InstanceError, OptionError, TableError
from pal_opt.io.blox import frames_round

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
FILES = sorted((SHARED / "reference" / "pal").glob("*.json")) if SHARED.is_dir() else []


def blox_state(doc: dict) -> tuple[SimpleNamespace, SimpleNamespace, dict]:
    """job_state, cluster_state and new_job_schedule for a reference round."""
    nodes, per = doc["nodes"], doc["gpus_per_node"]
    n = nodes * per
    busy = set(doc["busy_gpus"])
    gpu_df = pd.DataFrame(
        {
            "GPU_ID": range(n),
            "GPU_UUID": [f"GPU-{g}" for g in range(n)],
            "Local_GPU_ID": [g % per for g in range(n)],
            "Node_ID": [g // per for g in range(n)],
            "IP_addr": ["10.0.0.1"] * n,
            "IN_USE": [g in busy for g in range(n)],
            "JOB_IDS": [10**6 if g in busy else None for g in range(n)],
            **{f"PerfVar_{c}": doc["perfvar"][c] for c in sorted(doc["perfvar"])},
        }
    )
    active = {
        j["id"]: {"num_GPUs": j["num_gpus"], "perfclass": j["perfclass"], "job_model": j["model"], "is_running": False}
        for j in doc["jobs"]
    }
    order = {"job_order": [(j["id"], 0) for j in doc["jobs"]], "scheduler": None}
    return SimpleNamespace(active_jobs=active), SimpleNamespace(gpu_df=gpu_df), order


@pytest.mark.skipif(not FILES, reason="reference rounds not available")
@pytest.mark.parametrize("method", ["pal", "pmfirst"])
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_adapter_places_what_the_artifact_places(path: Path, method: str) -> None:
    doc = json.loads(path.read_text())
    job_state, cluster_state, schedule = blox_state(doc)
    policy = BloxPlacement(SimpleNamespace(locality_penalty=doc["locality_penalty"]), method=method)
    terminate, launch = policy.place(job_state, cluster_state, schedule)
    want = doc["expected"][method]["placements"]
    assert terminate == []
    assert {str(k) for k in launch} == set(want)
    assert all(sorted(launch[int(k)]) == sorted(v) for k, v in want.items())
    assert all(isinstance(k, int) for k in launch)  # Blox's own id type comes back


def small_cluster() -> pd.DataFrame:
    n = 16
    return pd.DataFrame(
        {
            "GPU_ID": range(n),
            "Node_ID": [g // 4 for g in range(n)],
            "IN_USE": [False] * n,
            "JOB_IDS": [None] * n,
            "PerfVar_classA": [1.0, 1.2, 0.95, 1.0, 1.3, 1.0, 0.9, 1.05, 1.0, 1.0, 1.1, 0.97, 1.0, 1.02, 1.0, 1.4],
            "PerfVar_classB": [1.0] * n,
        }
    )


def commit(gpu_df: pd.DataFrame, active: dict, terminate: list, launch: dict) -> None:
    """What Blox does with the answer: free terminated jobs, start launched ones."""
    for jid in terminate:
        gpu_df.loc[gpu_df["JOB_IDS"] == jid, ["IN_USE", "JOB_IDS"]] = [False, None]
        active[jid]["is_running"] = False
    for jid, gpus in launch.items():
        gpu_df.loc[gpu_df["JOB_IDS"] == jid, ["IN_USE", "JOB_IDS"]] = [False, None]
        gpu_df.loc[gpu_df["GPU_ID"].isin(gpus), ["IN_USE", "JOB_IDS"]] = [True, jid]
        active[jid]["is_running"] = True


@pytest.mark.parametrize("method", ["pal", "pmfirst", "packed", "packed-sticky", "random", "ilp"])
def test_multi_round_loop(method: str) -> None:
    gpu_df = small_cluster()
    gpu_df["JOB_IDS"] = gpu_df["JOB_IDS"].astype(object)
    active: dict = {}
    policy = BloxPlacement(SimpleNamespace(locality_penalty=1.7), method=method)
    arrivals = [[(1, 4, "classA"), (2, 2, "classB")], [(3, 8, "classA")], [(4, 1, "classA"), (5, 2, "classB")]]
    for batch in arrivals:
        for jid, d, c in batch:
            active[jid] = {"num_GPUs": d, "perfclass": c, "is_running": False}
        schedule = {"job_order": [(j, 0) for j in sorted(active)]}
        inst = policy.instance(SimpleNamespace(active_jobs=active), SimpleNamespace(gpu_df=gpu_df), schedule)
        terminate, launch = policy.place(SimpleNamespace(active_jobs=active), SimpleNamespace(gpu_df=gpu_df), schedule)
        assert policy.last_result is not None
        assert check(inst, policy.last_result) == []
        running_before = {j for j, v in active.items() if v["is_running"]}
        assert set(terminate) <= running_before
        if method == "packed-sticky":
            assert not (set(launch) & (running_before - set(terminate)))
        commit(gpu_df, active, terminate, launch)
        used = gpu_df.loc[gpu_df["IN_USE"], "GPU_ID"].tolist()
        assert len(used) == len(set(used))
        held = sum(active[j]["num_GPUs"] for j in active if active[j]["is_running"])
        assert held == len(used) <= 16
    assert policy.policy.rounds == len(arrivals)


def test_locality_penalty_is_read_from_args() -> None:
    assert BloxPlacement(SimpleNamespace(locality_penalty=2.5)).locality_penalty == 2.5
    assert BloxPlacement(SimpleNamespace()).locality_penalty == 1.7
    assert BloxPlacement(None).locality_penalty == 1.7


def test_round_parameters_set_between_rounds_apply_to_the_next_round() -> None:
    """The adapter's ``locality_penalty``, ``round_length``, ``restart_cost`` and ``binning`` are
    read at each round, as they were before the round parameters were built once in ``__init__``
    (ab33ec0): a caller that set ``policy.round_length = 100`` got rounds of 360 s without a word."""
    gpu_df = pd.DataFrame({"GPU_ID": [0, 1, 2, 3], "Node_ID": [0, 0, 1, 1], "IN_USE": [False] * 4,
                           "JOB_IDS": [None] * 4, "PerfVar_classA": [1.0, 1.3, 0.9, 1.0]})
    state = SimpleNamespace(active_jobs={5: {"num_GPUs": 2, "perfclass": "classA", "is_running": False}})
    policy = BloxPlacement(SimpleNamespace(locality_penalty=1.7), method="pal")
    first = policy.instance(state, SimpleNamespace(gpu_df=gpu_df), {"job_order": [5]}).params
    assert (first.locality_penalty, first.round_length, first.restart_cost) == (1.7, 360.0, 0.0)
    policy.locality_penalty, policy.round_length, policy.restart_cost, policy.binning = 3.0, 100.0, 5.0, "none"
    then = policy.instance(state, SimpleNamespace(gpu_df=gpu_df), {"job_order": [5]}).params
    assert (then.locality_penalty, then.round_length, then.restart_cost, then.binning) == (3.0, 100.0, 5.0, "none")


def test_ilp_backend_and_options_pass_through() -> None:
    policy = BloxPlacement(None, method="ilp", backend="highs", admission="backfill", time_limit=5)
    active = {7: {"num_GPUs": 3, "perfclass": "classA", "is_running": False}}
    _, launch = policy.place(SimpleNamespace(active_jobs=active), SimpleNamespace(gpu_df=small_cluster()),
                             {"job_order": [(7, 0)]})
    assert list(launch) == [7] and len(launch[7]) == 3
    assert policy.last_result is not None and policy.last_result.backend == "highs"
    with pytest.raises(OptionError):
        BloxPlacement(None, method="pal", time_limit=5)


@pytest.mark.parametrize(
    ("active", "order", "gpu_df", "where"),
    [
        ({}, [(1, 0)], small_cluster(), "active_jobs"),
        ({1: {"perfclass": "classA"}}, [(1, 0)], small_cluster(), "active_jobs[1]"),
        ({1: {"num_GPUs": 0, "perfclass": "classA"}}, [(1, 0)], small_cluster(), "active_jobs[1].num_GPUs"),
        ({1: {"num_GPUs": 2, "model": "nosuchnet"}}, [(1, 0)], small_cluster(), "model"),
        ({1: {"num_GPUs": 2, "perfclass": "classA"}}, [(1, 0)], small_cluster().drop(columns=["Node_ID"]), "Node_ID"),
        ({1: {"num_GPUs": 2, "perfclass": "classA"}}, [(1, 0)], "not a frame", "gpu_df"),
        ({1: {"num_GPUs": 2, "perfclass": "classA"}}, None, small_cluster(), "job_order: must be a list"),
        ({1: {"num_GPUs": 2, "perfclass": "classA"}}, "1", small_cluster(), "job_order: must be a list"),
    ],
)
def test_bad_blox_state_is_a_clear_error(active: dict, order: list, gpu_df: object, where: str) -> None:
    policy = BloxPlacement(None)
    with pytest.raises(InstanceError) as err:
        policy.place(SimpleNamespace(active_jobs=active), SimpleNamespace(gpu_df=gpu_df), {"job_order": order})
    assert where in str(err.value)


@pytest.mark.parametrize("frame", [small_cluster(), small_cluster().iloc[:0]], ids=["gpus", "no-gpus-yet"])
def test_a_job_twice_in_the_job_order_is_said_of_the_job_order(frame: pd.DataFrame) -> None:
    # it was "job_state: active_jobs[1]: duplicate job id '1' (also on row 0)": a row of the
    # adapter's own jobs frame, which Blox never built, under the wrong field
    with pytest.raises(InstanceError) as err:
        BloxPlacement(None).place(SimpleNamespace(active_jobs={1: {"num_GPUs": 2, "perfclass": "classA"}}),
                                  SimpleNamespace(gpu_df=frame), {"job_order": [(1, 0), (1, 5)]})
    assert str(err.value) == "new_job_schedule: job_order[1]: job 1 is in the job order twice (also job_order[0])"


def test_a_duplicate_gpu_id_in_gpu_df_names_both_rows_as_rows() -> None:
    df = small_cluster()
    df.loc[1, "GPU_ID"] = df.loc[0, "GPU_ID"]
    with pytest.raises(InstanceError, match=r"gpu_df: row 1, column GPU_ID: duplicate GPU id 0 \(also on row 0\)$"):
        BloxPlacement(None).place(SimpleNamespace(active_jobs={1: {"num_GPUs": 2, "perfclass": "classA"}}),
                                  SimpleNamespace(gpu_df=df), {"job_order": [(1, 0)]})


@pytest.mark.parametrize(
    ("job", "gpu_df", "where", "message"),
    [
        ({"num_GPUs": 0, "perfclass": "classA"}, small_cluster(), "active_jobs[7].num_GPUs",
         "must be a positive integer, got '0'"),
        ({"num_GPUs": 2, "perfclass": "classA", "priority": -3}, small_cluster(), "active_jobs[7].priority",
         "must be an integer in 0..1000000, got '-3'"),
        ({"num_GPUs": 1, "perfclass": "classA"},  # the importer's cross-check: a whole row, no column
         small_cluster().assign(IN_USE=[g < 2 for g in range(16)], JOB_IDS=[7 if g < 2 else None for g in range(16)]),
         "active_jobs[7]", "job 7 needs 1 GPU but holds 2 in gpu_df (GPUs [0, 1])"),
    ],
    ids=["cell", "optional-cell", "row"],
)
def test_a_job_s_error_is_named_from_the_error_s_row_not_its_wording(
        monkeypatch: pytest.MonkeyPatch, job: dict, gpu_df: pd.DataFrame, where: str, message: str) -> None:
    """The adapter named the Blox job of an error about its jobs frame by parsing ``row N, column
    X`` back out of the error's path: the importers rewording their errors would have left it
    saying ``jobs: row 1``, a row of a frame Blox never built.  It reads the error's row and column
    (``TableError``): the job is named whatever the wording."""
    state = (SimpleNamespace(active_jobs={5: {"num_GPUs": 2, "perfclass": "classA", "priority": 1}, 7: job}),
             SimpleNamespace(gpu_df=gpu_df), {"job_order": [(5, 0), (7, 0)]})
    with pytest.raises(InstanceError) as err:
        BloxPlacement(None).place(*state)
    assert str(err.value) == f"job_state: {where}: {message}"

    def reworded(*args: object, **kwargs: object) -> object:  # the importers, worded otherwise
        try:
            return frames_round(*args, **kwargs)
        except TableError as exc:
            raise TableError(f"rejected ({exc.message})", source=exc.source, path=f"entry #{exc.row + 1} of the queue",
                             row=exc.row, column=exc.column) from None

    monkeypatch.setattr("pal_opt.adapters.blox.frames_round", reworded)
    with pytest.raises(InstanceError) as err:
        BloxPlacement(None).place(*state)
    assert str(err.value) == f"job_state: {where}: rejected ({message})"


def test_no_gpu_registered_yet_places_nothing() -> None:
    """Blox's scheduler loop calls place() from its first round, before any node has registered:
    gpu_df has Blox's columns and no rows (not even PerfVar_ ones).  The artifact's PAL places
    nothing then; the adapter raised "no PerfVar_<class> column" / "the cluster has no GPUs"."""
    policy = BloxPlacement(None, method="pal")
    active = {1: {"num_GPUs": 2, "perfclass": "classA", "is_running": False}}
    schedule = {"job_order": [(1, 0)]}
    for empty in (pd.DataFrame(columns=["GPU_ID", "GPU_UUID", "Local_GPU_ID", "Node_ID", "IP_addr", "IN_USE",
                                        "JOB_IDS"]), small_cluster().iloc[0:0]):
        assert policy.place(SimpleNamespace(active_jobs=active), SimpleNamespace(gpu_df=empty), schedule) == ([], {})
        assert policy.last_result is None
        with pytest.raises(InstanceError, match="not in active_jobs"):  # the queue is still checked
            policy.place(SimpleNamespace(active_jobs={}), SimpleNamespace(gpu_df=empty), schedule)
    # the nodes register: the next round places the job
    _, launch = policy.place(SimpleNamespace(active_jobs=active), SimpleNamespace(gpu_df=small_cluster()), schedule)
    assert list(launch) == [1] and len(launch[1]) == 2


def test_an_oversized_job_is_warned_of_once_in_blox_terms(caplog: pytest.LogCaptureFixture) -> None:
    """A queued job bigger than the cluster is kept (unplaceable) and warned of, as the job Blox
    gave (``active_jobs[1]``), once: it said ``jobs: row 0``, a row of the adapter's own jobs
    frame, and said it again at every round, as a misspelt ``gpu_df`` column was."""
    policy = BloxPlacement(None, method="pal", admission="backfill")
    active = {1: {"num_GPUs": 64, "perfclass": "classA", "is_running": False},
              2: {"num_GPUs": 2, "perfclass": "classA", "is_running": False}}
    gpu_df = small_cluster().assign(Rak_ID=0)
    with caplog.at_level("WARNING", logger="pal_opt"):
        for _ in range(3):
            _, launch = policy.place(SimpleNamespace(active_jobs=active), SimpleNamespace(gpu_df=gpu_df),
                                     {"job_order": [(2, 0), (1, 0)]})
            assert list(launch) == [2]
    assert [r.getMessage() for r in caplog.records] == [
        "gpu_df: column 'Rak_ID' is not used; did you mean 'Rack_ID'?",
        "job_state: active_jobs[1]: job 1 needs 64 GPUs but the cluster has 16; kept in the queue, it cannot be placed"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="pal_opt"):  # a new adapter warns again
        BloxPlacement(None, method="pal", admission="backfill").place(
            SimpleNamespace(active_jobs=active), SimpleNamespace(gpu_df=gpu_df), {"job_order": [(1, 0)]})
    assert len(caplog.records) == 2


def test_warnings_are_known_again_by_what_they_are_about_not_by_their_text(
        caplog: pytest.LogCaptureFixture) -> None:
    """The adapter knew a warning again by its text, after parsing the job's row back out of it:
    as nodes registered, an oversized job's warning ("the cluster has 16", then 20) was logged
    again every round.  Warnings are structured at the importer now (kind, table, row, columns):
    two jobs with warnings of the same shape are each logged once, a job is the same job when
    it moves in the queue and the figures change, and a bad device number in another row of
    ``gpu_df`` is a new warning."""
    policy = BloxPlacement(None, method="pal", admission="backfill")
    active = {1: {"num_GPUs": 64, "perfclass": "classA", "is_running": False},
              2: {"num_GPUs": 2, "perfclass": "classA", "is_running": False},
              3: {"num_GPUs": 32, "perfclass": "classA", "is_running": False}}
    cluster = small_cluster()
    cluster.insert(1, "Local_GPU_ID", [g % 4 for g in range(16)])
    orders = ([(2, 0), (1, 0), (3, 0)], [(3, 0), (2, 0), (1, 0)], [(1, 0), (3, 0), (2, 0)])
    logged: list[list[str]] = []
    for k, order in enumerate(orders):
        gpu_df = pd.concat([cluster, cluster.iloc[:4 * k].assign(GPU_ID=lambda d: d["GPU_ID"] + 16,
                                                                   Node_ID=lambda d: d["Node_ID"] + 4)],
                           ignore_index=True)  # a node more registered each round
        gpu_df.loc[1 if k < 2 else 3, "Local_GPU_ID"] = -1  # row 1, then row 3
        caplog.clear()
        with caplog.at_level("WARNING", logger="pal_opt"):
            _, launch = policy.place(SimpleNamespace(active_jobs=active), SimpleNamespace(gpu_df=gpu_df),
                                     {"job_order": order})
        assert list(launch) == [2]
        logged.append([r.getMessage() for r in caplog.records])
    set_aside = ": must be a non-negative integer (a device number), got '-1'; Local_GPU_ID set aside: the exports " \
                "number each node's GPUs by rank"
    assert logged[0] == [
        f"gpu_df: row 1, column Local_GPU_ID{set_aside}",
        "job_state: active_jobs[1]: job 1 needs 64 GPUs but the cluster has 16; kept in the queue, it cannot be placed",
        "job_state: active_jobs[3]: job 3 needs 32 GPUs but the cluster has 16; kept in the queue, it cannot be placed"]
    assert logged[1] == []  # the cluster has 20 GPUs, jobs 1 and 3 are in other rows: the same warnings
    assert logged[2] == [f"gpu_df: row 3, column Local_GPU_ID{set_aside}"]  # another row: another warning


def test_job_ids_come_back_as_blox_gave_them() -> None:
    """A float id (5.0) is read as the integer 5; it was looked up again as the text '5' and
    the round raised a bare KeyError.  Ids now come back by queue position, as given."""
    gpu_df = pd.DataFrame({"GPU_ID": [0, 1, 2, 3], "Node_ID": [0, 0, 1, 1], "IN_USE": [False] * 4,
                           "JOB_IDS": [None] * 4, "PerfVar_classA": [1.0, 1.3, 0.9, 1.0],
                           "PerfVar_classB": [1.0] * 4})
    active = {5.0: {"num_GPUs": 2, "perfclass": "classA"}, "7": {"num_GPUs": 1, "perfclass": "classB"}}
    policy = BloxPlacement(SimpleNamespace(locality_penalty=1.7), method="pal")
    terminate, launch = policy.place(SimpleNamespace(active_jobs=active), SimpleNamespace(gpu_df=gpu_df),
                                     {"job_order": [5.0, "7"]})
    assert terminate == [] and set(launch) == {5.0, "7"}
    assert [type(k) for k in launch] == [float, str]


def test_a_deadline_is_refused_at_construction():
    """A deadline is a moment of one round; Blox's rounds run back to back (README said it was taken)."""
    import time as _time

    from pal_opt.adapters.blox import BloxPlacement
    from pal_opt.errors import OptionError

    with pytest.raises(OptionError, match="deadline applies to one round: give it to"):
        BloxPlacement(None, method="ilp", deadline=_time.monotonic() + 5)
    assert BloxPlacement(None, method="ilp", time_limit=None).policy.options.get("time_limit") is None
