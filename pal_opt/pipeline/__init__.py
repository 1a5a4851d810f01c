"""Pipeline-parallel partitioning of a profiled model (PipeDream's optimiser, SOSP'19).

* :mod:`~pal_opt.pipeline.profile` -- PipeDream layer profiles (``graph.txt``): :func:`load_profile`;
* :mod:`~pal_opt.pipeline.states` -- the cut states (antichain DAG) with prefix sums: :func:`build_states`;
* :mod:`~pal_opt.pipeline.partition` -- the cost model (:func:`stage_time`) and the hierarchical
  dynamic program (:func:`partition`, returning a :class:`PartitionResult`);
* :mod:`~pal_opt.pipeline.ip` -- the same optimum from integer programs on any solver backend
  (``partition(..., method="ip")``; ``formulations/pipeline_partition.md``);
* :mod:`~pal_opt.pipeline.cli` -- the ``pal-opt partition`` sub-command.

The names below load on first use, so importing this package (as the CLI does to register its
sub-command) does not import numpy.  The partitioner itself is
:func:`pal_opt.pipeline.partition.partition` (not re-exported here: it shares its name with its
module).

Examples
--------
>>> from pal_opt.pipeline import parse_profile
>>> from pal_opt.pipeline.partition import partition
>>> line = ("node{0} -- Linear -- forward_compute_time={1}, backward_compute_time={1}, "
...         "activation_size=4.0, parameter_size={2}")
>>> layers = [line.format(1, 3.0, 1e9), line.format(2, 1.0, 0.0), line.format(3, 2.0, 0.0)]
>>> text = "\\n".join(layers + ["\\tnode1 -- node2", "\\tnode2 -- node3"])
>>> result = partition(parse_profile(text), machines=[2], bandwidths=[1e10])
>>> round(result.time_per_sample, 9), [(s.layer_ids, s.replicas) for s in result.stages]
(0.006, [(('node1',), 1), (('node2', 'node3'), 1)])

Replicating the whole model on both workers would cost ``(12 ms + 4 x 1 GB / (2 x 10 GB/s)) / 2``
= 106 ms per sample, for node1's 1 GB of weights; a two-stage pipeline costs 6 ms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_attributes

_EXPORTS: dict[str, str] = {
    "Layer": ".profile",
    "Profile": ".profile",
    "load_profile": ".profile",
    "parse_profile": ".profile",
    "StateGraph": ".states",
    "build_states": ".states",
    "LevelStage": ".partition",
    "PipelineStage": ".partition",
    "PartitionResult": ".partition",
    "stage_time": ".partition",
    "allreduce_time": ".partition",
}

if TYPE_CHECKING:
    from .partition import (
        LevelStage,
        PartitionResult,
        PipelineStage,
        allreduce_time,
        stage_time,
    )
    from .profile import Layer, Profile, load_profile, parse_profile
    from .states import StateGraph, build_states

__all__ = [
    "Layer",
    "LevelStage",
    "PartitionResult",
    "PipelineStage",
    "Profile",
    "StateGraph",
    "allreduce_time",
    "build_states",
    "load_profile",
    "parse_profile",
    "stage_time",
]


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
