"""Rules of pal_opt/topology/ that no test held: each test here fails on a one-rule change (mutation
reviews, 2026-12-06 and 2026-12-07) that the rest of the suite let pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from pal_opt.errors import InstanceError, OptionError
from pal_opt.model import Cluster, Job, RoundInstance, RoundParams
from pal_opt.topology import hostlist
from pal_opt.topology.graphml import parse_graphml
from pal_opt.topology.hierarchy import Topology, TopologyLevel, check_levels
from pal_opt.topology.hostlist import compress_hostlist, expand_hostlist
from pal_opt.topology.kubernetes import parse_nodes
from pal_opt.topology.placement import HostShare, JobHosts, gpu_jobs, placement_by_host
from pal_opt.topology.slurm import load_slurm, parse_slurm_conf_gres, parse_topology_conf
from pal_opt.topology.slurmconf import logical_lines


def test_an_escaped_backslash_at_the_end_does_not_continue_the_line() -> None:
    assert logical_lines("a=x\\\\\nb=2\n") == [(1, "a=x\\"), (2, "b=2")]


def test_a_top_switch_stays_in_the_next_level_beside_another_s_parent() -> None:
    # n1 hangs under s0 (under spine) and under s1 (a top switch): at level 2 it reaches spine and s1
    h = parse_topology_conf("SwitchName=s0 Nodes=n1\nSwitchName=s1 Nodes=n[1-2]\nSwitchName=spine Switches=s0")
    level2 = dict(h.levels[1].group_of)
    assert level2["n1"] == level2["n2"]


def _two_nodes_with(tmp_path: Path, slurm_conf: str) -> Any:
    """``load_slurm`` of a switch over n1 and n2 with this ``slurm.conf``."""
    topo = tmp_path / "topology.conf"
    topo.write_text("SwitchName=s0 Nodes=n[1-2]\n")
    conf = tmp_path / "slurm.conf"
    conf.write_text(slurm_conf)
    return load_slurm(topo, slurm_conf=conf)


def test_a_node_without_gpus_outside_the_topology_is_not_warned_about(tmp_path: Path) -> None:
    t = _two_nodes_with(tmp_path, "NodeName=n[1-2] Gres=gpu:4\nNodeName=login1 CPUs=8\n")
    assert not any("login1" in note for note in t.notes)


def _node(name: str, conditions: list[dict[str, str]] | None = None,
          taints: list[dict[str, str]] | None = None) -> dict[str, object]:
    return {"kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"taints": taints or []},
            "status": {"capacity": {"nvidia.com/gpu": "2"}, "conditions": conditions or []}}


def _failed_gpus(*nodes: dict[str, object]) -> list[int]:
    topo = parse_nodes({"kind": "List", "items": list(nodes)}, levels=["kubernetes.io/hostname"])
    return [int(v) for v in topo.state.reshape(len(nodes), 2).sum(axis=1)]


def test_a_node_whose_ready_condition_is_unknown_is_out_of_service() -> None:
    ok = _failed_gpus(_node("a", [{"type": "Ready", "status": "True"}]))
    unknown = _failed_gpus(_node("a", [{"type": "Ready", "status": "Unknown"}]))
    assert ok == [0] and unknown[0] > 0


def test_a_prefer_no_schedule_taint_does_not_take_a_node_out() -> None:
    soft = _failed_gpus(_node("a", taints=[{"key": "node.kubernetes.io/unreachable", "effect": "PreferNoSchedule"}]))
    hard = _failed_gpus(_node("a", taints=[{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]))
    assert soft == [0] and hard[0] > 0


# -- hostlists (2026-12-07) ----------------------------------------------------------------------------
def test_a_hostlist_may_expand_to_exactly_max_hosts_and_no_more(monkeypatch: pytest.MonkeyPatch) -> None:
    # MAX_HOSTS is the most names one expression may give (a small limit stands in for 1,000,000):
    # exactly that many is allowed (was: >= refused it); one more in one range is refused by the
    # range, before its names are built (was: > let the range build them); and the limit is on
    # the whole expression, not each comma-separated part (was: each part had the whole budget)
    monkeypatch.setattr(hostlist, "MAX_HOSTS", 10)
    assert len(expand_hostlist("n[1-10]")) == 10
    assert len(expand_hostlist("a[1-4],b[1-6]")) == 10
    with pytest.raises(InstanceError, match=r"range '1-11' in hostlist 'n\[1-11\]' has more than 10 hosts"):
        expand_hostlist("n[1-11]")
    with pytest.raises(InstanceError, match=r"expands to more than 10 hosts"):
        expand_hostlist("a[1-5],b[1-6]")


def test_names_ending_in_19_digits_compress_to_a_hostlist_that_expands_back() -> None:
    # a bracket's numbers have at most 18 digits, so a name ending in 19 is written whole
    # (was: 19 digits were taken as a number and written as a range no hostlist reads back)
    names = ["n1234567890123456789", "n1234567890123456790"]
    expr = compress_hostlist(names)
    assert expr == "n1234567890123456789,n1234567890123456790"
    assert expand_hostlist(expr) == names


# -- Slurm and gres (2026-12-07) -----------------------------------------------------------------------
def test_zero_gpus_per_node_is_refused_as_an_option(tmp_path: Path) -> None:
    topo = tmp_path / "topology.conf"
    topo.write_text("SwitchName=s0 Nodes=n[1-2]\n")
    with pytest.raises(OptionError, match="gpus per node must be a positive integer, got 0"):
        load_slurm(topo, gpus_per_node=0)


def test_a_node_with_zero_gpus_is_not_an_untyped_gpu_node(tmp_path: Path) -> None:
    # n2's Gres=gpu:0 gives it no GPU: it is left out, not counted as a GPU node without a type
    # beside n1's a100s (was: a type with 0 GPUs was kept, and the import refused the mix)
    t = _two_nodes_with(tmp_path, "NodeName=n1 Gres=gpu:a100:2\nNodeName=n2 Gres=gpu:0\n")
    assert t.hosts == ("n1",) and t.gpu_types == ("a100", "a100")


# -- levels and GraphML (2026-12-07) -------------------------------------------------------------------
def test_levels_that_do_not_nest_are_refused() -> None:
    # a and b share rack r1 but lie in two zones: the levels do not nest
    levels = [TopologyLevel("rack", {"a": "r1", "b": "r1"}), TopologyLevel("zone", {"a": "z1", "b": "z2"})]
    with pytest.raises(InstanceError, match="group 'r1' of level 'rack' lies in two groups of level 'zone'"):
        check_levels(["a", "b"], levels)
    check_levels(["a", "b"], [levels[0], TopologyLevel("zone", {"a": "z1", "b": "z1"})])


def test_the_innermost_level_must_map_every_host() -> None:
    with pytest.raises(InstanceError, match="host 'b' has no group at level 'rack'"):
        check_levels(["a", "b"], [TopologyLevel("rack", {"a": "r1"})])


def test_each_level_nests_in_the_one_right_above_it() -> None:
    # racks r1 and r2 both lie in row x, but x lies in two zones: the rows do not nest in the zones
    levels = [TopologyLevel("rack", {"a": "r1", "b": "r2"}), TopologyLevel("row", {"a": "x", "b": "x"}),
              TopologyLevel("zone", {"a": "z1", "b": "z2"})]
    with pytest.raises(InstanceError, match="group 'x' of level 'row' lies in two groups of level 'zone'"):
        check_levels(["a", "b"], levels)


def test_from_counts_refuses_device_numbers_or_types_that_do_not_match_the_gpus() -> None:
    rack = [TopologyLevel("rack", {"a": "r1"})]
    with pytest.raises(InstanceError, match="1 device numbers for 2 GPUs"):
        Topology.from_counts(["a"], rack, {"a": 2}, devices={"a": [0]})
    with pytest.raises(InstanceError, match="host 'a' has 2 GPUs but 3 GPU types"):
        Topology.from_counts(["a"], rack, {"a": 2}, types={"a": ["v100", "v100", "a100"]})
    with pytest.raises(InstanceError, match="host 'a' has 2 GPUs but 1 GPU types"):
        Topology.from_counts(["a"], rack, {"a": 2}, types={"a": ["v100"]})
    ok = Topology.from_counts(["a"], rack, {"a": 2}, types={"a": ["v100", "a100"]}, devices={"a": [3, 1]})
    assert ok.gpu_types == ("v100", "a100") and ok.devices is not None and ok.devices.tolist() == [3, 1]


@pytest.mark.parametrize("key", ["factor_classA", "throughput_classA"])
def test_a_graphml_factor_or_throughput_of_zero_is_refused(key: str) -> None:
    # factors and throughputs are numbers > 0 (the module docstring); 0 was let through
    gr = nx.DiGraph()
    gr.add_node("s", kind="server")
    gr.add_node("g", kind="gpu", id=0, type="v100", **{key: 0.0})
    gr.add_edge("s", "g")
    with pytest.raises(InstanceError, match=r"must be a finite number > 0"):
        parse_graphml("\n".join(nx.generate_graphml(gr)))


def _interleaved() -> RoundInstance:
    """GPUs 0-3 on hosts a, b, a, b (host order a, b); job 7 (an integer id) of 2 GPUs, x of 1."""
    cl = Cluster.from_arrays(range(4), ["a", "b", "a", "b"], {"k": [1.0] * 4})
    return RoundInstance(cl, (Job(7, 2, "k"), Job("x", 1, "k")), RoundParams(binning="none"))


def test_a_jobs_hosts_come_in_the_clusters_host_order() -> None:
    # GPU 1 is b's first GPU, GPU 2 a's second: a comes first although GPU 1 does
    assert placement_by_host(_interleaved(), {"placements": {"7": [1, 2]}}) == [
        JobHosts(7, (HostShare("a", (1,)), HostShare("b", (0,))))]


def test_gpu_jobs_gives_the_jobs_own_ids() -> None:
    assert gpu_jobs(_interleaved(), {"placements": {"7": [1, 2], "x": [0]}}) == {1: 7, 2: 7, 0: "x"}


def test_an_unappliable_placement_counts_its_other_problems() -> None:
    with pytest.raises(InstanceError, match=r"job 7: needs 2 distinct GPUs, got \[1, 1\] \(and 1 more problems\)$"):
        placement_by_host(_interleaved(), {"placements": {"7": [1, 1], "x": [9]}})


# -- gres.py (mutation audit, 2026-12-07) -------------------------------------------------------------
def _two_nodes(tmp_path: Path) -> Path:
    topo = tmp_path / "t.conf"
    topo.write_text("SwitchName=s0 Nodes=n[1-2]\n")
    return topo


def test_a_gres_named_gpu_in_capitals_is_a_gpu() -> None:
    """``Gres=GPU:4`` is four GPUs, as ``Name=GPU`` in a gres.conf is (the name is read
    ignoring case), not a GRES of another kind skipped."""
    assert parse_slurm_conf_gres("NodeName=n1 Gres=GPU:4\nNodeName=n2 Gres=Gpu:a100:2\n") == {
        "n1": {None: 4}, "n2": {"a100": 2}}


def test_a_type_is_named_by_the_line_that_first_gave_it(tmp_path: Path) -> None:
    """A node's untyped GPUs given on gres.conf lines 1 and 2: the error about them beside a
    typed node names line 1, where they were first given (it named line 2)."""
    gres = tmp_path / "g.conf"
    gres.write_text("NodeName=n1 Name=gpu Count=2\nNodeName=n1 Name=gpu Count=2\nNodeName=n2 Name=gpu Type=a100 Count=2\n")
    with pytest.raises(InstanceError, match=r"node 'n1' has GPUs without a type \(line 1\) but node 'n2' has "
                                            r"type 'a100' \(line 3\)"):
        load_slurm(_two_nodes(tmp_path), gres_conf=gres)


def test_the_last_autodetect_line_is_the_one_in_force(tmp_path: Path) -> None:
    """``AutoDetect=off`` then ``AutoDetect=nvml``: detection is on (the last line wins, as
    slurmd reads the file), so n2, which no line counts, is named in a warning."""
    gres = tmp_path / "g.conf"
    gres.write_text("AutoDetect=off\nAutoDetect=nvml\nNodeName=n1 Name=gpu Type=a100 Count=4\n")
    t = load_slurm(_two_nodes(tmp_path), gres_conf=gres)
    assert t.hosts == ("n1",) and len(t.notes) == 1 and "line 2: AutoDetect=nvml" in t.notes[0]
    gres.write_text("AutoDetect=nvml\nAutoDetect=off\nNodeName=n1 Name=gpu Type=a100 Count=4\n")
    assert load_slurm(_two_nodes(tmp_path), gres_conf=gres).notes == ()


def test_device_numbers_are_kept_only_when_they_name_each_gpu_once(tmp_path: Path) -> None:
    """``/dev/nvidia0`` and ``/dev/nvidia00`` are two device files of one number: the node's GPUs
    are then numbered by rank (no device numbers), not both given device 0."""
    gres = tmp_path / "g.conf"
    gres.write_text("NodeName=n[1-2] Name=gpu File=/dev/nvidia0\nNodeName=n[1-2] Name=gpu File=/dev/nvidia00\n")
    assert load_slurm(_two_nodes(tmp_path), gres_conf=gres).devices is None
    gres.write_text("NodeName=n[1-2] Name=gpu File=/dev/nvidia[3-4]\n")
    assert load_slurm(_two_nodes(tmp_path), gres_conf=gres).devices.tolist() == [3, 4, 3, 4]


def test_a_node_without_gpus_does_not_take_the_device_numbers_away(tmp_path: Path) -> None:
    """n2 has no GPU (its slurm.conf line gives no ``Gres=gpu``); n1's GPUs keep the device
    numbers of its ``File=`` devices (a GPU-less node has no devices to give, and was taken for
    one given otherwise)."""
    slurm = tmp_path / "s.conf"
    slurm.write_text("NodeName=n1 Gres=gpu:2\nNodeName=n2\n")
    gres = tmp_path / "g.conf"
    gres.write_text("NodeName=n1 Name=gpu File=/dev/nvidia[2-3]\n")
    t = load_slurm(_two_nodes(tmp_path), slurm_conf=slurm, gres_conf=gres)
    assert t.hosts == ("n1",) and t.devices is not None and t.devices.tolist() == [2, 3]


# --- hostlist (eighteenth session, second mutation audit) ---------------------------------------


def test_a_hostlist_range_one_step_backwards_is_refused():
    """``[3-2]`` runs backwards as much as ``[5-1]`` (refusing only ``hi < lo - 1`` expanded it to
    no host at all)."""
    with pytest.raises(InstanceError, match="runs backwards"):
        expand_hostlist("n[3-2]")


def test_a_hostlist_with_white_space_is_refused():
    with pytest.raises(InstanceError, match="white space"):
        expand_hostlist("node1, node2")


def test_a_host_named_twice_keeps_its_first_place():
    assert expand_hostlist("b,a,b") == ["b", "a"]
    assert expand_hostlist("n[2-3],n1,n2") == ["n2", "n3", "n1"]


def test_hosts_numbered_with_18_digits_are_compressed_to_a_range():
    """Up to 18 digits a trailing number is a number (``_RANGE`` reads 18); past that the name is
    kept whole."""
    a, b = "n" + "1" * 18, "n" + "1" * 17 + "2"
    assert compress_hostlist([b, a]) == f"n[{'1' * 18}-{'1' * 17}2]"
    assert expand_hostlist(compress_hostlist([b, a])) == [a, b]
    c, d = "n" + "1" * 19, "n" + "1" * 18 + "2"
    assert compress_hostlist([d, c]) == f"{c},{d}"
