"""A simulated cluster read from an instance file: ``pal-opt simulate TRACE --cluster round.json``.

A synthetic cluster (``--cluster 16x4``) has servers of one size and factors drawn from
measurements.  A cluster you have imported (``pal-opt import blox`` from a Blox ``gpu_df`` whose
``PerfVar_<class>`` columns you measured, ``import slurm`` / ``import k8s`` / ``import graphml``
with ``--measurements``) has its own servers, racks and factors, and a trace can be replayed on
exactly that: :func:`cluster_from_file` takes the file's cluster (GPUs, servers, racks, factors
per class) and nothing else.  Its jobs and round parameters are not used (the simulator's options
set λ, binning and restart costs), and every GPU starts the simulation free (busy and failed
GPUs of the file are a moment of the cluster, not part of it: ``--failures`` simulates
failures).

The factors come from the file, so ``--variability``, ``--synthetic-variability`` and
``--variability-draw`` do not apply (:func:`check_file_options`).  A cluster with GPU types is
refused: a PAL trace runs on one GPU type (a Sia trace takes ``--cluster
TYPE:SERVERSxGPUS,...``).  So is a cluster without factors for a class of the trace's jobs.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Collection

import numpy as np

from ..errors import InstanceError, OptionError
from ..model import Cluster, GpuState

__all__ = ["is_cluster_file", "check_file_options", "cluster_from_file"]

log = logging.getLogger(__name__)


def is_cluster_file(text: str | None) -> bool:
    """Whether ``--cluster`` names a file (an existing one, or any ``*.json``) rather than a shape."""
    return text is not None and (text.lower().endswith(".json") or os.path.isfile(text))


def check_file_options(args: argparse.Namespace) -> None:
    """A cluster file brings its own factors: the options that draw them are an :class:`OptionError`."""
    given = [flag for flag, on in (("--variability", bool(args.variability)),
                                   ("--synthetic-variability", args.synthetic_variability is not None),
                                   ("--variability-draw", args.variability_draw != "numpy")) if on]
    if given:
        raise OptionError(f"{given[0]} draws factors for a synthetic cluster; --cluster {args.cluster} brings its "
                          "own (its cluster.factors)")


def cluster_from_file(path: str | os.PathLike[str], classes: Collection[str]) -> Cluster:
    """The cluster of the instance file ``path``, every GPU free, checked for a PAL trace whose
    jobs have ``classes`` (module docstring)."""
    from ..io import load_instance

    src = os.fspath(path)
    if not os.path.exists(src):
        raise InstanceError("no such file", source=src, path="--cluster")
    cluster = load_instance(src).cluster
    if cluster.typed:
        raise InstanceError(f"a cluster of GPU types ({', '.join(cluster.type_names)}): a PAL trace runs on one "
                            "GPU type (a sia trace takes --cluster TYPE:SERVERSxGPUS,...)", source=src,
                            path="cluster.gpus.type")
    missing = sorted(set(classes) - set(cluster.factors))
    if missing:
        raise InstanceError(f"no factors for class {missing[0]!r}, which jobs of the trace have (the file has "
                            f"{', '.join(cluster.factors)})", source=src, path="cluster.factors")
    held = int(np.count_nonzero(cluster.state != GpuState.FREE))
    if held:
        log.info("%s: %d busy or failed GPUs of the file start the simulation free", src, held)
        cluster = cluster.with_state(np.zeros(cluster.num_gpus, dtype=np.int8))
    return cluster
