"""A simulated cluster read from an instance file: ``pal-opt simulate TRACE --cluster round.json``.

A synthetic cluster (``--cluster 16x4``) has servers of one size and factors drawn from
measurements.  A cluster you have imported has its own servers and racks, and its own measured factors when
they came in with it (``pal-opt import blox`` from a Blox ``gpu_df`` with measured
``PerfVar_<class>`` columns, ``import graphml`` with ``factor_<class>`` attributes; ``import
slurm`` and ``import k8s`` give factors 1.0, or Longhorn draws with ``--measurements``), and a
trace can be replayed on exactly that: :func:`cluster_from_file` takes the file's cluster (GPUs, servers, racks, factors
per class) and nothing else.  Its jobs and round parameters are not used (the simulator's options
set λ, binning and restart costs), and every GPU starts the simulation free (busy and failed
GPUs of the file are a moment of the cluster, not part of it: ``--failures`` simulates
failures).

``--cluster`` names a file when its value is not a shape (``16x4``, ``4x4x4``) and is an existing
file or ends in ``.json`` (:func:`is_cluster_file`): a shape stays a shape even where a file has
its name.  A file that is not an instance file yet (``.graphml``, ``.conf``, ``.csv``, a
Kubernetes node list) is refused with the ``pal-opt import`` command that converts it.

The factors come from the file, so ``--variability``, ``--synthetic-variability`` and
``--variability-draw`` do not apply (:func:`check_file_options`).  A cluster of one GPU type (an
import that names it: ``Gres=gpu:a100:8``, a Kubernetes product label) runs with the type set
aside; a cluster of several types is refused: a PAL trace runs on one GPU type (a Sia trace
takes ``--cluster TYPE:SERVERSxGPUS,...``).  So is a cluster without factors for a class of the
trace's jobs.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..errors import InstanceError, OptionError
from ..model import Cluster, GpuState
from ..options import file_path
from .engine import CLUSTER_SHAPE

__all__ = ["is_cluster_file", "check_file_options", "cluster_from_file"]

log = logging.getLogger(__name__)


#: Files ``pal-opt import`` converts, by suffix: how to convert one (``{src}``: the file).
_IMPORTS = {
    ".graphml": "pal-opt import graphml {src} -o cluster.json",
    ".xml": "pal-opt import graphml {src} -o cluster.json",
    ".conf": "pal-opt import slurm TOPOLOGY.conf [--gres-conf GRES.conf] -o cluster.json",
    ".csv": "a Blox gpu_df: pal-opt import blox --gpus {src} -o cluster.json",
}


def is_cluster_file(text: str | None) -> bool:
    """Whether ``--cluster`` names a file rather than a shape: not a shape, and an existing path
    (a pipe such as ``<(cat round.json)`` or a directory too: a regular file only, and they were
    ``--cluster must look like 16x4``) or a ``*.json`` name (module docstring)."""
    return (text is not None and CLUSTER_SHAPE.fullmatch(text) is None
            and (text.lower().endswith(".json") or os.path.exists(text)))


def check_file_options(args: argparse.Namespace) -> None:
    """A cluster file brings its own factors: the options that draw them are an :class:`OptionError`."""
    given = [flag for flag, on in (("--variability", bool(args.variability)),
                                   ("--synthetic-variability", args.synthetic_variability is not None),
                                   ("--variability-draw", args.variability_draw != "numpy")) if on]
    if given and not os.path.exists(args.cluster):  # the file's absence first: it is what to fix
        raise InstanceError("no such file", source=args.cluster, path="--cluster")
    if given:
        raise OptionError(f"{given[0]} draws factors for a synthetic cluster; --cluster {args.cluster} brings its "
                          "own (its cluster.factors)")


def cluster_from_file(path: str | os.PathLike[str], classes: Collection[str]) -> Cluster:
    """The cluster of the instance file ``path``, every GPU free, checked for a PAL trace whose
    jobs have ``classes`` (module docstring)."""
    from ..io import load_json
    from ..io.instance import instance_from_dict, is_node_list

    src = file_path(path)
    if not os.path.exists(src):
        raise InstanceError("no such file", source=src, path="--cluster")
    how = _IMPORTS.get(Path(src).suffix.lower())
    if how is not None and not os.path.isdir(src):  # a directory: the reader says so
        raise OptionError(f"--cluster {src}: simulate takes an instance file (*.json); convert this one first: "
                          f"{how.format(src=src)}")
    doc = load_json(src, what="instance file")  # read once: a pipe (<(cat nodes.json)) cannot be read again
    if is_node_list(doc):
        raise OptionError(f"--cluster {src}: a Kubernetes node list; convert it first: pal-opt import k8s {src} "
                          "-o cluster.json")
    cluster = instance_from_dict(doc, source=src).cluster
    if len(cluster.type_names) > 1:
        raise InstanceError(f"a cluster of GPU types ({', '.join(cluster.type_names)}): a PAL trace runs on one "
                            "GPU type (a sia trace takes --cluster TYPE:SERVERSxGPUS,...)", source=src,
                            path="cluster.gpus.type")
    if cluster.typed:  # one type, named: the PAL simulator's one type
        log.info("%s: every GPU is of type %s; simulated as an untyped cluster", src, cluster.type_names[0])
        cluster = replace(cluster, type_names=(), type_of=np.zeros(cluster.num_gpus, dtype=np.int64), throughput={})
    missing = sorted(set(classes) - set(cluster.factors))
    if missing:
        raise InstanceError(f"no factors for class {missing[0]!r}, which jobs of the trace have (the file has "
                            f"{', '.join(cluster.factors)})", source=src, path="cluster.factors")
    held = int(np.count_nonzero(cluster.state != GpuState.FREE))
    if held:
        log.info("%s: %d busy or failed GPUs of the file start the simulation free", src, held)
        cluster = cluster.with_state(np.zeros(cluster.num_gpus, dtype=np.int8))
    return cluster
