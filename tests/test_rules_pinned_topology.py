"""Rules of pal_opt/topology/ that no test held: each test here fails on a one-rule change (a mutation review, 2026-12-06) that the rest of the suite let pass."""

from __future__ import annotations

from pathlib import Path

from pal_opt.topology.kubernetes import parse_nodes
from pal_opt.topology.slurm import load_slurm, parse_topology_conf
from pal_opt.topology.slurmconf import logical_lines


def test_an_escaped_backslash_at_the_end_does_not_continue_the_line() -> None:
    assert logical_lines("a=x\\\\\nb=2\n") == [(1, "a=x\\"), (2, "b=2")]


def test_a_top_switch_stays_in_the_next_level_beside_another_s_parent() -> None:
    # n1 hangs under s0 (under spine) and under s1 (a top switch): at level 2 it reaches spine and s1
    h = parse_topology_conf("SwitchName=s0 Nodes=n1\nSwitchName=s1 Nodes=n[1-2]\nSwitchName=spine Switches=s0")
    level2 = dict(h.levels[1].group_of)
    assert level2["n1"] == level2["n2"]


def test_a_node_without_gpus_outside_the_topology_is_not_warned_about(tmp_path: Path) -> None:
    topo = tmp_path / "topology.conf"
    topo.write_text("SwitchName=s0 Nodes=n[1-2]\n")
    conf = tmp_path / "slurm.conf"
    conf.write_text("NodeName=n[1-2] Gres=gpu:4\nNodeName=login1 CPUs=8\n")
    t = load_slurm(topo, slurm_conf=conf)
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
