"""Cluster topologies in the formats clusters already have; placements out in forms schedulers apply.

Readers (each returns a :class:`Topology`: hosts, the full hierarchy of groups above them as
``(level name, {host: group})`` levels innermost first, and the GPUs):

* :func:`load_slurm` — Slurm ``topology.conf`` (switch tree or blocks), GPUs per node and their
  types from an option, ``slurm.conf`` ``Gres=gpu:[TYPE:]N`` or ``gres.conf`` ``Name=gpu`` lines
  (:mod:`~pal_opt.topology.slurm`);
* :func:`load_nodes` — ``kubectl get nodes -o json`` with Kueue topology labels
  (:mod:`~pal_opt.topology.kubernetes`);
* :func:`load_graphml` — GraphML in the shape of :attr:`pal_opt.model.Cluster.graph`
  (:mod:`~pal_opt.topology.graphml`).

:func:`to_cluster` and :func:`topology_round` map a topology onto pal-opt's three levels: a host
is a server, the innermost level is the rack, every level above collapses into the cluster
level (with a warning on the ``pal_opt.topology`` logger when that loses groups).

Writers: :func:`slurm_placement_text` (Slurm node lists and ``sbatch`` options per job),
:func:`pod_placements` (per-pod node assignments), :func:`graphml_text` (the cluster);
:func:`compress_hostlist` / :func:`expand_hostlist` (Slurm hostlists).

The names load on first use, so ``pal-opt``'s start-up does not import numpy for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_attributes

_EXPORTS: dict[str, str] = {
    "Hierarchy": ".hierarchy",
    "Topology": ".hierarchy",
    "TopologyLevel": ".hierarchy",
    "measured_factors": ".hierarchy",
    "to_cluster": ".hierarchy",
    "topology_round": ".hierarchy",
    "uniform_factors": ".hierarchy",
    "compress_hostlist": ".hostlist",
    "expand_hostlist": ".hostlist",
    "load_slurm": ".slurm",
    "parse_gres_conf": ".slurm",
    "parse_slurm_conf_gpus": ".slurm",
    "parse_slurm_conf_gres": ".slurm",
    "parse_topology_conf": ".slurm",
    "slurm_placement_text": ".slurm",
    "slurm_rows": ".slurm",
    "load_nodes": ".kubernetes",
    "parse_nodes": ".kubernetes",
    "pod_placements": ".kubernetes",
    "load_graphml": ".graphml",
    "parse_graphml": ".graphml",
    "graphml_text": ".graphml",
    "placement_by_host": ".placement",
}

if TYPE_CHECKING:
    from .graphml import graphml_text, load_graphml, parse_graphml
    from .hierarchy import (
        Hierarchy,
        Topology,
        TopologyLevel,
        measured_factors,
        to_cluster,
        topology_round,
        uniform_factors,
    )
    from .hostlist import compress_hostlist, expand_hostlist
    from .kubernetes import load_nodes, parse_nodes, pod_placements
    from .placement import placement_by_host
    from .slurm import (
        load_slurm,
        parse_gres_conf,
        parse_slurm_conf_gpus,
        parse_slurm_conf_gres,
        parse_topology_conf,
        slurm_placement_text,
        slurm_rows,
    )

__all__ = [
    "Hierarchy",
    "Topology",
    "TopologyLevel",
    "compress_hostlist",
    "expand_hostlist",
    "graphml_text",
    "load_graphml",
    "load_nodes",
    "load_slurm",
    "measured_factors",
    "parse_graphml",
    "parse_gres_conf",
    "parse_nodes",
    "parse_slurm_conf_gpus",
    "parse_slurm_conf_gres",
    "parse_topology_conf",
    "placement_by_host",
    "pod_placements",
    "slurm_placement_text",
    "slurm_rows",
    "to_cluster",
    "topology_round",
    "uniform_factors",
]


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
