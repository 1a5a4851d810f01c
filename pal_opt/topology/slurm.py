"""Slurm: ``topology.conf`` in, placements out as Slurm node lists.

``topology.conf``
-----------------
The two forms of Slurm's ``topology.conf(5)`` are read:

* **topology/tree**: ``SwitchName=NAME`` with either ``Nodes=HOSTLIST`` (a leaf switch) or
  ``Switches=HOSTLIST`` (its child switches), and an optional ``LinkSpeed=`` (ignored);
* **topology/block**: ``BlockName=NAME Nodes=HOSTLIST`` lines and an optional
  ``BlockSizes=`` line (ignored).

Lines are read as Slurm's configuration parser reads them: parameter names are
case-insensitive, white space may surround ``=``, a value may be in double quotes, ``#``
starts a comment, a line ending in ``\\`` continues on the next, and node and switch lists are
hostlist expressions (:mod:`~pal_opt.topology.hostlist`).  Rejected, with the file and line:
unknown keys, a key twice on one line, a switch defined twice, a switch with both ``Nodes``
and ``Switches``, a child switch that is never defined, a cycle of switches (a switch among its
own descendants), a node in two blocks, a file that lists no node, and Slurm's newer
``topology.yaml`` (named as such).

As in Slurm, a switch may be listed under several parents (a fat tree: every spine lists every
leaf), and a node under several leaf switches (Slurm warns; so does the import, naming the
nodes).

Levels (:class:`~pal_opt.topology.hierarchy.TopologyLevel`, innermost first): ``switch-1`` is
each node's leaf switch, ``switch-2`` the switch above that, and so on; in an uneven tree a
node whose chain of switches ends early keeps its topmost switch at the higher levels.  Nodes
that share a switch at a level, directly or through other nodes, form one group there, named
by its switches as a hostlist (two spines above the same leaves: ``spine[1-2]``; leaf switches
sharing a node: ``leaf[1-2]``); in a plain tree a group is its one switch.  A block topology has
the one level ``block``.  In pal-opt's model the leaf switch (or block) is the rack; every switch
above it collapses into the cluster level (:func:`~pal_opt.topology.to_cluster`).

GPUs per node
-------------
A topology says nothing of GPUs: give ``gpus_per_node``, a ``slurm.conf`` whose ``NodeName=...
Gres=gpu:N`` lines (``gpu:TYPE:N`` and several GRES entries allowed; a ``NodeName=DEFAULT`` line
sets the default for the lines after it) give each node's GPUs, or a ``gres.conf`` whose
``Name=gpu`` lines (``Type=``, ``File=/dev/nvidia[0-7]``, ``Count=``; a line without ``NodeName``
for every node) list each node's devices (:mod:`~pal_opt.topology.gres`).  A node's GPUs come
from its ``gres.conf`` lines (where Slurm enumerates the devices), else from its ``slurm.conf``
``Gres``, else ``gpus_per_node``; a node whose two files disagree is named in a warning.  Nodes with
no GPU are left out.  ``down`` (a hostlist, e.g. from ``sinfo -h -t down,drain -o %N``) marks nodes
out of service: their GPUs are failed.

GPU types: when every GPU node names its GPUs' type (``gpu:a100:8``, ``Type=a100``) the cluster is
typed with those names (:attr:`pal_opt.model.Cluster.type_names`); when none does, untyped; GPU
nodes of both kinds are an error naming one of each.  A node may hold GPUs of several types
(``Gres=gpu:a100:4,gpu:v100:4``: its first four GPUs ``a100``, the next four ``v100``), as the
model keeps a type per GPU.

All three files may ``Include`` others (:mod:`~pal_opt.topology.slurmconf`).

Placements out
--------------
:func:`slurm_placement_text` writes one tab-separated row per placed job, in queue order::

    job  nodes  gpus  nodelist     sbatch                                                                  gpu_indices
    0    2      8     node[01-02]  --nodes=2 --nodelist=node[01-02] --gres=gpu:4                           node01:0-3 node02:0-3
    7    2      3     node[03,05]  --nodes=1 --nodelist=node03 --gres=gpu:2 : --nodes=1 --nodelist=node05 --gres=gpu:1  node03:1,3 node05:2

``sbatch`` holds the options that request exactly that allocation: one component when every
node gives the job the same number of GPUs (``--gres`` counts per node), else one Slurm
heterogeneous-job component per GPU count, separated by ``:``.  On a cluster with GPU types the
counts carry the type (``--gres=gpu:a100:4``; a node where a job mixing types holds GPUs of two
gets ``--gres=gpu:a100:2,gpu:v100:2``), and nodes group by that whole value; a type name that
cannot be written there (``:``, ``,``, ``(``, ``)`` or white space) is an error.

``gpu_indices`` names the GPUs the placement chose, per host ``HOST:INDICES`` (local GPU indices
as Slurm writes an index list, ``0-2,5``), hosts separated by a space.  A ``--gres`` count lets
Slurm pick which GPUs of a node a job gets, and no sbatch option names GPU indices; the column
is what a launcher needs to keep the placement's choice of GPUs (its variability) when the job
holds its nodes whole (``--exclusive`` with every GPU of each node: under ``ConstrainDevices`` a
job sees only the GPUs Slurm allocated it) and sets ``CUDA_VISIBLE_DEVICES`` per node from it (a
local index is the GPU's device number where the instance has them, :attr:`pal_opt.model.Cluster.devices`,
else its rank among its host's GPU ids: :mod:`~pal_opt.topology.placement`, ``docs/topology.md``).

A pipeline job's row has one more column, ``stages``: its stages from the first, separated by
`` | ``; each stage is the job's GPUs that run it, per host ``HOST:INDICES`` (local GPU indices as
Slurm writes a GPU index list, ``0-2,5``), hosts separated by a space::

    job  nodes  gpus  nodelist     sbatch                                      gpu_indices           stages
    p    2      5     node[01-02]  --nodes=1 --nodelist=node01 --gres=gpu:3 : ...  node01:0-2 node02:0-1  node01:0-1 | node01:2 node02:0-1

(a host name holds no white space, so the text splits back at `` | `` and then at spaces, and a
share at its last ``:``).  The column is there only when some row has it (the others leave it
empty).
"""

from __future__ import annotations

import csv
import graphlib
import io
import numbers
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InstanceError, OptionError, counted
from ..model import RoundInstance
from ..options import check_cluster_size, file_path, require_items, require_text
from ..result import PlacementResult
from .gres import gres_conf_gpus, node_devices, node_types, resolve_gpus, slurm_conf_gpus
from .hierarchy import Hierarchy, Topology, TopologyLevel
from .hostlist import compress_hostlist, expand_hostlist
from .placement import HostShare, JobHosts, placement_by_host
from .slurmconf import ConfigLine, config_lines, expand_field, key_values, line_ref, read_config

__all__ = [
    "parse_topology_conf",
    "parse_slurm_conf_gpus",
    "parse_slurm_conf_gres",
    "parse_gres_conf",
    "load_slurm",
    "slurm_rows",
    "format_slurm_rows",
    "slurm_placement_text",
]

_YAML_START = re.compile(r"---|-?\s*(topology|cluster_default|tree|block|flat)\s*:", re.IGNORECASE)
#: A GPU type name ``--gres=gpu:TYPE:N`` can carry (Slurm splits the value at ``,`` and ``:``).
_GRES_TYPE = re.compile(r"[^\s:,()]+")
_TOPO_KEYS = {"switchname", "switches", "nodes", "linkspeed", "blockname", "blocksizes"}


def _pairs(line: ConfigLine) -> dict[str, str]:
    """``{lower-case key: value}`` of a topology.conf line; unknown or repeated keys are errors."""
    out: dict[str, str] = {}
    for key, value in key_values(line):
        low = key.lower()
        if low not in _TOPO_KEYS:
            raise InstanceError(f"unknown parameter {key!r} (topology.conf knows SwitchName, Switches, Nodes, "
                                "LinkSpeed, BlockName, BlockSizes)", source=line.source, path=line.at())
        if low in out:
            raise InstanceError(f"{key} given twice", source=line.source, path=line.at())
        if not value:
            raise InstanceError(f"{key} has no value", source=line.source, path=line.at())
        out[low] = value
    return out


@dataclass(frozen=True)
class _Group:
    """A switch or block as written: its file and line, and its nodes or child switches."""

    name: str
    source: str
    line: int
    nodes: list[str]
    children: list[str]


def _read_groups(lines: list[ConfigLine]) -> tuple[dict[str, _Group], str]:
    """The switches (or blocks) of a topology.conf, and which of the two forms it uses."""
    groups: dict[str, _Group] = {}
    form = ""
    if lines and _YAML_START.match(lines[0].text):
        raise InstanceError("looks like Slurm's topology.yaml, which pal-opt does not read: give the topology.conf "
                            "form (SwitchName= or BlockName= lines)", source=lines[0].source, path=lines[0].at())
    for line in lines:
        kv = _pairs(line)
        source, at = line.source, line.at()
        kind = "tree" if "switchname" in kv else "block" if "blockname" in kv else ""
        if not kind:
            if set(kv) == {"blocksizes"}:
                continue
            raise InstanceError("expected a SwitchName= or BlockName= line", source=source, path=at)
        if form and kind != form:
            raise InstanceError("mixes SwitchName (topology/tree) and BlockName (topology/block) lines",
                                source=source, path=at)
        form = kind
        name = kv["switchname" if kind == "tree" else "blockname"]
        wrong = {"switches", "linkspeed"} & set(kv) if kind == "block" else {"blockname", "blocksizes"} & set(kv)
        if wrong:
            raise InstanceError(f"{sorted(wrong)[0]} does not belong on a {kind} line", source=source, path=at)
        if name in groups:
            first = groups[name]
            raise InstanceError(f"{name!r} is defined twice (first on {line_ref(first.line, first.source, source)})",
                                source=source, path=at)
        if "nodes" in kv and "switches" in kv:
            raise InstanceError(f"switch {name!r} lists both Nodes and Switches (a switch's children are nodes "
                                "or switches)", source=source, path=at)
        nodes = expand_field(kv["nodes"], line, "Nodes") if "nodes" in kv else []
        children = expand_field(kv["switches"], line, "Switches") if "switches" in kv else []
        groups[name] = _Group(name, source, line.number, nodes, children)
    return groups, form


def _parents(switches: Mapping[str, _Group]) -> dict[str, list[str]]:
    """Each child switch's parents, in file order (a fat tree lists a leaf under every spine);
    an unknown child and a cycle are errors."""
    parents: dict[str, list[str]] = {}
    for sw in switches.values():
        for child in sw.children:
            if child not in switches:
                raise InstanceError(f"unknown switch {child!r} (no SwitchName={child} line)", source=sw.source,
                                    path=f"line {sw.line}, Switches")
            parents.setdefault(child, []).append(sw.name)
    graph = {name: sw.children for name, sw in switches.items()}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        loop = exc.args[1]  # [a, b, ..., a], each a child of the next
        at = switches[loop[-2]]
        raise InstanceError(f"switches form a cycle: {' -> '.join(reversed(loop))} (each lists the next "
                            "in Switches=)", source=at.source, path=f"line {at.line}") from None
    return parents


def _leaf_of(groups: Mapping[str, _Group], source: str, what: str) -> dict[str, list[str]]:
    """Each node's groups (leaf switches or blocks), in file order; a node in two blocks is an error."""
    leaf: dict[str, list[str]] = {}
    for g in groups.values():
        for node in g.nodes:
            seen = leaf.setdefault(node, [])
            if seen and what == "block":
                first = groups[seen[0]]
                raise InstanceError(f"node {node!r} is also in block {first.name!r} "
                                    f"({line_ref(first.line, first.source, g.source)}); a node has one block",
                                    source=g.source, path=f"line {g.line}, Nodes")
            seen.append(g.name)
    if not leaf:
        raise InstanceError("lists no node (no line has Nodes=)", source=source)
    return leaf


def _group_name(switches: list[str]) -> str:
    """A level's group: its one switch, or several switches as a hostlist (``spine[1-2]``)."""
    if len(switches) == 1:
        return switches[0]
    try:
        return compress_hostlist(switches)
    except InstanceError:  # a switch name no hostlist can say
        return "+".join(sorted(switches))


def _tree_level(reach: Mapping[str, list[str]]) -> dict[str, str]:
    """``{node: group}`` of one level from each node's switches at that level: nodes that share a
    switch, directly or through other nodes, are in one group."""
    up: dict[str, str] = {}

    def find(x: str) -> str:
        while up.setdefault(x, x) != x:
            up[x] = up[up[x]]
            x = up[x]
        return x

    for sws in reach.values():
        for sw in sws[1:]:
            up[find(sw)] = find(sws[0])
    members: dict[str, list[str]] = {}
    for sws in reach.values():
        for sw in sws:
            members.setdefault(find(sw), []).append(sw)
    names = {root: _group_name(list(dict.fromkeys(sws))) for root, sws in members.items()}
    return {node: names[find(sws[0])] for node, sws in reach.items()}


def _tree_levels(leaf: Mapping[str, list[str]], parents: Mapping[str, list[str]]) -> tuple[TopologyLevel, ...]:
    """The levels ``switch-1``, ``switch-2``, ... (module docstring): a node's switches at level
    k+1 are the parents of its switches at level k (a switch without a parent stays)."""
    reach = {node: list(sws) for node, sws in leaf.items()}
    levels = [TopologyLevel("switch-1", _tree_level(reach))]
    while True:
        nxt = {n: list(dict.fromkeys(p for sw in sws for p in parents.get(sw, [sw]))) for n, sws in reach.items()}
        if nxt == reach:
            return tuple(levels)
        reach = nxt
        levels.append(TopologyLevel(f"switch-{len(levels) + 1}", _tree_level(reach)))


def parse_topology_conf(text: str, source: str = "<memory>") -> Hierarchy:
    """The hosts and switch (or block) levels of a ``topology.conf`` text (module docstring).

    Examples
    --------
    >>> h = parse_topology_conf("SwitchName=s0 Nodes=n[1-2]\\nSwitchName=s1 Nodes=n3\\n"
    ...                         "SwitchName=spine Switches=s[0-1]")
    >>> h.hosts, [(lv.name, dict(lv.group_of)) for lv in h.levels]
    (('n1', 'n2', 'n3'), [('switch-1', {'n1': 's0', 'n2': 's0', 'n3': 's1'}), \
('switch-2', {'n1': 'spine', 'n2': 'spine', 'n3': 'spine'})])
    """
    return _hierarchy(config_lines(text, source, what="topology.conf"), source)


def _hierarchy(lines: list[ConfigLine], source: str) -> Hierarchy:
    groups, form = _read_groups(lines)
    if form == "block":
        blocks = {node: gs[0] for node, gs in _leaf_of(groups, source, "block").items()}
        return Hierarchy(tuple(blocks), (TopologyLevel("block", blocks),))
    parents = _parents(groups)
    leaf = _leaf_of(groups, source, "leaf switch")
    multi = [node for node, sws in leaf.items() if len(sws) > 1]
    notes = (f"nodes under more than one leaf switch: {compress_hostlist(multi)} (Slurm warns of these too); "
             "leaf switches that share a node are taken as one rack",) if multi else ()
    return Hierarchy(tuple(leaf), _tree_levels(leaf, parents), notes)


def parse_slurm_conf_gres(text: str, source: str = "<memory>") -> dict[str, dict[str | None, int]]:
    """``{node: {GPU type: GPUs}}`` from the ``NodeName=... Gres=gpu:...`` lines of a ``slurm.conf``
    text (``None``: GPUs whose entry names no type; ``Include`` lines are read,
    :mod:`~pal_opt.topology.slurmconf`).

    >>> parse_slurm_conf_gres("NodeName=n1 Gres=gpu:a100:4,gpu:v100:2\\nNodeName=n2 Gres=gpu:8")
    {'n1': {'a100': 4, 'v100': 2}, 'n2': {None: 8}}
    """
    gpus = slurm_conf_gpus(config_lines(text, source, what="slurm.conf"))
    return {node: dict(g.counts) for node, g in gpus.items()}


def parse_slurm_conf_gpus(text: str, source: str = "<memory>") -> dict[str, int]:
    """``{node: GPUs}`` from the ``NodeName=... Gres=gpu:N`` lines of a ``slurm.conf`` text.

    Nodes without a ``gpu`` GRES (and no ``NodeName=DEFAULT Gres=`` before them) have 0.

    >>> parse_slurm_conf_gpus("NodeName=DEFAULT Gres=gpu:4\\nNodeName=n[1-2] CPUs=8\\n"
    ...                       "NodeName=n3 Gres=gpu:a100:8,nic:1 # big")
    {'n1': 4, 'n2': 4, 'n3': 8}
    """
    return {node: sum(counts.values()) for node, counts in parse_slurm_conf_gres(text, source).items()}


def parse_gres_conf(
    text: str, source: str = "<memory>", nodes: Sequence[str] | None = None
) -> dict[str, dict[str | None, int]]:
    """``{node: {GPU type: GPUs}}`` from the ``Name=gpu`` lines of a ``gres.conf`` text
    (:mod:`~pal_opt.topology.gres`): for ``nodes`` (default: the nodes its ``NodeName`` lines name);
    a line without ``NodeName`` applies to every node.  Nodes without a GPU line are absent.

    >>> parse_gres_conf("NodeName=n[1-2] Name=gpu Type=a100 File=/dev/nvidia[0-7]\\n"
    ...                 "NodeName=n2 Name=gpu Type=a100 Count=2\\nName=mps Count=100")
    {'n1': {'a100': 8}, 'n2': {'a100': 10}}
    """
    if nodes is not None:
        nodes = list(require_items(nodes, "nodes", "a list of node names", of=str))
    conf = gres_conf_gpus(config_lines(text, source, what="gres.conf"))
    if nodes is None:
        nodes = list(dict.fromkeys(n for g in conf.gpu_lines for n in g.nodes or ()))
    return {node: dict(g.counts) for node, g in conf.node_gpus(nodes).items()}


def _failed(down: str | None, gpus: Mapping[str, int], src: str) -> dict[str, int]:
    """``{node: GPUs}`` of the nodes of a ``--down`` hostlist (all their GPUs fail).  As Slurm's
    ``hostlist_create`` does, blanks separate names as commas do, and an empty list is no node:
    ``sinfo -h -t down,drain -o %N`` prints nothing when no node is down."""
    if down is None or not down.strip():
        return {}
    try:
        names = expand_hostlist(",".join(down.split()))
    except InstanceError as exc:
        raise OptionError(f"--down: {exc.message}") from None
    unknown = [n for n in names if n not in gpus]
    if unknown:
        raise OptionError(f"--down: node {unknown[0]!r} is not in {src}")
    return {n: gpus[n] for n in names}


def _outside_topology(hosts: Sequence[str], conf: Mapping[str, Any] | None, gres: Any, src: str) -> list[str]:
    """A warning naming the nodes the slurm.conf or gres.conf gives GPUs that the topology.conf
    does not connect (every node must be under a switch, topology.conf(5)): their GPUs are left out."""
    inside = set(hosts)
    named = [n for n, g in (conf or {}).items() if g.total and n not in inside]
    if gres is not None:
        named += [n for g in gres.gpu_lines for n in g.nodes or () if n not in inside and n not in named]
    if not named:
        return []
    shown = ", ".join(named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
    return [f"{counted(len(named), 'node')} with GPUs in the slurm.conf or gres.conf "
            f"{'are' if len(named) > 1 else 'is'} in no switch of the topology.conf, {'their' if len(named) > 1 else 'its'} "
            f"GPUs left out: {shown}"]


def load_slurm(
    topology: str | os.PathLike[str],
    *,
    gpus_per_node: int | None = None,
    slurm_conf: str | os.PathLike[str] | None = None,
    gres_conf: str | os.PathLike[str] | None = None,
    down: str | None = None,
) -> Topology:
    """Read a ``topology.conf`` (and optionally a ``slurm.conf`` and a ``gres.conf``) into a :class:`Topology`.

    A node's GPUs come from its ``gres.conf`` lines (the devices its ``slurmd`` registers), else its
    ``slurm.conf`` ``Gres``, else ``gpus_per_node``; a node whose two files disagree is named in a
    warning (:attr:`Topology.notes`).  When every GPU node names its GPUs' type the topology is typed
    (:attr:`Topology.gpu_types`); when none does, untyped; some of each is an error
    (:func:`~pal_opt.topology.gres.node_types`).  All three files may hold ``Include`` lines
    (:mod:`~pal_opt.topology.slurmconf`).

    Parameters
    ----------
    topology
        The ``topology.conf`` file.
    gpus_per_node
        GPUs of every node (of nodes neither file gives GPUs when ``slurm_conf`` or ``gres_conf`` is given).
    slurm_conf
        A ``slurm.conf`` whose ``NodeName`` lines give ``Gres=gpu:[TYPE:]N``.
    gres_conf
        A ``gres.conf`` whose ``Name=gpu`` lines give each node's devices and their ``Type``.
    down
        A hostlist of nodes out of service (their GPUs are failed).
    """
    if gpus_per_node is None and slurm_conf is None and gres_conf is None:
        raise OptionError("Slurm needs the GPUs per node: give gpus_per_node (--gpus-per-node), a slurm.conf "
                          "(--slurm-conf) or a gres.conf (--gres-conf)")
    if gpus_per_node is not None and (isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, numbers.Integral)
                                      or gpus_per_node < 1):  # not a number: TypeError from the comparison before
        raise OptionError(f"gpus per node must be a positive integer, got {gpus_per_node!r}")
    if down is not None:
        require_text(down, "down")
    src = file_path(topology, "topology")
    hier = _hierarchy(read_config(topology, what="topology.conf"), src)
    conf = slurm_conf_gpus(read_config(slurm_conf, what="slurm.conf")) if slurm_conf is not None else None
    gres = gres_conf_gpus(read_config(gres_conf, what="gres.conf")) if gres_conf is not None else None
    per_node, notes = resolve_gpus(hier.hosts, gres, conf, gpus_per_node)
    notes += _outside_topology(hier.hosts, conf, gres, src)
    gpus = {h: per_node[h].total if h in per_node else 0 for h in hier.hosts}
    check_cluster_size(sum(gpus.values()), src)  # before a type per GPU is listed (99999999 of them ran out of memory)
    types = node_types(per_node)
    if not any(gpus.values()):
        raise InstanceError("no node of the topology has a GPU (give --gpus-per-node, Gres=gpu:N lines in the "
                            "slurm.conf or Name=gpu lines in the gres.conf)", source=src)
    failed = _failed(down, gpus, src)
    return Topology.from_counts(hier.hosts, hier.levels, gpus, failed, source=src, types=types,
                                notes=(*hier.notes, *notes), devices=node_devices(per_node))


def _gres(share: HostShare) -> str:
    """The ``--gres`` value for one host's share: ``gpu:N``, or ``gpu:TYPE:N`` per type (in the
    order the types first appear) on a cluster with GPU types."""
    if share.types is None:
        return f"gpu:{len(share.gpus)}"
    return ",".join(f"gpu:{t}:{n}" for t, n in Counter(share.types).items())


def _sbatch(job: JobHosts) -> str:
    by_gres: dict[str, list[str]] = {}
    for share in job.hosts:
        by_gres.setdefault(_gres(share), []).append(str(share.host))
    parts = [
        f"--nodes={len(hosts)} --nodelist={compress_hostlist(hosts)} --gres={gres}"
        for gres, hosts in by_gres.items()
    ]
    return " : ".join(parts)


def slurm_rows(
    instance: RoundInstance, placement: PlacementResult | Mapping[str, Any], *, source: str | None = None,
    instance_source: str | None = None,
) -> list[dict[str, Any]]:
    """One row per placed job (queue order): ``job``, ``nodes``, ``gpus``, ``nodelist``
    (a compressed hostlist), ``sbatch`` and ``gpu_indices``, and for a pipeline job ``stages`` (module docstring).
    The placement is checked against the instance first
    (:func:`~pal_opt.topology.placement.placement_by_host`).

    ``source`` names the placement file and ``instance_source`` the instance file in messages: a
    host name no hostlist can say, or a GPU type no ``--gres`` value can, comes from the instance
    (``cluster.gpus.server[i]``, ``cluster.gpus.type[i]``: the first GPU that has it), not from
    the placement.
    """
    rows = []
    placed = placement_by_host(instance, placement, source=source)  # (checks the instance first)
    cl = instance.cluster
    for job in placed:
        hosts = [str(s.host) for s in job.hosts]
        try:
            nodelist = compress_hostlist(hosts)
        except InstanceError as exc:
            bad_host = next(s.host for s in job.hosts if not _hostlist_name(s.host))
            first = int(np.flatnonzero(cl.server_of == cl.server_ids.index(bad_host))[0])
            raise InstanceError(f"{exc.message} (a host of job {job.job})", source=instance_source,
                                path=f"cluster.gpus.server[{first}]") from None
        bad = next((t for s in job.hosts for t in s.types or () if not _GRES_TYPE.fullmatch(t)), None)
        if bad is not None:
            first = int(np.flatnonzero(cl.type_of == cl.type_names.index(bad))[0])
            raise InstanceError(f"GPU type {bad!r} (of job {job.job}'s GPUs) cannot be written in a Slurm --gres "
                                "value (a type name there holds no ':', ',', '(', ')' or white space)",
                                source=instance_source, path=f"cluster.gpus.type[{first}]")
        row = {"job": job.job, "nodes": len(hosts), "gpus": job.num_gpus, "nodelist": nodelist,
               "sbatch": _sbatch(job), "gpu_indices": " ".join(f"{s.host}:{_index_runs(s.gpus)}" for s in job.hosts)}
        stage_map = job.stage_map()
        if stage_map is not None:
            row["stages"] = " | ".join(" ".join(f"{h}:{_index_runs(g)}" for h, g in stage.items())
                                       for stage in stage_map)
        rows.append(row)
    return rows


def _index_runs(indices: Sequence[int]) -> str:
    """Ascending GPU indices as Slurm writes them (``IDX:0-2,5``): ``0-2,5``."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _hostlist_name(host: Any) -> bool:
    """Whether a hostlist can say ``host``."""
    try:
        compress_hostlist([host])
    except InstanceError:
        return False
    return True


def format_slurm_rows(rows: list[dict[str, Any]]) -> str:
    """Rows of :func:`slurm_rows` as tab-separated text with a header line (and a last column
    ``stages`` when a row has one: a pipeline job's)."""
    buf = io.StringIO()
    columns = ["job", "nodes", "gpus", "nodelist", "sbatch", "gpu_indices"] + (["stages"] if any("stages" in r for r in rows) else [])
    writer = csv.DictWriter(buf, columns, delimiter="\t", lineterminator="\n", restval="")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def slurm_placement_text(
    instance: RoundInstance, placement: PlacementResult | Mapping[str, Any], *, source: str | None = None,
    instance_source: str | None = None,
) -> str:
    """The placement as the tab-separated table of the module docstring (``source``,
    ``instance_source``: as in :func:`slurm_rows`)."""
    return format_slurm_rows(slurm_rows(instance, placement, source=source, instance_source=instance_source))
