"""GPU device numbers: read from Blox's ``Local_GPU_ID``, ``gres.conf``'s ``File=/dev/nvidiaN`` and
the instance file's ``cluster.gpus.device``, kept through the instance file, the cluster graph
and GraphML, and written by the exports (``gpu_indices``, a pod's ``gpus``, ``Local_GPU_ID``).
Without them the exports number a host's GPUs by rank, as before.  Bad device numbers are one
error line naming file and field, exit status 2, nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pal_opt.cli import main
from pal_opt.errors import InstanceError
from pal_opt.io import instance_from_dict, instance_to_dict
from pal_opt.io.blox import blox_gpu_rows, load_blox
from pal_opt.io.instance_write import dumps_instance
from pal_opt.model import Cluster, Job, RoundInstance
from pal_opt.topology import load_slurm, parse_graphml, to_cluster
from pal_opt.topology.graphml import graphml_text
from pal_opt.topology.kubernetes import pod_placements
from pal_opt.topology.placement import local_indices
from pal_opt.topology.slurm import slurm_rows

DATA = Path(__file__).resolve().parents[1] / "examples" / "data"
TOPOLOGY = "SwitchName=s0 Nodes=n[1-2]\n"


def _round(devices: list[int] | None) -> RoundInstance:
    """Two servers of four GPUs (ids 0-7), one job of three GPUs."""
    cl = Cluster.from_arrays(range(8), ["n1"] * 4 + ["n2"] * 4, {"classA": [1.0] * 8}, devices=devices)
    return RoundInstance(cl, (Job("a", 3, "classA"),))


def test_exports_name_gpus_by_device_number_when_the_cluster_has_them():
    placement = {"placements": {"a": [1, 2, 4]}}
    ranked = slurm_rows(_round(None), placement)[0]
    assert ranked["gpu_indices"] == "n1:1-2 n2:0"
    numbered = _round([7, 5, 3, 1, 0, 2, 4, 6])
    row = slurm_rows(numbered, placement)[0]
    assert row["gpu_indices"] == "n1:3,5 n2:0"  # GPUs 1 and 2 are devices 5 and 3 of n1, GPU 4 device 0 of n2
    pods = pod_placements(numbered, placement)["items"]
    assert [(p["node"], p["gpus"]) for p in pods] == [("n1", [3, 5]), ("n2", [0])]


def test_local_indices_are_ranks_without_device_numbers():
    cl = Cluster.from_arrays([10, 3, 7, 1], ["x", "x", "y", "y"], {"classA": [1.0] * 4})
    assert local_indices(cl).tolist() == [1, 0, 1, 0]
    with_devices = Cluster.from_arrays([10, 3, 7, 1], ["x", "x", "y", "y"], {"classA": [1.0] * 4},
                                       devices=[4, 6, 0, 2])
    assert local_indices(with_devices).tolist() == [4, 6, 0, 2]


def test_device_numbers_survive_the_instance_file_the_graph_and_graphml():
    inst = _round([7, 5, 3, 1, 0, 2, 4, 6])
    doc = instance_to_dict(inst)
    assert doc["cluster"]["gpus"]["device"] == [7, 5, 3, 1, 0, 2, 4, 6]
    back = instance_from_dict(json.loads(dumps_instance(inst)))
    assert back.cluster.devices.tolist() == [7, 5, 3, 1, 0, 2, 4, 6]
    assert Cluster.from_graph(inst.cluster.graph).devices.tolist() == [7, 5, 3, 1, 0, 2, 4, 6]
    assert to_cluster(parse_graphml(graphml_text(inst.cluster))).devices.tolist() == [7, 5, 3, 1, 0, 2, 4, 6]
    assert "device" not in instance_to_dict(_round(None))["cluster"]["gpus"]
    assert to_cluster(parse_graphml(graphml_text(_round(None).cluster))).devices is None


@pytest.mark.parametrize("devices, message", [
    ([0, 1, 2, 1, 0, 1, 2, 3], "GPUs 1 and 3 of server 'n1' have the same device number 1"),
    ([0, 1, 2, -3, 0, 1, 2, 3], "integers >= 0, got -3"),
    ([0, 1, 2, 3], "one device number per GPU"),
])
def test_bad_device_numbers_in_the_model(devices, message):
    with pytest.raises(InstanceError, match=message):
        _round(devices)


def test_the_same_device_number_twice_on_a_server_of_an_instance_file(tmp_path, capsys):
    doc = instance_to_dict(_round([0, 1, 2, 3, 0, 1, 2, 3]))
    doc["cluster"]["gpus"]["device"][6] = 0  # GPU 6 of n2 is also device 0, like GPU 4
    bad = tmp_path / "round.json"
    bad.write_text(json.dumps(doc))
    out = tmp_path / "placement.json"
    rc = main(["solve", str(bad), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and not out.exists()
    assert err == (f"pal-opt: error: {bad}: cluster.gpus.device[6]: device 0 of server 'n2' is also "
                   "cluster.gpus.device[4] (a server's GPUs have distinct device numbers)")


def _gpu_df(path: Path, local_ids: list[object] | None) -> Path:
    header = ["GPU_ID", "Node_ID", "IN_USE", "JOB_IDS", "PerfVar_classA"]
    if local_ids is not None:
        header.insert(1, "Local_GPU_ID")
    lines = [",".join(header)]
    for g in range(4):
        row = [str(g), str(g // 2), "False", "", "1.0"]
        if local_ids is not None:
            row.insert(1, str(local_ids[g]))
        lines.append(",".join(row))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_blox_local_gpu_id_is_the_device_number(tmp_path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("job_id,num_gpus,perfclass\n1,2,classA\n")
    inst = load_blox(_gpu_df(tmp_path / "gpus.csv", [1, 0, 3, 2]), jobs)
    assert inst.cluster.devices.tolist() == [1, 0, 3, 2]
    assert [r["Local_GPU_ID"] for r in blox_gpu_rows(inst)] == [1, 0, 3, 2]
    assert slurm_rows(inst, {"placements": {"1": [2, 3]}})[0]["gpu_indices"] == "1:2-3"
    assert slurm_rows(inst, {"placements": {"1": [0, 2]}})[0]["gpu_indices"] == "0:1 1:3"
    plain = load_blox(_gpu_df(tmp_path / "plain.csv", None), jobs)
    assert plain.cluster.devices is None and "Local_GPU_ID" not in blox_gpu_rows(plain)[0]


@pytest.mark.parametrize("local_ids, why", [
    ([0, 0, 0, 1], "line 3, column Local_GPU_ID: device 0 of node 0 is also on line 2"),
    ([0, -1, 0, 1], "line 3, column Local_GPU_ID: must be a non-negative integer (a device number), got '-1'"),
    ([0, "", 0, 1], "line 3, column Local_GPU_ID: must be a non-negative integer (a device number), got an empty"),
    ([0, "nan", 0, 1], "line 3, column Local_GPU_ID: must be a non-negative integer (a device number), got 'nan'"),
])
def test_an_unusable_local_gpu_id_column_is_set_aside_with_a_warning(tmp_path, capsys, local_ids, why):
    """The column only names GPUs in the exports: Blox tables that imported before still do."""
    gpus = _gpu_df(tmp_path / "gpus.csv", local_ids)
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("job_id,num_gpus,perfclass\n1,2,classA\n")
    out = tmp_path / "round.json"
    rc = main(["import", "blox", "--gpus", str(gpus), "--jobs", str(jobs), "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 0 and "device" not in json.loads(out.read_text())["cluster"]["gpus"]
    assert f"{gpus}: {why}" in err and "Local_GPU_ID set aside" in err


def test_an_unusable_local_gpu_id_does_not_stop_the_blox_adapter():
    pd = pytest.importorskip("pandas")
    from pal_opt.adapters.blox import BloxPlacement

    gpu_df = pd.DataFrame({"GPU_ID": [0, 1, 2, 3], "Local_GPU_ID": [0, 1, np.nan, 1], "Node_ID": [0, 0, 1, 1],
                           "IN_USE": [False] * 4, "JOB_IDS": [None] * 4, "PerfVar_classA": [1.0, 1.2, 0.9, 1.0]})
    job_state = type("JobState", (), {"active_jobs": {5: {"num_GPUs": 2, "perfclass": "classA",
                                                          "is_running": False}}})()
    cluster_state = type("ClusterState", (), {"gpu_df": gpu_df})()
    terminate, placed = BloxPlacement({}).place(job_state, cluster_state, {"job_order": [(5, 0)]})
    assert terminate == [] and sorted(placed[5]) in ([0, 1], [2, 3])


def test_integral_floats_are_device_numbers_and_other_values_are_named(tmp_path, capsys):
    doc = instance_to_dict(_round([0, 1, 2, 3, 0, 1, 2, 3]))
    doc["cluster"]["gpus"]["device"][1] = 1.0  # JSON Schema's integer, as in the other integer columns
    good = tmp_path / "good.json"
    good.write_text(json.dumps(doc))
    assert main(["solve", str(good), "--out", str(tmp_path / "p.json")]) == 0
    doc["cluster"]["gpus"]["device"][5] = 1.5
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["solve", str(bad), "--out", str(tmp_path / "q.json")]) == 2
    assert capsys.readouterr().err.strip() == (f"pal-opt: error: {bad}: cluster.gpus.device[5]: must be a "
                                               "non-negative integer, got 1.5")
    assert Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0] * 4},
                               devices=np.array([3.0, 1.0, 0.0, 2.0])).devices.tolist() == [3, 1, 0, 2]


def test_a_graphml_device_number_given_twice_on_a_server_names_the_vertex():
    import networkx as nx

    from pal_opt.topology.graphml import cluster_digraph

    graph = cluster_digraph(_round([0, 1, 2, 3, 0, 1, 2, 3]).cluster)
    graph.nodes["g2"]["device"] = 0
    text = "\n".join(nx.generate_graphml(graph))
    with pytest.raises(InstanceError, match=r"node 'g2'\.device: device 0 of server 's0' is also GPU vertex 'g0'"):
        parse_graphml(text)


def test_the_shipped_gpu_df_carries_its_local_ids():
    inst = load_blox(DATA / "gpu_df.csv", DATA / "queue.csv")
    assert inst.cluster.devices is not None
    assert inst.cluster.devices.tolist() == local_indices(
        Cluster.from_arrays(inst.cluster.gpu_ids, [inst.cluster.server_ids[s] for s in inst.cluster.server_of],
                            {"classA": np.ones(inst.cluster.num_gpus)})).tolist()


def _slurm_devices(tmp_path: Path, gres: str) -> dict[str, list[tuple[str | None, int]]] | None:
    topo = tmp_path / "topology.conf"
    topo.write_text(TOPOLOGY)
    conf = tmp_path / "gres.conf"
    conf.write_text(gres)
    cl = to_cluster(load_slurm(topo, gres_conf=conf))
    if cl.devices is None:
        return None
    types = cl.gpu_type_names() or [None] * cl.num_gpus
    out: dict[str, list[tuple[str | None, int]]] = {}
    for s, t, d in zip(cl.server_of.tolist(), types, cl.devices.tolist(), strict=True):
        out.setdefault(cl.server_ids[s], []).append((t, d))
    return out


def test_gres_conf_device_files_give_device_numbers_in_the_order_of_the_types(tmp_path):
    got = _slurm_devices(tmp_path, "NodeName=n[1-2] Name=gpu Type=v100 File=/dev/nvidia[2-3]\n"
                                   "NodeName=n[1-2] Name=gpu Type=a100 File=/dev/nvidia[0-1]\n"
                                   "NodeName=n1 Name=gpu Type=v100 File=/dev/nvidia5\n")
    assert got == {"n1": [("v100", 2), ("v100", 3), ("v100", 5), ("a100", 0), ("a100", 1)],
                   "n2": [("v100", 2), ("v100", 3), ("a100", 0), ("a100", 1)]}


def test_a_node_without_a_missing_device_keeps_its_device_numbers(tmp_path):
    """A GPU taken out of the gres.conf (nvidia2 here) leaves a gap the ranks would hide."""
    got = _slurm_devices(tmp_path, "NodeName=n[1-2] Name=gpu File=/dev/nvidia[0-1,3]\n")
    assert got == {"n1": [(None, 0), (None, 1), (None, 3)], "n2": [(None, 0), (None, 1), (None, 3)]}


@pytest.mark.parametrize("gres", [
    "NodeName=n[1-2] Name=gpu Count=4\n",  # no device files
    "NodeName=n1 Name=gpu File=/dev/nvidia[0-1]\nNodeName=n2 Name=gpu Count=2\n",  # one node without
    "NodeName=n[1-2] Name=gpu File=/dev/dri/renderD[128-129]\n",  # not NVIDIA device files
])
def test_without_device_files_for_every_gpu_the_exports_use_ranks(tmp_path, gres):
    assert _slurm_devices(tmp_path, gres) is None


def test_the_shipped_gres_conf_gives_device_numbers():
    cl = to_cluster(load_slurm(DATA / "topology.conf", gres_conf=DATA / "gres.conf"))
    assert cl.devices is not None
    assert cl.devices.tolist() == local_indices(Cluster.from_arrays(
        cl.gpu_ids, [cl.server_ids[s] for s in cl.server_of], {"classA": np.ones(cl.num_gpus)})).tolist()


def test_the_export_says_what_its_gpu_indices_are(tmp_path, capsys):
    placement = tmp_path / "p.json"
    placement.write_text(json.dumps({"placements": {"a": [1, 2, 4]}}))
    for devices, says in ((None, "GPU indices are ranks among each node's GPU ids (the instance has no device "
                                 "numbers"), ([7, 5, 3, 1, 0, 2, 4, 6], "GPU indices are device numbers")):
        inst = tmp_path / "round.json"
        inst.write_text(dumps_instance(_round(devices)))
        for fmt in ("slurm", "k8s"):
            assert main(["export", fmt, str(inst), str(placement), "-o", str(tmp_path / f"out.{fmt}")]) == 0
            assert says in capsys.readouterr().out


def test_import_blox_without_a_queue_is_the_cluster_alone(tmp_path, capsys):
    gpus = tmp_path / "gpus.csv"
    gpus.write_text("GPU_ID,Local_GPU_ID,Node_ID,IN_USE,JOB_IDS,PerfVar_classA\n"
                    "0,0,0,False,,1.0\n1,1,0,True,7,1.1\n2,0,1,False,,0.9\n3,1,1,True,,1.0\n")
    out = tmp_path / "cluster.json"
    assert main(["import", "blox", "--gpus", str(gpus), "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["jobs"] == [] and doc["cluster"]["gpus"]["state"] == ["free", "busy", "free", "busy"]
    assert doc["cluster"]["gpus"]["device"] == [0, 1, 0, 1]
    assert "0 jobs" in capsys.readouterr().out
