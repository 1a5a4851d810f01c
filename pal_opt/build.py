"""Build a round in memory: from a networkx graph (or a :class:`~pal_opt.model.Cluster`) plus a
job list.  For pandas DataFrames in Blox's shape see :func:`pal_opt.io.instance_from_frames`.

Jobs go through the same validation as the instance file's ``jobs`` array, so an in-memory
round is held to the same rules as a file (errors name ``jobs[i].<field>``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import networkx as nx

from .binning import BINNING_MODES
from .errors import InstanceError, OptionError
from .io.instance import jobs_from_list
from .model import Cluster, Job, RoundInstance, RoundParams
from .options import DEFAULT_ROUND_LENGTH

__all__ = ["make_instance"]


def _job_dict(j: Job | Mapping[str, Any], i: int) -> Mapping[str, Any]:
    if isinstance(j, Job):
        d: dict[str, Any] = {"id": j.id, "demand": j.demand, "class": j.perfclass, "locality": list(j.locality)}
        if j.model is not None:
            d["model"] = j.model
        if j.placement is not None:
            d["placement"] = list(j.placement)
        return d
    if isinstance(j, Mapping):
        return j
    raise InstanceError(f"must be a Job or a mapping, got {type(j).__name__}", source="<memory>", path=f"jobs[{i}]")


def make_instance(
    cluster: Cluster | nx.DiGraph,
    jobs: Iterable[Job | Mapping[str, Any]],
    *,
    locality_penalty: float = 1.7,
    binning: str = "pal-artifact",
    restart_cost: float = 0.0,
    round_length: float = DEFAULT_ROUND_LENGTH,
    name: str = "",
) -> RoundInstance:
    """A validated :class:`~pal_opt.model.RoundInstance`.

    Parameters
    ----------
    cluster
        A :class:`~pal_opt.model.Cluster` or a networkx ``DiGraph`` in the shape of
        :meth:`Cluster.from_graph <pal_opt.model.Cluster.from_graph>`.
    jobs
        Queue order.  :class:`~pal_opt.model.Job` objects, or mappings with the instance file's
        job keys: ``id``, ``demand``, ``class`` and/or ``model``, optional ``locality``
        (``[server, rack, cluster]``) and ``placement`` (GPU ids, if running).
    locality_penalty
        PAL's λ, the default penalty for crossing servers.
    binning
        ``"pal-artifact"`` (default), ``"silhouette"`` or ``"none"``.
    restart_cost
        Seconds of work a moved running job loses on each of its GPUs (:mod:`pal_opt.cost.restart`).
    round_length
        Seconds per round, the time the restart cost is a share of (default 360).
    name
        Round name.

    Examples
    --------
    >>> import networkx as nx
    >>> g = nx.DiGraph()
    >>> for s in range(2):
    ...     g.add_edge(("cluster",), ("server", s))
    ...     for k in range(2):
    ...         gid = 2 * s + k
    ...         g.add_node(("gpu", gid), factors={"classA": 1.0 + 0.1 * gid})
    ...         g.add_edge(("server", s), ("gpu", gid))
    >>> inst = make_instance(g, [{"id": "a", "demand": 2, "model": "resnet50"}])
    >>> inst.cluster.num_gpus, inst.jobs[0].perfclass, inst.jobs[0].locality
    (4, 'classA', (1.0, 1.7, 1.7))
    """
    if isinstance(cluster, nx.DiGraph):
        cluster = Cluster.from_graph(cluster, source="<memory>")
    elif not isinstance(cluster, Cluster):
        raise InstanceError(
            f"must be a Cluster or a networkx DiGraph, got {type(cluster).__name__}", source="<memory>", path="cluster"
        )
    if binning not in BINNING_MODES:
        raise OptionError(f"unknown binning mode {binning!r}; choose one of {', '.join(BINNING_MODES)}")
    if not (locality_penalty >= 1.0 and locality_penalty < float("inf")):
        raise OptionError(f"locality penalty must be a finite number >= 1, got {locality_penalty!r}")
    if not (restart_cost >= 0.0 and restart_cost < float("inf")):
        raise OptionError(f"restart cost must be a finite number >= 0, got {restart_cost!r}")
    params = RoundParams.from_arguments(locality_penalty=float(locality_penalty), binning=binning,
                                        restart_cost=float(restart_cost), round_length=round_length)
    docs = [_job_dict(j, i) for i, j in enumerate(jobs)]
    return RoundInstance(cluster, tuple(jobs_from_list(docs, cluster, params)), params, name)
