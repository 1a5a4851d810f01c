"""Cluster topologies in (Slurm topology.conf, kubectl node lists, GraphML), placements out.

Each format gives the expected servers, racks and levels; the locality penalties apply to the
levels read (a gang within a leaf switch or sub-block pays the rack penalty, across them the
cluster penalty); Slurm hostlists expand and compress as Slurm writes them; malformed files
exit 2 with one line and no output; exports say what the placement says.
"""

from __future__ import annotations

import copy
import csv
import json
import logging
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pal_opt
from pal_opt.cli import main
from pal_opt.cost import evaluate
from pal_opt.errors import InstanceError, OptionError
from pal_opt.io import load_instance, load_placement_file, save_instance
from pal_opt.model import Cluster, GpuState, Job, Level, Pipeline, RoundInstance
from pal_opt.topology import (
    compress_hostlist,
    expand_hostlist,
    graphml_text,
    load_graphml,
    load_nodes,
    load_slurm,
    parse_graphml,
    parse_nodes,
    parse_slurm_conf_gpus,
    parse_topology_conf,
    pod_placements,
    slurm_rows,
    to_cluster,
)
from pal_opt.topology.placement import local_indices, placement_by_host

DATA = Path(__file__).resolve().parents[1] / "examples" / "data"
TOPOLOGY_CONF = DATA / "topology.conf"
SLURM_CONF = DATA / "slurm.conf"
NODES_JSON = DATA / "nodes.json"
CLUSTER_GRAPHML = DATA / "cluster.graphml"
JOBS_CSV = DATA / "jobs.csv"
BLOCK, SUBBLOCK, HOST = (f"cloud.google.com/gce-topology-{x}" for x in ("block", "subblock", "host"))


def run(capsys, *argv: object) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def nodes_doc() -> dict:
    return json.loads(NODES_JSON.read_text())


def node(name: str, gpus: str | None = "8", labels: dict | None = None, **extra) -> dict:
    """A minimal kubectl Node item (in block b, sub-block s unless ``labels`` says otherwise)."""
    labels = {BLOCK: "b", SUBBLOCK: "s"} if labels is None else labels
    item = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
            "spec": {}, "status": {"capacity": {} if gpus is None else {"nvidia.com/gpu": gpus}}}
    for key, value in extra.items():
        item[key].update(value)
    return item


# --------------------------------------------------------------------------- hostlists
@pytest.mark.parametrize(("expr", "names"), [
    ("node[01-04,07]", ["node01", "node02", "node03", "node04", "node07"]),
    ("tux[1-3]", ["tux1", "tux2", "tux3"]),
    ("tux[0-3,12,18-20]", ["tux0", "tux1", "tux2", "tux3", "tux12", "tux18", "tux19", "tux20"]),
    ("n[8-10]", ["n8", "n9", "n10"]),
    ("n[08-10]", ["n08", "n09", "n10"]),
    ("login,gpu[1-2]", ["login", "gpu1", "gpu2"]),
    ("r[1-2]-g[8-9]", ["r1-g8", "r1-g9", "r2-g8", "r2-g9"]),
    ("a1,a1,a[1-2]", ["a1", "a2"]),
    ("[1-2]", ["1", "2"]),
])
def test_expand_hostlist(expr, names):
    assert expand_hostlist(expr) == names


@pytest.mark.parametrize(("expr", "what"), [
    ("node[1-", "unclosed"), ("node]1", "unmatched"), ("n[1[2]]", "nested"), ("n[3-1]", "backwards"),
    ("n[a-b]", "bad range"), ("a,,b", "empty host name"), ("n[]", "bad range"), ("n[0-99999999]", "more than"),
    ("a[0-999]b[0-9999]", "more than"), ("n[1234567890123456789]", "at most 18 digits"),
])
def test_expand_hostlist_rejects(expr, what):
    with pytest.raises(InstanceError, match=what):
        expand_hostlist(expr)


@pytest.mark.parametrize(("names", "expr"), [
    (["node07", "node01", "node02", "node03", "node04"], "node[01-04,07]"),
    (["n9", "n10", "n11"], "n[9-11]"),
    (["n09", "n10"], "n[09-10]"),
    (["n9", "n010"], "n[9,010]"),
    (["b", "a2", "a1", "c"], "a[1-2],b,c"),
    (["gpu3"], "gpu3"),
    (["x1", "x01"], "x[01,1]"),
])
def test_compress_hostlist(names, expr):
    assert compress_hostlist(names) == expr
    assert set(expand_hostlist(expr)) == set(names)


@pytest.mark.parametrize("bad", ["a b", "a,b", "n[1]", ""])
def test_compress_hostlist_rejects_unwritable_names(bad):
    with pytest.raises(InstanceError, match="cannot be written"):
        compress_hostlist([bad])


HOSTNAMES = st.lists(st.from_regex(r"[a-z]{0,3}[-.]?[0-9]{0,4}", fullmatch=True).filter(bool), max_size=40)


@settings(max_examples=300, deadline=None)
@given(HOSTNAMES)
def test_hostlist_compression_round_trips(names):
    expr = compress_hostlist(names)
    back = expand_hostlist(expr) if names else []
    assert sorted(back) == sorted(set(names))  # each name once, nothing else
    if names:
        assert compress_hostlist(back) == expr  # canonical


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["node", "gpu-", "r1-n", ""]), st.sets(st.integers(0, 300), min_size=1, max_size=30),
       st.integers(1, 4))
def test_hostlist_ranges_round_trip(prefix, numbers, width):
    names = [f"{prefix}{str(n).zfill(width)}" for n in numbers]
    expr = compress_hostlist(names)
    assert expr.count("[") <= 1
    assert expand_hostlist(expr) == sorted(names, key=lambda s: int(s[len(prefix):]))


# --------------------------------------------------------------------------- Slurm
def test_slurm_example_levels():
    h = parse_topology_conf(TOPOLOGY_CONF.read_text(), str(TOPOLOGY_CONF))
    assert h.hosts == tuple(f"gpu{i:02d}" for i in range(1, 9))
    assert [lv.name for lv in h.levels] == ["switch-1", "switch-2"]
    assert {h_: lv for h_, lv in h.levels[0].group_of.items()} == {
        **{f"gpu{i:02d}": "leaf01" for i in range(1, 5)}, **{f"gpu{i:02d}": "leaf02" for i in range(5, 9)}}
    assert set(h.levels[1].group_of.values()) == {"spine01"}


def test_slurm_example_cluster(caplog):
    with caplog.at_level(logging.INFO, logger="pal_opt.topology"):
        topo = load_slurm(TOPOLOGY_CONF, gpus_per_node=4)
        cl = to_cluster(topo)
    assert cl.num_gpus == 32 and cl.num_servers == 8
    assert cl.rack_ids == ("leaf01", "leaf02")
    assert cl.server_ids[cl.server_of[0]] == "gpu01" and cl.server_sizes.tolist() == [4] * 8
    assert cl.classes == ("classA", "classB", "classC", "classD") and (cl.factors["classA"] == 1.0).all()
    # one spine above every leaf: collapsing it loses nothing, so no warning
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("switch-2" in r.getMessage() for r in caplog.records)


def test_slurm_uneven_tree_and_nested_switch_lists():
    text = ("SwitchName=s0 Nodes=a[1-2]\nSwitchName=s1 Nodes=b1\nSwitchName=s2 Nodes=c1\n"
            "SwitchName=agg0 Switches=s[0-1]\nSwitchName=top Switches=agg0,s2\n")
    h = parse_topology_conf(text)
    assert [lv.name for lv in h.levels] == ["switch-1", "switch-2", "switch-3"]
    assert dict(h.levels[1].group_of) == {"a1": "agg0", "a2": "agg0", "b1": "agg0", "c1": "top"}
    assert set(h.levels[2].group_of.values()) == {"top"}


def test_slurm_fat_tree_lists_a_leaf_under_every_spine():
    # slurmibtopology writes a two-level fat tree so: each spine lists every leaf; Slurm accepts it
    text = ("SwitchName=ibsw1 Nodes=gpu[01-02]\nSwitchName=ibsw2 Nodes=gpu[03-04]\nSwitchName=ibsw3 Nodes=gpu05\n"
            "SwitchName=ibsw4 Switches=ibsw[1-2]\nSwitchName=ibsw5 Switches=ibsw[1-2]\n"
            "SwitchName=ibsw6 Switches=ibsw3\nSwitchName=core Switches=ibsw[4-6]\n")
    h = parse_topology_conf(text)
    assert [lv.name for lv in h.levels] == ["switch-1", "switch-2", "switch-3"]
    assert dict(h.levels[0].group_of) == {"gpu01": "ibsw1", "gpu02": "ibsw1", "gpu03": "ibsw2", "gpu04": "ibsw2",
                                          "gpu05": "ibsw3"}
    # the spines above ibsw1 and ibsw2 join their nodes: one group at that level
    assert dict(h.levels[1].group_of) == {**{f"gpu0{i}": "ibsw[4-5]" for i in range(1, 5)}, "gpu05": "ibsw6"}
    assert set(h.levels[2].group_of.values()) == {"core"} and h.notes == ()


def test_slurm_node_under_two_leaf_switches_is_a_warning(tmp_path, caplog):
    # Slurm warns "Multiple leaf switches contain nodes" and goes on; so does the import, at use
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=s0 Nodes=n[1-4]\nSwitchName=s1 Nodes=n[4-5]\nSwitchName=s2 Nodes=n6\n"
                    "SwitchName=top Switches=s[0-2]\n")
    with caplog.at_level(logging.WARNING, logger="pal_opt.topology"):
        topo = load_slurm(conf, gpus_per_node=2)
        assert not caplog.records  # said when the topology is used, so a failed import prints one line
        cl = to_cluster(topo)
    assert cl.rack_ids == ("s[0-1]", "s2")
    assert [cl.rack_ids[cl.rack_of_server[s]] for s in range(6)] == ["s[0-1]"] * 5 + ["s2"]
    assert any("more than one leaf switch: n4" in r.getMessage() for r in caplog.records)


def test_slurm_reads_key_value_as_slurm_does():
    # white space around '=' and double-quoted values, as Slurm's configuration parser allows
    h = parse_topology_conf('SwitchName = s0 Nodes = "n[1-2]"\nswitchname=top SWITCHES="s0"\n')
    assert h.hosts == ("n1", "n2") and dict(h.levels[1].group_of) == {"n1": "top", "n2": "top"}
    assert parse_slurm_conf_gpus('NodeName = n[1-2] Feature="a100, ib" Gres = gpu:4\n') == {"n1": 4, "n2": 4}


def test_slurm_block_topology():
    h = parse_topology_conf("BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[5-8]\nBlockSizes=4,8\n")
    assert [lv.name for lv in h.levels] == ["block"]
    assert h.levels[0].group_of["n5"] == "b2"


def test_slurm_conf_gpu_counts():
    counts = parse_slurm_conf_gpus(SLURM_CONF.read_text())
    assert counts == {**{f"gpu{i:02d}": 8 for i in range(1, 8)}, "gpu08": 4}
    assert parse_slurm_conf_gpus("NodeName=a Gres=gpu:2,gpu:tesla:2,nic:1\nNodeName=b Gres=gpu\n"
                                 "NodeName=c CPUs=4\nNodeName=d Gres=mps:100") == {"a": 4, "b": 1, "c": 0, "d": 0}
    with pytest.raises(InstanceError, match="line 2, NodeName: node 'a' is defined twice"):
        parse_slurm_conf_gpus("NodeName=a Gres=gpu:1\nNodeName=a Gres=gpu:2")


def test_slurm_gpu_counts_and_down_nodes():
    topo = load_slurm(TOPOLOGY_CONF, slurm_conf=SLURM_CONF, down="gpu[02-03]")
    cl = to_cluster(topo)
    assert cl.server_sizes.tolist() == [8] * 7 + [4]
    failed = {cl.server_ids[s] for s in cl.server_of[cl.state == GpuState.FAILED].tolist()}
    assert failed == {"gpu02", "gpu03"} and int((cl.state == GpuState.FAILED).sum()) == 16
    with pytest.raises(OptionError, match="gpus per node|--gpus-per-node"):
        load_slurm(TOPOLOGY_CONF)
    with pytest.raises(OptionError, match="'gpu99' is not in"):
        load_slurm(TOPOLOGY_CONF, gpus_per_node=2, down="gpu99")


SLURM_BAD = [
    ("SwitchName=s0 Nodes=n1\nSwitchName=s1 Switches=s2\nSwitchName=s2 Switches=s1\n", "line [23]", "cycle"),
    ("SwitchName=s0 Switches=s0\n", "line 1", "cycle"),
    ("SwitchName=s0 Nodes=n1\nSwitchName=top Switches=s[0-1]\n", "line 2, Switches", "unknown switch 's1'"),
    ("BlockName=b0 Nodes=n[1-4]\nBlockName=b1 Nodes=n[4-5]\n", "line 2, Nodes", "'n4' is also in block 'b0'"),
    ("---\n- topology: topo1\n  tree:\n", "line 1", "topology.yaml, which pal-opt does not read"),
    ("SwitchName=s0 Nodes=\n", "line 1", "Nodes has no value"),
    ('SwitchName=s0 Nodes="n1\n', "line 1", "bad quoting in the value of Nodes"),
    ("SwitchName=s0 Nodes=n1 Switches=s1\nSwitchName=s1 Nodes=n2\n", "line 1", "both Nodes and Switches"),
    ("SwitchName=s0 Nodes=n1\nSwitchName=s0 Nodes=n2\n", "line 2", "defined twice"),
    ("# comment\n\nSwitchName=s0 Nodes=n1 Speed=1\n", "line 3", "unknown parameter 'Speed'"),
    ("SwitchName=s0 Nodes=n[1-\n", "line 1, Nodes", "unclosed"),
    ("SwitchName=s0 Nodes=n1 \\\n  Nodes=n2\n", "line 1", "given twice"),
    ("Nodes=n1\n", "line 1", "SwitchName= or BlockName="),
    ("SwitchName=s0 Switches=s1\nSwitchName=s1\n", "", "lists no node"),
    ("SwitchName=s0 Nodes=n1\nBlockName=b0 Nodes=n2\n", "line 2", "mixes"),
    ("SwitchName=s0 Nodes\n", "line 1", "KEY=VALUE"),
]


@pytest.mark.parametrize(("text", "where", "what"), SLURM_BAD, ids=[w for _, _, w in SLURM_BAD])
def test_slurm_topology_errors_name_file_and_line(text, where, what):
    with pytest.raises(InstanceError, match=what) as exc:
        parse_topology_conf(text, "t.conf")
    assert str(exc.value).startswith("t.conf: ")
    if where:
        assert re.fullmatch(where, exc.value.path)
    else:
        assert exc.value.path is None


# --------------------------------------------------------------------------- Kubernetes
def test_kubernetes_example_levels_and_states(caplog):
    topo = load_nodes(NODES_JSON)
    assert topo.hosts == tuple(f"gke-a3-mega-pool-{k:02d}" for k in range(8))
    assert [lv.name for lv in topo.levels] == [SUBBLOCK, BLOCK]
    assert topo.levels[0].group_of["gke-a3-mega-pool-02"] == "a0f3c2e1/7b2c44"
    assert topo.levels[1].group_of["gke-a3-mega-pool-05"] == "c47d9b20"
    with caplog.at_level(logging.WARNING, logger="pal_opt.topology"):
        cl = to_cluster(topo)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and BLOCK in warnings[0] and "collapsed into the cluster level" in warnings[0]
    assert cl.num_gpus == 64 and len(cl.rack_ids) == 4
    assert cl.server_sizes.tolist() == [8] * 8
    failed = cl.state == GpuState.FAILED
    assert failed.sum() == 8 and {cl.server_ids[s] for s in cl.server_of[failed].tolist()} == {"gke-a3-mega-pool-05"}


def test_kubernetes_node_list_of_a_large_cluster_is_read(tmp_path):
    # kubectl prints 15-25 kB a node (status.images lists up to 50 images): a 4,000-node list is
    # past the 64 MiB and 2,000,000 values other inputs may have, and was refused
    from pal_opt.io.textfile import DEFAULT_MAX_BYTES, DEFAULT_MAX_VALUES

    many = [0] * DEFAULT_MAX_VALUES  # stands for the values of thousands of nodes (small ints: cheap)
    doc = {"kind": "List", "items": [node("n1", status={"volumesInUse": many}), node("n2")]}
    path = tmp_path / "nodes.json"
    with path.open("w") as fh:
        fh.write(json.dumps(doc, separators=(",", ":"))[:-1])
        fh.write(" " * (DEFAULT_MAX_BYTES - fh.tell() + 1) + "}")
    assert path.stat().st_size > DEFAULT_MAX_BYTES
    topo = load_nodes(path)
    assert topo.hosts == ("n1", "n2") and len(topo.gpu_ids) == 16


def test_an_empty_down_list_is_no_node_and_an_empty_resource_is_an_error():
    """``--down "$(sinfo -h -t down,drain -o %N)"``, the documented recipe, gives an empty list on a
    healthy cluster, which was an error; blanks separate names, as in Slurm's hostlist_create.
    An empty resource name is still not 'none'."""
    def failed(down: str | None) -> list[int]:
        return to_cluster(load_slurm(TOPOLOGY_CONF, gpus_per_node=8, down=down)).state.tolist()

    for down in ("", " ", "\n"):
        assert failed(down) == failed(None)
    two = load_slurm(TOPOLOGY_CONF, gpus_per_node=8).hosts[:2]
    assert failed(f"{two[0]} {two[1]}\n") == failed(",".join(two)) != failed(None)
    with pytest.raises(OptionError, match="--gpu-resource: must be a resource name"):
        load_nodes(NODES_JSON, resource="")


def test_kubernetes_levels_option():
    deeper = to_cluster(load_nodes(NODES_JSON, levels=[BLOCK, SUBBLOCK, HOST, "kubernetes.io/hostname"]))
    assert len(deeper.rack_ids) == 8
    blocks = to_cluster(load_nodes(NODES_JSON, levels=[BLOCK]))
    assert blocks.rack_ids == ("a0f3c2e1", "c47d9b20")
    flat = to_cluster(load_nodes(NODES_JSON, levels=["kubernetes.io/hostname"]))
    assert not flat.racked
    for bad in (["kubernetes.io/hostname", BLOCK], [BLOCK, BLOCK], [""]):
        with pytest.raises(OptionError, match="--levels"):
            load_nodes(NODES_JSON, levels=bad)


def test_kubernetes_node_states():
    ready_false = {"conditions": [{"type": "Ready", "status": "False"}]}
    doc = {"kind": "List", "items": [
        node("ok", spec={"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}),
        node("cordoned", spec={"unschedulable": True}),
        node("notready", status=ready_false),
        node("unreachable", spec={"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]}),
        node("sick", status={"allocatable": {"nvidia.com/gpu": "6"}}),
        node("cpu-only", gpus=None),
        node("zero", gpus="0"),
    ]}
    topo = parse_nodes(doc, levels=["kubernetes.io/hostname"])
    assert topo.hosts == ("ok", "cordoned", "notready", "unreachable", "sick")
    state = topo.state.reshape(5, 8)
    assert (state[0] == GpuState.FREE).all()
    assert (state[1:4] == GpuState.FAILED).all()
    assert state[4].tolist() == [0] * 6 + [2, 2]  # two unhealthy GPUs, at the highest local indices


def test_nodes_that_take_no_new_pod_are_out_of_service():
    """Pressure, network, uninitialised and autoscaler-deletion taints were ignored, so rounds
    placed jobs on nodes where their pods cannot start (review)."""
    keys = ["node.kubernetes.io/disk-pressure", "node.kubernetes.io/memory-pressure", "node.kubernetes.io/pid-pressure",
            "node.kubernetes.io/network-unavailable", "node.cloudprovider.kubernetes.io/uninitialized",
            "ToBeDeletedByClusterAutoscaler"]
    doc = {"kind": "List", "items": [node(f"n{k}", spec={"taints": [{"key": key, "effect": "NoSchedule"}]})
                                     for k, key in enumerate(keys)]
           + [node("soft", spec={"taints": [{"key": "DeletionCandidateOfClusterAutoscaler",
                                            "effect": "PreferNoSchedule"}]})]}
    state = parse_nodes(doc, levels=["kubernetes.io/hostname"]).state.reshape(len(keys) + 1, 8)
    assert (state[:-1] == GpuState.FAILED).all() and (state[-1] == GpuState.FREE).all()


def test_time_sliced_gpus_are_named_in_a_warning():
    """Under NVIDIA time-slicing a node's capacity counts slices, which the import takes for GPUs:
    it said nothing (review).  It names such nodes now."""
    a100 = {"nvidia.com/gpu.product": "A100-SXM4-80GB"}
    doc = {"kind": "List", "items": [
        node("shared", labels={**a100, "nvidia.com/gpu.replicas": "4"}), node("plain", labels=a100),
        node("shared2", labels={"nvidia.com/gpu.product": "A100-SXM4-80GB-SHARED"})]}
    notes = parse_nodes(doc, levels=["kubernetes.io/hostname"]).notes
    assert len(notes) == 1 and notes[0].startswith("2 nodes offer time-sliced GPUs") and notes[0].endswith(
        "shared, shared2")
    assert parse_nodes({"kind": "List", "items": [node("plain")]}, levels=["kubernetes.io/hostname"]).notes == ()


#: The labels NVIDIA's GPU Feature Discovery puts on an 8-GPU H100 node (its README's list): a
#: count, the model and its properties, nothing per device.
GFD_LABELS = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "8", "nvidia.com/gpu.replicas": "1",
              "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.family": "hopper",
              "nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.compute.major": "9",
              "nvidia.com/gpu.compute.minor": "0", "nvidia.com/gpu.machine": "a3-megagpu-8g",
              "nvidia.com/mig.strategy": "none", "nvidia.com/cuda.driver.major": "550"}


@pytest.mark.skipif(not Path("/dev/fd").is_dir(), reason="no /dev/fd")
@pytest.mark.parametrize(("args", "name"), [(["k8s"], "k8s"), (["graphml"], "graphml"), (["blox", "--gpus"], "blox")])
def test_a_round_imported_from_a_pipe_is_named_by_its_format_not_the_fd(tmp_path, capsys, args, name):
    """``pal-opt import k8s <(cat nodes.json)`` named the round ``63``, the name of
    ``/dev/fd/63``; a regular file names it (``nodes.json``; a Blox table its stem)."""
    data = DATA
    source = {"k8s": "nodes.json", "graphml": "cluster.graphml", "blox": "gpu_df.csv"}[name]
    r, w = os.pipe()
    os.write(w, (data / source).read_bytes())  # at most 17.5 kB: within the pipe's buffer
    os.close(w)
    try:
        assert main(["import", *args, f"/dev/fd/{r}", "-o", str(tmp_path / "p.json")]) == 0
    finally:
        os.close(r)
    assert load_instance(tmp_path / "p.json").name == name
    assert main(["import", *args, str(data / source), "-o", str(tmp_path / "f.json")]) == 0
    assert load_instance(tmp_path / "f.json").name == (Path(source).stem if name == "blox" else source)
    capsys.readouterr()


def test_a_node_list_gives_no_device_numbers_and_pods_name_gpus_by_rank(tmp_path, capsys):
    """A Node object counts its GPUs (``status.capacity``/``allocatable["nvidia.com/gpu"]``, GPU
    Feature Discovery's ``nvidia.com/gpu.count``) and names their model, but no device: the device
    plugin lists its devices (by UUID) to the kubelet alone, and the kubelet chooses a pod's.  So
    the import gives no device numbers, as ``slurm.conf`` counts do not, rather than made-up ones
    (which would be written to the instance file as ``cluster.gpus.device`` and to Blox rows as
    ``Local_GPU_ID``), and a pod's ``gpus`` are ranks 0..n-1 among its node's GPUs, the unhealthy
    ones (allocatable below capacity) the highest: ``len(gpus)`` is the pod's request."""
    doc = nodes_doc()
    doc["items"] = doc["items"][:2]
    for item in doc["items"]:
        item["metadata"]["labels"].update(GFD_LABELS)
    doc["items"][1]["status"]["allocatable"]["nvidia.com/gpu"] = "6"  # the device plugin found 2 unhealthy
    nodes = _write(tmp_path, "nodes.json", json.dumps(doc))
    topo = load_nodes(nodes)
    assert topo.devices is None and topo.gpu_types == ("NVIDIA-H100-80GB-HBM3",) * 16
    assert to_cluster(topo).devices is None
    jobs = _write(tmp_path, "jobs.csv", "job_id,num_gpus,perfclass\neight,8,classA\nsix,6,classA\n")
    inst, pl, pods = tmp_path / "k.json", tmp_path / "p.json", tmp_path / "pods.json"
    assert run(capsys, "import", "k8s", nodes, "--jobs", jobs, "-o", inst)[0] == 0
    assert "device" not in json.loads(inst.read_text())["cluster"]["gpus"]
    assert local_indices(load_instance(inst).cluster).tolist() == [*range(8), *range(8)]
    assert run(capsys, "solve", inst, "--method", "pal", "--out", pl)[0] == 0
    rc, stdout, err = run(capsys, "export", "k8s", inst, pl, "-o", pods)
    assert rc == 0, err
    assert "GPU indices are ranks among each node's GPU ids" in stdout
    assert json.loads(pods.read_text())["items"] == [
        {"job": "eight", "pod": 0, "node": "gke-a3-mega-pool-00", "gpus": [0, 1, 2, 3, 4, 5, 6, 7]},
        {"job": "six", "pod": 0, "node": "gke-a3-mega-pool-01", "gpus": [0, 1, 2, 3, 4, 5]}]


KUBE_BAD = [
    ({"kind": "Pod", "items": []}, "kind", "List or NodeList"),
    ({"kind": "List", "items": {}}, "items", "array"),
    ({"kind": "List", "items": [node("a", gpus="8Gi")]}, 'items[0].status.capacity["nvidia.com/gpu"]', "whole number"),
    ({"kind": "List", "items": [node("a"), node("a")]}, "items[1].metadata.name", "listed twice"),
    ({"kind": "List", "items": [node("a", labels={BLOCK: "b"})]}, "items[0].metadata.labels", SUBBLOCK),
    # a label value that is not a string was reported as a missing label
    ({"kind": "List", "items": [node("a", labels={BLOCK: "b", SUBBLOCK: 3})]}, f'items[0].metadata.labels["{SUBBLOCK}"]',
     "must be a string (Kubernetes label values are strings), got 3"),
    ({"kind": "List", "items": [node("a", labels={BLOCK: "b", SUBBLOCK: "s", "other": None})]},
     'items[0].metadata.labels["other"]', "must be a string (Kubernetes label values are strings), got None"),
    ({"kind": "List", "items": [node("a", labels={BLOCK: "b", SUBBLOCK: ""})]}, f'items[0].metadata.labels["{SUBBLOCK}"]',
     "is empty; GPU node 'a' needs a value for this --levels label"),
    ({"kind": "List", "items": [node("a", gpus=None)]}, "items", "no node has nvidia.com/gpu"),
    ({"kind": "List", "items": [node("a", spec={"unschedulable": "yes"})]}, "items[0].spec.unschedulable", "true or false"),
    ({"kind": "List", "items": [node("a", status={"allocatable": {"nvidia.com/gpu": "9"}})]},
     'items[0].status.allocatable["nvidia.com/gpu"]', "exceeds"),
    ({"kind": "List", "items": [{"kind": "Node", "metadata": {}}]}, "items[0].metadata.name", "non-empty"),
]


@pytest.mark.parametrize(("doc", "path", "what"), KUBE_BAD, ids=[w for _, _, w in KUBE_BAD])
def test_kubernetes_errors_name_the_field(doc, path, what):
    with pytest.raises(InstanceError, match=re.escape(what)) as exc:
        parse_nodes(doc, source="n.json")
    assert exc.value.source == "n.json" and exc.value.path == path


# --------------------------------------------------------------------------- GraphML
def test_graphml_example():
    topo = load_graphml(CLUSTER_GRAPHML)
    cl = to_cluster(topo)
    assert cl.server_ids == ("node1", "node2", "node3", "node4") and cl.rack_ids == ("rack-a", "rack-b")
    assert [lv.name for lv in topo.levels] == ["rack"]
    assert cl.classes == ("classA", "classB", "classC", "classD")
    assert cl.factors["classA"][9] == 1.23
    assert cl.state[6] == GpuState.FAILED and cl.state[13] == GpuState.BUSY


def _same_cluster(a: Cluster, b: Cluster) -> None:
    assert a.gpu_ids.tolist() == b.gpu_ids.tolist()
    assert a.server_ids == b.server_ids and [type(x) for x in a.server_ids] == [type(x) for x in b.server_ids]
    assert a.rack_ids == b.rack_ids and a.rack_of_server.tolist() == b.rack_of_server.tolist()
    assert a.server_of.tolist() == b.server_of.tolist() and a.state.tolist() == b.state.tolist()
    assert list(a.factors) == list(b.factors)
    for c in a.factors:
        assert a.factors[c].tobytes() == b.factors[c].tobytes()
    assert a.gpu_type_names() == b.gpu_type_names() and a.type_names == b.type_names
    assert a.throughput == b.throughput


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_graphml_round_trips(data):
    n_servers = data.draw(st.integers(1, 5))
    sizes = data.draw(st.lists(st.integers(1, 4), min_size=n_servers, max_size=n_servers))
    g = sum(sizes)
    ids = data.draw(st.lists(st.integers(0, 10_000), min_size=g, max_size=g, unique=True))
    names = data.draw(st.lists(st.one_of(st.integers(0, 99), st.text("abc-", min_size=1, max_size=4)),
                               min_size=n_servers, max_size=n_servers, unique_by=str))
    racks = data.draw(st.one_of(st.none(), st.lists(st.sampled_from(["r0", 7, "r-b"]), min_size=n_servers,
                                                    max_size=n_servers)))
    factor = st.floats(0.5, 3.0, allow_nan=False, allow_infinity=False)
    server = [names[s] for s, k in enumerate(sizes) for _ in range(k)]
    cl = Cluster.from_arrays(
        ids, server, {"classA": data.draw(st.lists(factor, min_size=g, max_size=g)), "x y": [1.0] * g},
        data.draw(st.lists(st.sampled_from([0, 1, 2]), min_size=g, max_size=g)),
        None if racks is None else dict(zip(names, racks, strict=True)),
    )
    _same_cluster(to_cluster(parse_graphml(graphml_text(cl))), cl)


def _typed_cluster() -> Cluster:
    return Cluster.from_arrays(
        list(range(8)), ["s0"] * 4 + ["s1"] * 2 + ["s2"] * 2,
        {"classA": [1.0, 0.9, 1.1, 1.3, 1.0, 1.0, 0.7, 2.0], "classB": [1.0] * 8},
        [0, 0, 0, 0, 2, 0, 0, 1], {"s0": "r0", "s1": "r1", "s2": "r1"},
        gpu_types=["A100"] * 4 + ["V100"] * 4, throughput={"classA": {"A100": 2.5, "V100": 1.0}},
    )


def test_graphml_round_trips_gpu_types_and_throughput():
    cl = _typed_cluster()
    back = to_cluster(parse_graphml(graphml_text(cl)))
    assert back.gpu_type_names() == ["A100"] * 4 + ["V100"] * 4
    assert back.throughput == {"classA": {"A100": 2.5, "V100": 1.0}}
    _same_cluster(back, cl)


def test_cli_export_import_graphml_keeps_a_typed_cluster(tmp_path, capsys):
    inst = RoundInstance(_typed_cluster(), (Job(1, 2, "classA"), Job(2, 2, "classB")))
    inst_path, pl, out, back = tmp_path / "i.json", tmp_path / "p.json", tmp_path / "c.graphml", tmp_path / "b.json"
    save_instance(inst, inst_path)
    pl.write_text(json.dumps({"placements": {"1": [0, 1], "2": [5, 6]}}))
    assert run(capsys, "export", "graphml", inst_path, pl, "-o", out)[0] == 0
    rc, _, err = run(capsys, "import", "graphml", out, "-o", back)
    assert rc == 0, err
    _same_cluster(load_instance(back).cluster, load_instance(inst_path).cluster)


def test_graphml_deeper_hierarchy_collapses_with_a_warning(caplog):
    import networkx as nx

    gr = nx.DiGraph()
    for p in ("p0", "p1"):
        gr.add_node(p, kind="pod")
    for r, p in (("r0", "p0"), ("r1", "p0"), ("r2", "p1")):
        gr.add_node(r, kind="rack")
        gr.add_edge(p, r)
    for s, r in enumerate(["r0", "r1", "r2"]):
        gr.add_node(f"s{s}", kind="server", id=f"host{s}")
        gr.add_edge(r, f"s{s}")
        gr.add_node(f"g{s}", kind="gpu", id=s)
        gr.add_edge(f"s{s}", f"g{s}")
    topo = parse_graphml("\n".join(nx.generate_graphml(gr)))
    assert [lv.name for lv in topo.levels] == ["rack", "pod"]
    assert topo.factors is None
    with caplog.at_level(logging.WARNING, logger="pal_opt.topology"):
        cl = to_cluster(topo)
    assert cl.rack_ids == ("r0", "r1", "r2")
    assert "'pod'" in caplog.text


def _graphml(edges: list[tuple[str, str]], nodes: dict[str, dict], directed: bool = True) -> str:
    import networkx as nx

    gr = nx.DiGraph() if directed else nx.Graph()
    for n, attrs in nodes.items():
        gr.add_node(n, **attrs)
    gr.add_edges_from(edges)
    return "\n".join(nx.generate_graphml(gr))


_S, _G = {"kind": "server"}, {"kind": "gpu", "id": 0}
GRAPHML_BAD = [
    (_graphml([("s", "g")], {"s": _S, "g": _G}, directed=False), "directed"),
    (_graphml([], {"g": _G}), "without a server parent"),
    (_graphml([("s", "g"), ("t", "g")], {"s": _S, "t": _S, "g": _G}), "2 parents"),
    (_graphml([("a", "b"), ("b", "a"), ("b", "s"), ("s", "g")],
              {"a": {"kind": "rack"}, "b": {"kind": "rack"}, "s": _S, "g": _G}), "cycle"),
    (_graphml([("s", "g")], {"s": _S, "g": {"kind": "gpu", "id": 0, "state": "dead"}}), "free, busy or failed"),
    (_graphml([("s", "g")], {"s": {}, "g": _G}), "needs a kind"),
    (_graphml([("s", "g")], {"s": _S, "g": {"kind": "gpu", "id": "x"}}), r"an integer in 0\.\.2\^63-1, got 'x'"),
    (_graphml([("s", "g")], {"s": _S, "g": {"kind": "gpu", "id": "\u00b2"}}), "got '\u00b2'"),
    (_graphml([("s", "g")], {"s": _S, "g": {"kind": "gpu", "id": str(2**70)}}), f"got {2**70}"),
    (_graphml([("s", "g"), ("s", "h")], {"s": _S, "g": {**_G, "factor_a": 1.0}, "h": {"kind": "gpu", "id": 1}}),
     "differ"),
    (_graphml([("s", "g")], {"s": _S, "g": {**_G, "factor_a": -1.0}}), "> 0"),
    (_graphml([("s", "g"), ("s", "h")], {"s": _S, "g": _G, "h": _G}), "GPU id 0"),
    (_graphml([("r", "s"), ("s", "g"), ("t", "h")], {"r": {"kind": "rack"}, "s": _S, "t": _S, "g": _G,
                                                     "h": {"kind": "gpu", "id": 1}}), "every server"),
    (_graphml([("s", "g"), ("s", "h")], {"s": _S, "g": {**_G, "type": "A100"}, "h": {"kind": "gpu", "id": 1}}),
     "every GPU or none"),
    (_graphml([("s", "g"), ("s", "h")], {"s": _S, "g": {**_G, "type": "A", "factor_a": 1.0, "throughput_a": 2.0},
                                         "h": {"kind": "gpu", "id": 1, "type": "A", "factor_a": 1.0,
                                               "throughput_a": 3.0}}), "differs from 2.0"),
    (_graphml([("s", "g")], {"s": _S, "g": {**_G, "factor_a": 1.0, "throughput_a": 2.0}}), "needs GPU types"),
    ("<graphml><graph>", "invalid XML"),
    ("<graphml/>", "graph"),
    # networkx named no node for these, or reported what it made of them ("needs a kind")
    (_graphml([("s", "g")], {"s": _S, "g": {**_G, "factor_a": 1.0}}).replace(">1.0<", ">abc<"),
     r"node 'g'\.factor_a: 'abc' is not a double"),
    (_graphml([("s", "g")], {"s": _S, "g": _G}).replace('<node id="g">', '<node id="s"/><node id="g">'),
     "node 's': declared twice"),
    (_graphml([("s", "g")], {"s": _S, "g": _G}).replace('target="g"', 'target="zz"'),
     "edge 's' -> 'zz': node 'zz' is not declared"),
]


@pytest.mark.parametrize(("text", "what"), GRAPHML_BAD, ids=[w for _, w in GRAPHML_BAD])
def test_graphml_errors(text, what):
    with pytest.raises(InstanceError, match=what) as exc:
        parse_graphml(text, "c.graphml")
    assert str(exc.value).startswith("c.graphml")


# --------------------------------------------------------------------------- locality on the levels read
def _round(cluster: Cluster, demands: list[int], loc: tuple[float, float, float]) -> RoundInstance:
    jobs = tuple(Job(f"j{k}", d, "classA", position=k, locality=loc) for k, d in enumerate(demands))
    return RoundInstance(cluster, jobs)


def _spans(inst: RoundInstance, method: str) -> tuple[dict, dict]:
    res = pal_opt.solve(inst, method, backend="highs") if method == "ilp" else pal_opt.solve(inst, method)
    assert pal_opt.check(inst, res) == []
    summary = evaluate(inst, res.placements, inst.cluster.factors)
    return summary.level, summary.slowdown


def test_locality_penalties_follow_slurm_leaf_switches():
    cl = to_cluster(load_slurm(TOPOLOGY_CONF, gpus_per_node=4))
    loc = (1.0, 1.2, 3.0)
    level, slow = _spans(_round(cl, [8], loc), "ilp")
    assert level == {"j0": Level.RACK} and slow["j0"] == pytest.approx(1.2)  # two nodes of one leaf switch
    level, slow = _spans(_round(cl, [20], loc), "ilp")
    assert level == {"j0": Level.CLUSTER} and slow["j0"] == pytest.approx(3.0)  # 16 GPUs per leaf switch
    # the same gang on the same nodes without the switch level pays the cluster penalty
    flat = Cluster.from_arrays(cl.gpu_ids, [cl.server_ids[s] for s in cl.server_of], cl.factors)
    level, slow = _spans(_round(flat, [8], loc), "ilp")
    assert level == {"j0": Level.CLUSTER} and slow["j0"] == pytest.approx(3.0)


def test_locality_penalties_follow_kubernetes_subblocks():
    cl = to_cluster(load_nodes(NODES_JSON))
    loc = (1.0, 1.25, 2.5)
    level, slow = _spans(_round(cl, [16, 24], loc), "ilp")
    assert level == {"j0": Level.RACK, "j1": Level.CLUSTER}
    assert slow == {"j0": pytest.approx(1.25), "j1": pytest.approx(2.5)}
    level, _ = _spans(_round(cl, [16], loc), "pal")
    assert level["j0"] in (Level.RACK, Level.CLUSTER)  # PAL's λ is per server; the cost is still per level


def test_locality_penalties_follow_graphml_racks():
    cl = to_cluster(load_graphml(CLUSTER_GRAPHML))
    inst = _round(cl, [6], (1.0, 1.1, 4.0))
    level, slow = _spans(inst, "ilp")
    assert level == {"j0": Level.RACK}


# --------------------------------------------------------------------------- CLI: import
def test_cli_import_slurm_with_jobs(tmp_path, capsys):
    out = tmp_path / "round.json"
    rc, stdout, err = run(capsys, "import", "slurm", TOPOLOGY_CONF, "--slurm-conf", SLURM_CONF, "--jobs", JOBS_CSV,
                          "--locality-penalty", 1.5, "-o", out)
    assert rc == 0, err
    assert "60 GPUs on 8 servers in 2 racks (rack level switch-1; switch-2 collapsed" in stdout
    inst = load_instance(out)
    assert [j.id for j in inst.jobs] == ["llm-a", "bert-b", "rn-c", "gan-d", "vgg-e", "pn-f"]
    assert inst.jobs[0].locality == (1.0, 2.0, 2.0) and inst.jobs[2].locality == (1.0, 1.5, 1.5)
    meta = json.loads(out.read_text())["meta"]
    assert meta["topology_levels"] == ["switch-1", "switch-2"] and meta["rack_level"] == "switch-1"
    assert meta["collapsed_into_cluster"] == ["switch-2"]


def test_cli_import_k8s_and_graphml(tmp_path, capsys):
    out = tmp_path / "k.json"
    rc, stdout, err = run(capsys, "import", "k8s", NODES_JSON, "--classes", "classA,classB", "-o", out)
    assert rc == 0, err
    assert "64 GPUs on 8 servers in 4 racks" in stdout and "8 GPUs failed" in stdout
    assert load_instance(out).cluster.classes == ("classA", "classB")
    rc, stdout, err = run(capsys, "import", "graphml", CLUSTER_GRAPHML, "--jobs", JOBS_CSV, "-o", out)
    assert rc == 0, err
    inst = load_instance(out)
    assert inst.cluster.factors["classA"][9] == 1.23 and len(inst.jobs) == 6
    assert "16 GPUs on 4 servers in 2 racks (rack level rack); 1 GPU failed; 6 jobs" in stdout


def test_cli_import_measurements_are_deterministic(shared_dir, tmp_path, capsys):
    meas = shared_dir / "data" / "pal-artifact" / "variability" / "longhorn"
    outs = []
    for k in range(2):
        out = tmp_path / f"m{k}.json"
        rc, _, err = run(capsys, "import", "slurm", TOPOLOGY_CONF, "--gpus-per-node", 4, "--measurements", meas,
                         "--seed", 5, "-o", out)
        assert rc == 0, err
        outs.append(load_instance(out).cluster.factors)
    assert all(np.array_equal(outs[0][c], outs[1][c]) for c in outs[0])
    assert np.array_equal(outs[0]["classB"], outs[0]["classC"]) and not (outs[0]["classA"] == 1.0).all()


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _bad_inputs(tmp_path: Path) -> list[list[object]]:
    bad_nodes = nodes_doc()
    bad_nodes["items"][3]["status"]["capacity"]["nvidia.com/gpu"] = "eight"
    no_label = nodes_doc()
    del no_label["items"][2]["metadata"]["labels"][SUBBLOCK]
    return [
        ["slurm", _write(tmp_path, "cycle.conf", "SwitchName=a Switches=b\nSwitchName=b Switches=a\n"),
         "--gpus-per-node", 4],
        ["slurm", _write(tmp_path, "two.conf", "BlockName=a Nodes=n[1-2]\nBlockName=b Nodes=n2\n"),
         "--gpus-per-node", 4],
        ["slurm", _write(tmp_path, "bin.conf", "SwitchName=a\x00"), "--gpus-per-node", 4],
        ["slurm", TOPOLOGY_CONF],  # no GPU count
        ["slurm", TOPOLOGY_CONF, "--gpus-per-node", 0],
        ["slurm", TOPOLOGY_CONF, "--slurm-conf", _write(tmp_path, "s.conf", 'NodeName=gpu01 Features="a\n')],
        ["slurm", TOPOLOGY_CONF, "--gpus-per-node", 4, "--down", "gpu[1-"],
        ["slurm", TOPOLOGY_CONF, "--gpus-per-node", 4, "--seed", 3],
        ["slurm", tmp_path / "missing.conf", "--gpus-per-node", 4],
        ["k8s", _write(tmp_path, "n1.json", json.dumps(bad_nodes))],
        ["k8s", _write(tmp_path, "n2.json", json.dumps(no_label))],
        ["k8s", _write(tmp_path, "n3.json", '{"kind": "List", "items": [}')],
        ["k8s", NODES_JSON, "--levels", "kubernetes.io/hostname,x"],
        ["k8s", NODES_JSON, "--jobs", _write(tmp_path, "zero.csv", "job_id,num_gpus,model\n1,0,BERT\n")],  # no warning
        ["graphml", _write(tmp_path, "c.graphml", "<graphml><graph edgedefault='directed'><node id='a'/>")],
        ["graphml", CLUSTER_GRAPHML, "--measurements", tmp_path],
        ["graphml", CLUSTER_GRAPHML, "--jobs", _write(tmp_path, "j.csv", "job_id,num_gpus,perfclass\n1,2,classZ\n")],
        ["graphml", CLUSTER_GRAPHML, "--jobs", _write(tmp_path, "r.csv", "job_id,num_gpus,model,is_running\n"
                                                     "1,2,BERT,true\n")],
    ]


@pytest.mark.parametrize("case", range(18))
def test_cli_import_bad_input_exits_2_with_one_line_and_no_output(case, tmp_path, capsys):
    argv = _bad_inputs(tmp_path)[case]
    out = tmp_path / "out.json"
    rc, stdout, err = run(capsys, "import", *argv, "-o", out)
    assert rc == 2, (argv, err)
    assert err.count("\n") == 1 and re.match(r"pal-opt( import \w+)?: error: ", err) and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".out.json*"))
    assert stdout == ""


def test_cli_bad_input_cases_are_all_run(tmp_path):
    assert len(_bad_inputs(tmp_path)) == 18


def test_cli_import_refuses_an_instance_that_solve_would_refuse(tmp_path, capsys):
    """320,000 GPUs are within the cluster size limit (2^20) but their instance file holds more
    JSON values than load_instance reads (2,000,000): import wrote it (exit 0) and solve then
    refused it.  Now import refuses it, naming the topology file, and writes nothing."""
    from pal_opt.io.jsonfile import parse_json

    conf = _write(tmp_path, "big.conf", "SwitchName=s Nodes=n[1-40000]\n")
    out = tmp_path / "out.json"
    rc, stdout, err = run(capsys, "import", "slurm", conf, "--gpus-per-node", 8, "-o", out)
    assert (rc, stdout) == (2, "") and err.count("\n") == 1, err
    assert err.startswith(f"pal-opt: error: {conf}: the instance it makes (320,000 GPUs on 40,000 servers, 0 jobs")
    assert "commas, more than the limit of 2,000,000 JSON values, so pal-opt solve would refuse the file" in err
    assert not out.exists() and not list(tmp_path.glob(".out.json*"))
    # the limit is the reader's own: a file just like it is refused by what solve reads with
    with pytest.raises(InstanceError, match="more than the limit of 2,000,000 JSON values"):
        parse_json("[" + "1," * 2_000_000 + "1]")


# --------------------------------------------------------------------------- CLI: export
@pytest.fixture
def solved(tmp_path, capsys) -> tuple[Path, Path]:
    inst, pl = tmp_path / "k.json", tmp_path / "p.json"
    assert run(capsys, "import", "k8s", NODES_JSON, "--jobs", JOBS_CSV, "-o", inst)[0] == 0
    assert run(capsys, "solve", inst, "--method", "ilp", "--backend", "highs", "--out", pl)[0] == 0
    return inst, pl


def _gpus_by_job(inst: RoundInstance, pl: Path) -> dict[str, set[int]]:
    return {str(k): set(v) for k, v in load_placement_file(pl)["placements"].items()}


def test_export_k8s_matches_the_placement(solved, tmp_path, capsys):
    inst_path, pl = solved
    out = tmp_path / "pods.json"
    rc, stdout, err = run(capsys, "export", "k8s", inst_path, pl, "-o", out)
    assert rc == 0, err
    doc = json.loads(out.read_text())
    assert doc["apiVersion"] == "pal-opt/v1" and doc["kind"] == "PodPlacements"
    inst = load_instance(inst_path)
    cl = inst.cluster
    gid = {(cl.server_ids[s], int(k)): int(g) for g, s, k in zip(cl.gpu_ids, cl.server_of, local_indices(cl),
                                                                 strict=True)}
    got: dict[str, set[int]] = {}
    for item in doc["items"]:
        assert set(item) == {"job", "pod", "node", "gpus"}
        got.setdefault(str(item["job"]), set()).update(gid[(item["node"], k)] for k in item["gpus"])
    assert got == _gpus_by_job(inst, pl)
    pods = [(str(i["job"]), i["pod"]) for i in doc["items"]]
    assert len(set(pods)) == len(pods)
    assert [j for j, _ in pods] == sorted((j for j, _ in pods), key=[str(j.id) for j in inst.jobs].index)


def test_export_slurm_matches_the_placement(tmp_path, capsys):
    inst_path, pl = tmp_path / "s.json", tmp_path / "p.json"
    assert run(capsys, "import", "slurm", TOPOLOGY_CONF, "--gpus-per-node", 4, "--jobs", JOBS_CSV, "-o", inst_path)[0] == 0
    assert run(capsys, "solve", inst_path, "--method", "pal", "--out", pl)[0] == 0
    out = tmp_path / "p.tsv"
    rc, _, err = run(capsys, "export", "slurm", inst_path, pl, "-o", out)
    assert rc == 0, err
    inst = load_instance(inst_path)
    cl = inst.cluster
    placed = _gpus_by_job(inst, pl)
    rows = list(csv.DictReader(out.open(), delimiter="\t"))
    assert [r["job"] for r in rows] == [str(j.id) for j in inst.jobs if str(j.id) in placed]
    for r in rows:
        gpus = placed[r["job"]]
        hosts = {cl.server_ids[cl.server_of[cl.position[g]]] for g in gpus}
        assert set(expand_hostlist(r["nodelist"])) == hosts and int(r["nodes"]) == len(hosts)
        assert int(r["gpus"]) == len(gpus)
        per_node = {}
        for part in r["sbatch"].split(" : "):
            opts = dict(o.removeprefix("--").split("=", 1) for o in part.split())
            for h in expand_hostlist(opts["nodelist"]):
                per_node[h] = int(opts["gres"].removeprefix("gpu:"))
            assert int(opts["nodes"]) == len(expand_hostlist(opts["nodelist"]))
        assert per_node == {h: sum(1 for g in gpus if cl.server_ids[cl.server_of[cl.position[g]]] == h)
                            for h in hosts}


def test_export_slurm_rows_uneven_gang():
    cl = Cluster.from_arrays(list(range(8)), ["n1"] * 4 + ["n2"] * 4, {"classA": [1.0] * 8})
    inst = RoundInstance(cl, (Job(3, 5, "classA"),))
    rows = slurm_rows(inst, {"placements": {"3": [0, 1, 2, 4, 5]}})
    assert rows == [{"job": 3, "nodes": 2, "gpus": 5, "nodelist": "n[1-2]",
                     "sbatch": "--nodes=1 --nodelist=n1 --gres=gpu:3 : --nodes=1 --nodelist=n2 --gres=gpu:2",
                     "gpu_indices": "n1:0-2 n2:0-1"}]
    assert pod_placements(inst, {"placements": {"3": [5, 4, 0, 1, 2]}})["items"] == [
        {"job": 3, "pod": 0, "node": "n1", "gpus": [0, 1, 2]}, {"job": 3, "pod": 1, "node": "n2", "gpus": [0, 1]}]


def test_export_slurm_names_the_gpus_the_placement_chose():
    """``--gres`` counts let Slurm pick any GPUs of a node, which loses the placement's choice (its
    variability): the ``gpu_indices`` column keeps which ones, as local indices per host."""
    cl = Cluster.from_arrays(list(range(8)), ["n1"] * 4 + ["n2"] * 4, {"classA": [1.0, 1.3, 1.0, 1.0, 1.2, 1.0, 1.0, 1.0]})
    inst = RoundInstance(cl, (Job("a", 3, "classA"), Job("b", 2, "classA")))
    rows = slurm_rows(inst, {"placements": {"a": [3, 0, 6], "b": [2, 7]}})
    assert [r["gpu_indices"] for r in rows] == ["n1:0,3 n2:2", "n1:2 n2:3"]
    from pal_opt.topology.slurm import format_slurm_rows

    text = format_slurm_rows(rows).splitlines()
    assert text[0].split("\t") == ["job", "nodes", "gpus", "nodelist", "sbatch", "gpu_indices"]
    assert text[1].split("\t")[-1] == "n1:0,3 n2:2"


def test_export_slurm_names_the_gpu_types():
    """On a typed cluster ``--gres`` carries each node's GPU type; a node where a mixing job holds
    GPUs of two types lists both, and nodes group by the whole value."""
    types = ["a100"] * 4 + ["a100"] * 2 + ["v100"] * 2 + ["v100"] * 4
    cl = Cluster.from_arrays(list(range(12)), ["n1"] * 4 + ["n2"] * 4 + ["n3"] * 4, {"classA": [1.0] * 12},
                             gpu_types=types)
    inst = RoundInstance(cl, (Job(1, 4, "classA", gpu_type="a100", kind="guaranteed"),
                              Job(2, 6, "classA", mix_types=True)))
    rows = slurm_rows(inst, {"placements": {"1": [0, 1, 2, 3], "2": [4, 5, 6, 7, 8, 9]}})
    assert [r["sbatch"] for r in rows] == [
        "--nodes=1 --nodelist=n1 --gres=gpu:a100:4",
        "--nodes=1 --nodelist=n2 --gres=gpu:a100:2,gpu:v100:2 : --nodes=1 --nodelist=n3 --gres=gpu:v100:2"]
    assert placement_by_host(inst, {"placements": {"2": [9, 4, 8, 5, 6, 7]}})[0].hosts[0].types == (
        "a100", "a100", "v100", "v100")



@pytest.mark.parametrize("name", ["a 1", "a100:sxm", "v,2", "t4(x)"])
def test_export_slurm_refuses_a_type_name_gres_cannot_carry(name, tmp_path, capsys):
    """An instance file may name a type anything; ``--gres=gpu:a100:sxm:2`` would be another request
    (and a blank would split the sbatch options): one error line, nothing written."""
    cl = Cluster.from_arrays(list(range(4)), ["n1"] * 4, {"classA": [1.0] * 4}, gpu_types=[name] * 4)
    inst = RoundInstance(cl, (Job("j", 2, "classA"),))
    with pytest.raises(InstanceError, match=r"^i\.json: cluster\.gpus\.type\[0\]: GPU type .* cannot be written in a "
                                            "Slurm --gres"):
        slurm_rows(inst, {"placements": {"j": [0, 1]}}, source="p.json", instance_source="i.json")
    inst_path, pl, out = tmp_path / "i.json", _write(tmp_path, "p.json", '{"placements": {"j": [0, 1]}}'), tmp_path / "o"
    save_instance(inst, inst_path)
    rc, stdout, err = run(capsys, "export", "slurm", inst_path, pl, "-o", out)
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert f"{inst_path}: cluster.gpus.type[0]: GPU type {name!r} (of job j's GPUs) cannot be written in a Slurm --gres" in err
    assert "p.json" not in err
    assert not out.exists() and stdout == ""


@pytest.mark.parametrize("host", ["node a", "n[1]", "a,b"])
def test_export_slurm_names_the_instance_field_of_a_host_name_no_hostlist_can_say(host, tmp_path, capsys):
    """The host name comes from the instance's ``cluster.gpus.server`` (its first GPU there), not
    from the placement file: the one error line names that file and field."""
    cl = Cluster.from_arrays(list(range(6)), ["n1", "n1", host, host, "n3", "n3"], {"classA": [1.0] * 6})
    inst = RoundInstance(cl, (Job("j", 2, "classA"), Job("k", 2, "classA")))
    with pytest.raises(InstanceError, match=r"^i\.json: cluster\.gpus\.server\[2\]: host name .* cannot be written as "
                                            r"a Slurm hostlist \(a host of job k\)$"):
        slurm_rows(inst, {"placements": {"j": [0, 1], "k": [2, 3]}}, source="p.json", instance_source="i.json")
    inst_path, out = tmp_path / "i.json", tmp_path / "o.tsv"
    pl = _write(tmp_path, "p.json", '{"placements": {"j": [0, 1], "k": [2, 3]}}')
    save_instance(inst, inst_path)
    rc, stdout, err = run(capsys, "export", "slurm", inst_path, pl, "-o", out)
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err and stdout == ""
    assert err == (f"pal-opt: error: {inst_path}: cluster.gpus.server[2]: host name {host!r} cannot be written as a "
                   "Slurm hostlist (a host of job k)\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["i.json", "p.json"]  # nothing written

# --------------------------------------------------------------------------- exports: pipeline stage maps
def _pipeline_round() -> RoundInstance:
    """Three hosts; a pipeline job ``p`` (stages of 3 and 2 replicas) and a gang ``7``."""
    cl = Cluster.from_arrays(list(range(10)), ["n1"] * 4 + ["n2"] * 4 + ["n3"] * 2, {"classA": [1.0] * 10})
    pipe = Pipeline((0.010, 0.006), (3, 2))
    return RoundInstance(cl, (Job("p", 5, "classA", pipeline=pipe), Job(7, 2, "classA")))


def _export(capsys, tmp_path: Path, fmt: str, inst: RoundInstance, placement: dict) -> tuple[int, str, str, Path]:
    inst_path, out = tmp_path / "i.json", tmp_path / f"out.{fmt}"
    save_instance(inst, inst_path)
    pl = _write(tmp_path, "p.json", json.dumps(placement))
    rc, stdout, err = run(capsys, "export", fmt, inst_path, pl, "-o", out)
    return rc, stdout, err, out


@pytest.mark.parametrize("given", [False, True], ids=["stages-from-order", "stages-given"])
def test_exports_carry_a_pipeline_jobs_stage_map(given, tmp_path, capsys):
    """A pipeline job's stages (the placement's ``stages``, else its GPU list cut by the replica
    counts) reach every export: Slurm's ``stages`` column, a ``stages`` list per pod, a ``stage``
    per GPU in GraphML.  The gang beside it is written as before."""
    inst = _pipeline_round()
    placement: dict = {"placements": {"p": [0, 4, 5, 1, 2], "7": [8, 9]}}
    if given:  # stage 0 on n1's GPU 1 and n2's 0-1; stage 1 on n1's 0 and 2
        placement = {"placements": {"p": [0, 1, 2, 4, 5], "7": [8, 9]}, "stages": {"p": [[1, 4, 5], [0, 2]]}}
    want = {0: 0, 4: 0, 5: 0, 1: 1, 2: 1} if not given else {1: 0, 4: 0, 5: 0, 0: 1, 2: 1}
    rc, _, err, out = _export(capsys, tmp_path, "slurm", inst, placement)
    assert rc == 0, err
    rows = list(csv.DictReader(out.open(), delimiter="\t"))
    assert list(rows[0]) == ["job", "nodes", "gpus", "nodelist", "sbatch", "gpu_indices", "stages"]
    assert rows[0]["gpu_indices"] == "n1:0-2 n2:0-1" and rows[1]["gpu_indices"] == "n3:0-1"
    assert rows[0]["stages"] == ("n1:0 n2:0-1 | n1:1-2" if not given else "n1:1 n2:0-1 | n1:0,2")
    assert rows[1]["stages"] == "" and rows[1]["sbatch"] == "--nodes=1 --nodelist=n3 --gres=gpu:2"
    back = {(h, int(i)): k for k, stage in enumerate(rows[0]["stages"].split(" | "))
            for share in stage.split(" ") for h, idx in [share.rsplit(":", 1)]
            for part in idx.split(",") for i in _index_range(part)}
    gid = {("n1", 0): 0, ("n1", 1): 1, ("n1", 2): 2, ("n2", 0): 4, ("n2", 1): 5}
    assert {gid[key]: k for key, k in back.items()} == want
    rc, _, err, out = _export(capsys, tmp_path, "k8s", inst, placement)
    assert rc == 0, err
    items = json.loads(out.read_text())["items"]
    assert [(i["node"], i["gpus"], i.get("stages")) for i in items] == [
        ("n1", [0, 1, 2], [want[0], want[1], want[2]]), ("n2", [0, 1], [0, 0]), ("n3", [0, 1], None)]
    rc, _, err, out = _export(capsys, tmp_path, "graphml", inst, placement)
    assert rc == 0, err
    import networkx as nx

    gr = nx.read_graphml(out)
    assert {a["id"]: a["stage"] for _, a in gr.nodes(data=True) if "stage" in a} == want
    assert {a["id"] for _, a in gr.nodes(data=True) if a.get("job") == "7"} == {8, 9}
    _same_cluster(to_cluster(load_graphml(out)), inst.cluster)  # the attribute is ignored when read back


def _index_range(part: str) -> range:
    a, _, b = part.partition("-")
    return range(int(a), int(b or a) + 1)


def test_exports_of_gangs_only_have_no_stage_fields(tmp_path, capsys):
    """No pipeline job: the Slurm table has no ``stages`` column, no pod has ``stages`` and no GPU a
    ``stage``."""
    cl = Cluster.from_arrays(list(range(10)), ["n1"] * 4 + ["n2"] * 4 + ["n3"] * 2, {"classA": [1.0] * 10})
    inst = RoundInstance(cl, (Job("p", 5, "classA"), Job(7, 2, "classA")))
    placement = {"placements": {"p": [0, 4, 5, 1, 2], "7": [8, 9]}, "stages": {"p": [[0, 4, 5, 1, 2]]}}
    rc, _, err, out = _export(capsys, tmp_path, "slurm", inst, placement)
    assert rc == 0, err
    assert out.read_text() == (
        "job\tnodes\tgpus\tnodelist\tsbatch\tgpu_indices\n"
        "p\t2\t5\tn[1-2]\t--nodes=1 --nodelist=n1 --gres=gpu:3 : --nodes=1 --nodelist=n2 --gres=gpu:2\tn1:0-2 n2:0-1\n"
        "7\t1\t2\tn3\t--nodes=1 --nodelist=n3 --gres=gpu:2\tn3:0-1\n")
    rc, _, err, out = _export(capsys, tmp_path, "k8s", inst, placement)
    assert rc == 0, err
    assert out.read_text() == (
        '{\n  "apiVersion": "pal-opt/v1",\n  "kind": "PodPlacements",\n  "items": [\n'
        '    {"job": "p", "pod": 0, "node": "n1", "gpus": [0, 1, 2]},\n'
        '    {"job": "p", "pod": 1, "node": "n2", "gpus": [0, 1]},\n'
        '    {"job": 7, "pod": 0, "node": "n3", "gpus": [0, 1]}\n  ]\n}\n')
    rc, _, err, out = _export(capsys, tmp_path, "graphml", inst, placement)
    assert rc == 0, err
    assert out.read_text() == graphml_text(cl, {0: "p", 1: "p", 2: "p", 4: "p", 5: "p", 8: 7, 9: 7})
    assert 'attr.name="stage"' not in out.read_text()


@pytest.mark.parametrize("fmt", ["slurm", "k8s", "graphml"])
def test_exports_refuse_stages_that_do_not_fit_the_pipeline(fmt, tmp_path, capsys):
    """Stages that ``pal-opt check`` rejects cannot be written: one line naming the placement file,
    exit status 2, no output."""
    placement = {"placements": {"p": [0, 1, 2, 4, 5]}, "stages": {"p": [[0, 4], [1, 2, 5]]}}
    rc, stdout, err, out = _export(capsys, tmp_path, fmt, _pipeline_round(), placement)
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err and stdout == ""
    assert f"{tmp_path / 'p.json'}: placements: does not fit the instance: job 'p': stage 0 needs 3 GPUs" in err
    assert not out.exists()


def _typed_round() -> RoundInstance:
    """Two a100 nodes and one v100 node; a job that may not mix types, a job guaranteed on a100,
    a job that may use only v100, a strong-scaling job on 2 or 4 GPUs."""
    types = ["a100"] * 8 + ["v100"] * 4
    cl = Cluster.from_arrays(list(range(12)), ["n1"] * 4 + ["n2"] * 4 + ["n3"] * 4, {"classA": [1.0] * 12},
                             gpu_types=types)
    return RoundInstance(cl, (Job("mix", 2, "classA"), Job("g", 2, "classA", gpu_type="a100", kind="guaranteed"),
                              Job("v", 1, "classA", allowed_types=("v100",)),
                              Job("s", 2, "classA", kind="strong-scaling", allowed_counts=(2, 4))))


@pytest.mark.parametrize("fmt", ["slurm", "k8s", "graphml"])
@pytest.mark.parametrize(("placements", "message"), [
    ({"mix": [6, 8]}, "job 'mix': GPUs of types 'a100', 'v100', but it does not mix types"),
    ({"g": [8, 9]}, "job 'g': GPUs [8, 9] are not of its type (guaranteed GPU type 'a100')"),
    ({"v": [0]}, "job 'v': GPUs [0] are not of its type (usable GPU types: 'v100')"),
    ({"s": [0, 1, 2]}, "job 's': may run on [2, 4] GPUs, got 3"),
], ids=["mixed-types", "guaranteed-off-type", "off-allowed-types", "count"])
def test_exports_refuse_a_placement_off_its_jobs_gpu_types_or_counts(fmt, placements, message, tmp_path, capsys):
    """A job on GPU types it may not use, on several types when it does not mix, or on a GPU count
    it may not run on is what ``pal-opt check`` calls invalid (exit 1); the exports wrote it (Slurm
    even asked for the forbidden type in ``--gres``).  Now refused like any placement that does not
    fit: one line naming the placement file, the job and the constraint, exit status 2, no output."""
    inst = _typed_round()
    rc, stdout, err, out = _export(capsys, tmp_path, fmt, inst, {"placements": placements})
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err and stdout == ""
    assert f"{tmp_path / 'p.json'}: placements: does not fit the instance: {message}" in err
    assert not out.exists()
    rc, said, err = run(capsys, "check", tmp_path / "i.json", tmp_path / "p.json")
    assert rc == 1 and message in said + err  # the checker's own verdict on the same placement


def test_exports_write_a_placement_within_its_jobs_gpu_types(tmp_path, capsys):
    """The same typed round, every job within its types and counts: exported (the refusal above is
    about the violation, not about typed rounds)."""
    placement = {"placements": {"mix": [0, 1], "g": [4, 5], "v": [8], "s": [2, 3, 6, 7]}}
    for fmt in ("slurm", "k8s", "graphml"):
        rc, _, err, out = _export(capsys, tmp_path, fmt, _typed_round(), placement)
        assert rc == 0 and out.exists(), err


def test_export_graphml_marks_jobs(solved, tmp_path, capsys):
    inst_path, pl = solved
    out = tmp_path / "c.graphml"
    rc, _, err = run(capsys, "export", "graphml", inst_path, pl, "-o", out)
    assert rc == 0, err
    import networkx as nx

    gr = nx.read_graphml(out)
    held = {}
    for _, attrs in gr.nodes(data=True):
        if "job" in attrs:
            held.setdefault(attrs["job"], set()).add(attrs["id"])
    inst = load_instance(inst_path)
    assert held == _gpus_by_job(inst, pl)
    _same_cluster(to_cluster(load_graphml(out)), inst.cluster)


@pytest.mark.parametrize("fmt", ["slurm", "k8s", "graphml"])
def test_export_rejects_a_placement_that_does_not_fit(fmt, solved, tmp_path, capsys):
    inst_path, pl = solved
    doc = json.loads(pl.read_text())
    bad = copy.deepcopy(doc)
    first = next(iter(bad["placements"]))
    bad["placements"][first][0] = 40  # a GPU of the cordoned node
    bad_path = _write(tmp_path, "bad.json", json.dumps(bad))
    out = tmp_path / "out"
    rc, stdout, err = run(capsys, "export", fmt, inst_path, bad_path, "-o", out)
    assert rc == 2 and err.count("\n") == 1 and "is failed" in err and str(bad_path) in err
    assert not out.exists() and stdout == ""


# --------------------------------------------------------------------------- fuzz: bad input never escapes as a traceback
_KEYS = ["kind", "items", "metadata", "name", "labels", "spec", "status", "capacity", "allocatable", "nvidia.com/gpu",
         "unschedulable", "taints", "key", "effect", "conditions", "type", BLOCK, SUBBLOCK]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10) | st.sampled_from(["8", "List", "Node", "Ready", "True", "x", ""]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=5),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_fuzz_kubernetes_nodes(doc):
    try:
        topo = parse_nodes(doc)
    except InstanceError as exc:
        assert str(exc) and "\n" not in str(exc)  # one line
        return
    assert len(topo.gpu_ids) > 0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 8), st.integers(0, 2)), min_size=1, max_size=6))
def test_generated_kubernetes_node_lists_read_back(nodes):
    """Well-formed node lists (1-8 GPUs a node, in up to three sub-blocks) read back as written:
    the fuzz test above parses none of its 300 documents (all are refused), so its success path
    never ran."""
    items = [node(f"n{i}", str(gpus), labels={BLOCK: "b", SUBBLOCK: f"s{sub}"}) for i, (gpus, sub) in enumerate(nodes)]
    topo = parse_nodes({"kind": "List", "items": items})
    assert topo.hosts == tuple(f"n{i}" for i in range(len(nodes)))
    cl = to_cluster(topo)
    assert np.bincount(cl.server_of, minlength=len(nodes)).tolist() == [gpus for gpus, _ in nodes]
    sub_of = [sub for _, sub in nodes]  # servers share a rack exactly when they share a sub-block
    racks = cl.rack_of_server.tolist()
    assert all((racks[a] == racks[b]) == (sub_of[a] == sub_of[b]) for a in range(len(nodes)) for b in range(a))


_TOKENS = ["SwitchName=s0", "SwitchName=s1", "SwitchName=s[2-3]", "Nodes=n[1-2]", "Nodes=n2", "Switches=s[0-1]",
           "Switches=s0", "Switches=s2", "BlockName=b", "BlockSizes=4", "LinkSpeed=1", "#", "\\\n", "\n", " ",
           "n[", "]", "=", "nodes=n3"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), max_size=25))
def test_fuzz_topology_conf(tokens):
    text = "".join(t if t in ("\n", " ", "\\\n") else f" {t}" for t in tokens)
    try:
        h = parse_topology_conf(text)
    except InstanceError as exc:
        assert str(exc) and "\n" not in str(exc)  # one line
        return
    cl = to_cluster(pal_opt.topology.Topology.from_counts(h.hosts, h.levels, dict.fromkeys(h.hosts, 1)))
    assert cl.num_gpus == cl.num_servers == len(set(h.hosts)) == len(h.hosts)  # one GPU per host, hosts once


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=5), st.booleans())
def test_generated_topology_conf_reads_back(sizes, spine):
    """Well-formed trees (leaf switches of 1-4 hosts, with or without a spine) read back as
    written: the fuzz test above parses only a few of its token soups (4 of 300), so its success
    path is barely exercised."""
    lines, want, n = [], {}, 0
    for s, size in enumerate(sizes):
        lines.append(f"SwitchName=s{s} Nodes=" + (f"n[{n + 1}-{n + size}]" if size > 1 else f"n{n + 1}"))
        want.update({f"n{n + k}": f"s{s}" for k in range(1, size + 1)})
        n += size
    if spine:
        lines.append("SwitchName=spine Switches=" + (f"s[0-{len(sizes) - 1}]" if len(sizes) > 1 else "s0"))
    h = parse_topology_conf("\n".join(lines))
    assert h.hosts == tuple(want)
    assert [lv.name for lv in h.levels] == ["switch-1", "switch-2"][:1 + spine]
    assert dict(h.levels[0].group_of) == want
    if spine:
        assert dict(h.levels[1].group_of) == dict.fromkeys(want, "spine")


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_fuzz_graphml(data):
    text = CLUSTER_GRAPHML.read_text()
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(text)))
        j = data.draw(st.integers(i, min(len(text), i + 40)))
        text = text[:i] + data.draw(st.sampled_from(["", "x", "<", ">", '"', "gpu", "server", "rack", "1", "-"])) + text[j:]
    try:
        cl = to_cluster(parse_graphml(text))
    except InstanceError as exc:
        assert str(exc) and "\n" not in str(exc)  # one line
        return
    assert cl.num_gpus == len(set(cl.gpu_ids.tolist())) > 0


def test_graphml_undeclared_keys_are_errors_and_untyped_keys_are_strings():
    text = CLUSTER_GRAPHML.read_text()
    with pytest.raises(InstanceError, match="no key d99"):
        parse_graphml(text.replace('<data key="d3">', '<data key="d99">', 1), "c.graphml")
    untyped = re.sub(r' attr.type="\w+"', "", text)  # GraphML's default type: string
    _same_cluster(to_cluster(parse_graphml(untyped)), to_cluster(parse_graphml(text)))


def test_cli_collapse_warning_only_for_good_input(tmp_path):
    """As a user sees it (no pytest log capture): the warning on a good import, one error line on a bad one."""
    import subprocess
    import sys

    def pal(*argv: object) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pal_opt.cli", *map(str, argv)], capture_output=True,
                              text=True, timeout=120)

    good = pal("import", "k8s", NODES_JSON, "-o", tmp_path / "k.json")
    assert good.returncode == 0 and good.stderr.count("\n") == 1
    assert f"level '{BLOCK}' above the rack level '{SUBBLOCK}' collapsed into the cluster level" in good.stderr
    bad = pal("import", "k8s", NODES_JSON, "--jobs", _write(tmp_path, "j.csv", "job_id,num_gpus,model\n1,0,BERT\n"),
              "-o", tmp_path / "b.json")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "must be a positive integer" in bad.stderr
    assert not (tmp_path / "b.json").exists()
    quiet = pal("import", "slurm", TOPOLOGY_CONF, "--gpus-per-node", 8, "-o", tmp_path / "s.json")
    assert quiet.returncode == 0 and quiet.stderr == ""  # one spine: nothing lost, nothing said


def test_cli_import_refused_as_written_prints_no_warning_before_its_error(tmp_path, capsys):
    """A topology whose levels above the rack collapse (a warning) and whose instance is too big to
    write: the error is the only line (the warning came first, two lines for one failure)."""
    conf = _write(tmp_path, "big3.conf", "SwitchName=l1 Nodes=n[1-10000]\nSwitchName=l2 Nodes=n[10001-20000]\n"
                  "SwitchName=l3 Nodes=n[20001-30000]\nSwitchName=l4 Nodes=n[30001-40000]\n"
                  "SwitchName=m1 Switches=l[1-2]\nSwitchName=m2 Switches=l[3-4]\nSwitchName=t Switches=m[1-2]\n")
    out = tmp_path / "out.json"
    rc, _, err = run(capsys, "import", "slurm", conf, "--gpus-per-node", 8, "-o", out)
    assert rc == 2 and err.count("\n") == 1 and "warning" not in err, err
    assert not out.exists()
    # written, the same warning still shows (after the round is known to be good)
    small = _write(tmp_path, "small3.conf", "SwitchName=l1 Nodes=n[1-2]\nSwitchName=l2 Nodes=n[3-4]\n"
                   "SwitchName=l3 Nodes=n[5-6]\nSwitchName=l4 Nodes=n[7-8]\n"
                   "SwitchName=m1 Switches=l[1-2]\nSwitchName=m2 Switches=l[3-4]\nSwitchName=t Switches=m[1-2]\n")
    rc, stdout, err = run(capsys, "import", "slurm", small, "--gpus-per-node", 8, "-o", out)
    assert rc == 0 and stdout.startswith(f"wrote {out}") and out.exists()
    assert err.startswith("pal-opt: warning: ") and "collapsed into the cluster level" in err, err


@pytest.mark.parametrize(("field", "value", "message"), [
    ("status", "weird", "status: must be one of optimal, feasible, infeasible, fallback"),
    ("objective", "x", "objective: must be a number"),
    ("admission", 3, "admission: must be a queue rule's name, got 3"),
])
def test_export_names_a_declared_field_the_file_got_wrong(field, value, message, tmp_path, capsys):
    """It said ``placements: does not fit the instance: status: ...``: the wrong field and cause."""
    cl = Cluster.from_arrays(list(range(4)), ["n1"] * 4, {"classA": [1.0] * 4})
    inst = RoundInstance(cl, (Job("a", 2, "classA"),))
    rc, _, err, out = _export(capsys, tmp_path, "slurm", inst, {"placements": {"a": [0, 1]}, field: value})
    assert rc == 2 and not out.exists()
    assert err.strip() == f"pal-opt: error: {tmp_path / 'p.json'}: {message}" or (
        err.startswith(f"pal-opt: error: {tmp_path / 'p.json'}: {message}"))


def test_graphml_values_pretty_printed_on_their_own_lines_are_read_stripped():
    text = _graphml([("s", "g"), ("s", "h")], {"s": _S, "g": {**_G, "type": "A100"}, "h": {"kind": "gpu", "id": 1,
                                                                                       "type": "A100"}})
    pretty = text.replace(">A100<", ">\n      A100\n    <").replace(">gpu<", ">\n gpu\n<")
    assert pretty != text
    topo = parse_graphml(pretty, "c.graphml")
    assert set(topo.gpu_types) == {"A100"}
