"""Sia's placer: the round program's (GPU type, count) per job made into node ids.

The artifact's ``alloc_to_placement_fast`` (its "smart" placer is switched off), per GPU type,
from an empty type every round (placements are not sticky; SIA_MODEL.md C,
``formulations/sia_round.md`` §5):

1. jobs are taken by GPU count, largest first (stable: ties keep the order given, which the
   caller makes rigid jobs first, then the others, each in workload order);
2. one node pointer ``q`` starts at node 0 and is carried from job to job (wrapping around);
3. a job of ``n`` GPUs first looks for ``⌊n / g⌋`` completely free nodes: it visits up to ``N``
   nodes from ``q``, takes each completely free one whole, and ``q`` advances by one per
   visited node;
4. the GPUs still missing are taken from the nodes in circular order from ``q``: on each node
   with free GPUs it takes as many as it can, and ``q`` advances past every visited node.

A job's placement is its node-id list (one id per GPU, in the order taken); its *shape* is the
per-node counts of consecutive equal ids, e.g. ``(4,)``, ``(2, 2)``, ``(8, 8)``.  A shape on more
nodes than the type's profiled maximum is rewritten as ``⌈n / max⌉`` GPUs per node
(:func:`fit_shape`).  Because the round program limits totals only, a small job may be split
over nodes when free GPUs are fragmented.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import OptionError
from ..options import check_count, require_items

__all__ = ["place_type", "placement_shape", "fit_shape"]


def _take_whole_nodes(free: list[int], start: int, count: int, per_node: int) -> tuple[list[int], int]:
    """Up to ``count`` completely free nodes visited from ``start``: (GPU node ids, pointer)."""
    taken: list[int] = []
    node = start
    visited = 0
    num_nodes = len(free)
    while visited < num_nodes and count > 0:
        if free[node] == per_node:
            free[node] = 0
            taken.extend([node] * per_node)
            count -= 1
        node = (node + 1) % num_nodes
        visited += 1
    return taken, node


def _take_any(free: list[int], start: int, need: int) -> tuple[list[int], int]:
    """``need`` GPUs from the nodes in circular order from ``start``: (node ids, pointer)."""
    taken: list[int] = []
    node = start
    num_nodes = len(free)
    if need > sum(free):  # place_type checks the totals; never loop for ever on GPUs that are not there
        raise OptionError(f"{need} GPUs asked of nodes with {sum(free)} free")
    while need > 0:
        if free[node]:
            k = min(need, free[node])
            free[node] -= k
            need -= k
            taken.extend([node] * k)
        node = (node + 1) % num_nodes
    return taken, node


def place_type(num_nodes: int, gpus_per_node: int, demands: Sequence[int],
               free: Sequence[int] | None = None) -> list[list[int]]:
    """Node ids (one per GPU) for each demand on one empty GPU type, in the order of ``demands``.

    Parameters
    ----------
    num_nodes, gpus_per_node
        The type.
    demands
        GPUs per job, in the tie-breaking order (largest are placed first, stably).
    free
        GPUs in service per node (default: every GPU).  A node with a GPU out of service is
        never taken whole; its other GPUs are taken as any node's.

    Raises
    ------
    OptionError
        The demands exceed the type's GPUs, or a demand is negative.

    Examples
    --------
    >>> place_type(3, 4, [2, 8, 1])        # 8 GPUs take nodes 0 and 1 whole, then 2 and 1 share node 2
    [[2, 2], [0, 0, 0, 0, 1, 1, 1, 1], [2]]
    >>> place_type(2, 4, [3, 3, 2])        # fragmented: the last job is split over both nodes
    [[0, 0, 0], [1, 1, 1], [0, 1]]
    >>> place_type(2, 4, [4, 2], free=[3, 4])  # node 0 has a GPU out of service
    [[1, 1, 1, 1], [0, 0]]
    """
    check_count(num_nodes, "num_nodes")
    check_count(gpus_per_node, "gpus_per_node")
    demands = [check_count(d, f"demands[{i}]", 0) for i, d in enumerate(
        require_items(demands, "demands", "a list of GPU counts"))]
    if free is not None:
        free = [check_count(f, f"free[{i}]", 0) for i, f in enumerate(
            require_items(free, "free", "a list of GPUs in service per node"))]
    return place_type_unchecked(num_nodes, gpus_per_node, demands, free)


def place_type_unchecked(num_nodes: int, gpus_per_node: int, demands: Sequence[int],
                         free: Sequence[int] | None = None) -> list[list[int]]:
    """:func:`place_type` without the checks of the type's size and the demands' types, for the
    Sia policy, whose demands are its own GPU counts (not in ``__all__``; the check of ``free``
    and of the total stays)."""
    free = [gpus_per_node] * num_nodes if free is None else [int(f) for f in free]
    if len(free) != num_nodes or any(not 0 <= f <= gpus_per_node for f in free):
        raise OptionError(f"free must give 0..{gpus_per_node} GPUs for each of {num_nodes} nodes, got {free}")
    if sum(demands) > sum(free):
        raise OptionError(f"{sum(demands)} GPUs demanded of a type with {sum(free)} in service")
    out: list[list[int]] = [[] for _ in demands]
    pointer = 0
    for i in sorted(range(len(demands)), key=lambda i: -demands[i]):
        n = demands[i]
        if n == 0:
            continue
        whole, pointer = _take_whole_nodes(free, pointer, n // gpus_per_node, gpus_per_node)
        rest, pointer = _take_any(free, pointer, n - len(whole))
        out[i] = whole + rest
    return out


def placement_shape(node_ids: Sequence[int]) -> tuple[int, ...]:
    """GPUs per node as runs of consecutive equal node ids.

    >>> placement_shape([3, 3, 0, 0, 0]), placement_shape([])
    ((2, 3), ())
    """
    return placement_shape_unchecked(require_items(node_ids, "node_ids", "a list of node ids"))


def placement_shape_unchecked(node_ids: Sequence[int]) -> tuple[int, ...]:
    """:func:`placement_shape` without the check of ``node_ids`` (not in ``__all__``)."""
    shape: list[int] = []
    for i, node in enumerate(node_ids):
        if i == 0 or node != node_ids[i - 1]:
            shape.append(1)
        else:
            shape[-1] += 1
    return tuple(shape)


def fit_shape(shape: tuple[int, ...], max_nodes: int) -> tuple[int, ...]:
    """A shape on more than ``max_nodes`` nodes rewritten as ``⌈n / max_nodes⌉`` GPUs per node
    (the last node holds the rest); other shapes unchanged.

    >>> fit_shape((1, 1, 1, 1, 1), 2), fit_shape((4, 4), 2)
    ((3, 2), (4, 4))
    """
    shape = require_items(shape, "shape", "a tuple of GPUs per node")
    check_count(max_nodes, "max_nodes")
    return fit_shape_unchecked(shape, max_nodes)


def fit_shape_unchecked(shape: Sequence[int], max_nodes: int) -> tuple[int, ...]:
    """:func:`fit_shape` without the checks of its arguments, for the simulator's own shapes (not
    in ``__all__``)."""
    if len(shape) <= max_nodes:
        return tuple(shape)
    total = sum(shape)
    per = -(-total // max_nodes)
    out = []
    while total > 0:
        out.append(min(per, total))
        total -= out[-1]
    return tuple(out)
