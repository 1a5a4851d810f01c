"""Build a round in memory: from a networkx graph (or a :class:`~pal_opt.model.Cluster`) plus a
job list.  For pandas DataFrames in Blox's shape see :func:`pal_opt.io.instance_from_frames`.

Jobs go through the same validation as the instance file's ``jobs`` array, so an in-memory
round is held to the same rules as a file (errors name ``jobs[i].<field>``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Unpack

import networkx as nx

from .errors import InstanceError
from .io.instance import jobs_from_list
from .io.instance_write import job_to_dict
from .model import Cluster, Job, RoundArguments, RoundInstance, RoundParams

__all__ = ["make_instance"]


def _job_dict(j: Job | Mapping[str, Any], i: int) -> Mapping[str, Any]:
    if isinstance(j, Job):  # every field, as a file would give it (GPU types, pipeline, priority too)
        return job_to_dict(j)
    if isinstance(j, Mapping):
        return j
    raise InstanceError(f"must be a Job or a mapping, got {type(j).__name__}", source="<memory>", path=f"jobs[{i}]")


def make_instance(
    cluster: Cluster | nx.Graph,
    jobs: Iterable[Job | Mapping[str, Any]],
    *,
    name: str = "",
    **params: Unpack[RoundArguments],
) -> RoundInstance:
    """A validated :class:`~pal_opt.model.RoundInstance`.

    Parameters
    ----------
    cluster
        A :class:`~pal_opt.model.Cluster` or a networkx graph in the shape of
        :meth:`Cluster.from_graph <pal_opt.model.Cluster.from_graph>` (a ``DiGraph``, edges from
        parent to child, or an undirected ``Graph``).
    jobs
        Queue order.  :class:`~pal_opt.model.Job` objects, or mappings with the instance file's
        job keys: ``id``, ``demand``, ``class`` and/or ``model``, optional ``locality``
        (``[server, rack, cluster]``) and ``placement`` (GPU ids, if running).  Tuples, numpy
        arrays and numpy scalars are taken as JSON's lists and numbers
        (:func:`pal_opt.io.instance.plain_json`), so ``{"placement": result.placements[j]}``
        works; a value a file may not hold is an error all the same.
    name
        Round name.
    **params
        The round's parameters (:class:`~pal_opt.model.RoundArguments`): ``locality_penalty``
        (PAL's λ, default 1.7), ``binning`` (default ``"pal-artifact"``), ``restart_cost``
        (seconds of work a moved running job loses per GPU, default 0), ``round_length``
        (seconds, default 360).

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
    if isinstance(cluster, nx.Graph):
        cluster = Cluster.from_graph(cluster, source="<memory>")
    elif not isinstance(cluster, Cluster):
        raise InstanceError(
            f"must be a Cluster or a networkx graph, got {type(cluster).__name__}", source="<memory>", path="cluster"
        )
    rp = RoundParams.from_arguments(**params)
    if isinstance(jobs, (str, bytes, Mapping)) or not isinstance(jobs, Iterable):
        raise InstanceError(f"must be a sequence of jobs (Job objects or mappings) in queue order, got "
                            f"{type(jobs).__name__}", source="<memory>", path="jobs")
    docs = [_job_dict(j, i) for i, j in enumerate(jobs)]
    return RoundInstance(cluster, tuple(jobs_from_list(docs, cluster, rp)), rp, name)
