"""Cut states of a layer graph: PipeDream's antichain DAG, with prefix sums per state.

A *state* is a place where the model can be cut: an antichain of the layer DAG (no member is an
ancestor of another).  Everything up to and including a state's antichain -- its *down-set*
``pred*(s)`` -- runs before the cut.  The states are those reached from the antichain holding
the first source by PipeDream's step rule (:func:`build_states`), joined by an edge from each
state to each state one step later.  A pipeline stage is the difference of two down-sets: the
layers after state ``p`` up to state ``j``, where ``p`` is an ancestor of ``j`` in that DAG.

Sets are Python ints used as bitsets (bit ``v`` = layer ``v``, or state ``s``), which keeps the
construction linear-ish and free of heavy imports.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from ..errors import InstanceError
from ..options import check_count, require_type
from .profile import Profile

__all__ = ["StateGraph", "build_states", "straight_problem", "MAX_STATES", "bits"]

#: Most cut states accepted.  The partitioner's tables grow with the square of the count and its
#: inner levels with the cube; PipeDream's published profiles have at most 240 (resnet50).
MAX_STATES: int = 2000


def bits(mask: int) -> list[int]:
    """The positions of the set bits of ``mask``, lowest first.

    >>> bits(0b10110)
    [1, 2, 4]
    """
    text = bin(mask)[:1:-1]  # bit 0 first; one pass, where clearing bits one by one copied the
    out: list[int] = []     # whole int per bit (quadratic on the dense masks of deep models)
    at = text.find("1")
    while at >= 0:
        out.append(at)
        at = text.find("1", at + 1)
    return out


class StateGraph(NamedTuple):
    """The cut states of a prepared profile, numbered in a topological order (immutable).

    Attributes
    ----------
    profile
        The prepared profile (:meth:`Profile.prepared`) whose layers the bitsets index.
    antichains
        Per state, the layers of its antichain (indices into ``profile.layers``, ascending).
    downsets
        Per state, the bitset of its down-set ``pred*(s)``.
    ancestors
        Per state, the bitset of the states that are its ancestors in the state DAG (strict).
    cum_time, cum_parameter, cum_activation
        Per state, the sum over its down-set of compute time (seconds), parameter bytes and
        activation bytes.  The last state's sums are the whole model's.
    """

    profile: Profile
    antichains: tuple[tuple[int, ...], ...]
    downsets: tuple[int, ...]
    ancestors: tuple[int, ...]
    cum_time: tuple[float, ...]
    cum_parameter: tuple[float, ...]
    cum_activation: tuple[float, ...]

    @property
    def n(self) -> int:
        """Number of states."""
        return len(self.antichains)

    def is_ancestor(self, p: int, j: int) -> bool:
        """Whether state ``p`` is a (strict) ancestor of state ``j``."""
        return bool(self.ancestors[j] >> p & 1)

    def max_stages(self) -> int:
        """The most stages any pipeline of the model can have: the longest chain of states, each an
        ancestor of the next, that ends at the last state (a straight pipeline needs one stage per
        worker, so it needs at least that many workers' worth of states in a chain).

        >>> from pal_opt.pipeline.profile import parse_profile
        >>> line = "{} -- L -- forward_compute_time=1, backward_compute_time=0, activation_size=1, parameter_size=0"
        >>> diamond = "\\n".join([*(line.format(x) for x in "abcd"), "\\ta -- b", "\\ta -- c", "\\tb -- d", "\\tc -- d"])
        >>> states = build_states(parse_profile(diamond))
        >>> states.n, states.max_stages()
        (5, 4)
        """
        length = [1] * self.n
        for j in range(self.n):  # states are numbered topologically: ancestors come first
            before = bits(self.ancestors[j])
            if before:
                length[j] = 1 + max(length[p] for p in before)
        return length[-1]

    def segment_layers(self, start: int, end: int) -> list[int]:
        """Layers of the stage between cut ``start`` and cut ``end`` (``0 <= start < end <= n``).

        Cut ``c`` lies just after state ``c - 1`` (cut 0 is the model's input), so the stage
        holds the down-set of state ``end - 1`` minus that of state ``start - 1``.
        """
        before = self.downsets[start - 1] if start > 0 else 0
        return bits(self.downsets[end - 1] & ~before)


def build_states(profile: Profile, *, max_states: int = MAX_STATES) -> StateGraph:
    """The cut states of ``profile`` after PipeDream's preprocessing.

    The rule, from the antichain ``{first source}`` (the first layer in file order without
    inputs): for each member ``u`` of the current antichain's *augmented* set and each successor
    ``v`` of ``u`` outside the antichain, if no descendant of ``v`` is in the augmented set,
    replace ``u`` by ``v`` and keep the maximal members.  The augmented set adds, per antichain
    member ``a``, every ancestor of ``a`` with an edge to a layer that is neither ``a`` nor an
    ancestor of ``a``.  States are found breadth first and numbered by a depth-first topological
    sort of the state DAG (ties in discovery order), so the last state is the whole model when the
    DAG has one sink.

    Raises
    ------
    InstanceError
        No layer is left after preprocessing, a layer is in no cut state (a part of the graph
        not connected to the first source), the model's total time or size overflows, or more
        than ``max_states`` states.
    """
    require_type(profile, Profile, "profile", " (pal_opt.pipeline.load_profile)")
    check_count(max_states, "max_states")
    prepared = profile.prepared()
    if not prepared.layers:
        raise InstanceError("no layers are left once Input sources and __getitem__ sinks are removed",
                            source=profile.source)
    layer_anc, layer_desc = _closures(prepared)
    extra = _augmenting_ancestors(prepared, layer_anc)
    first = next(v for v, p in enumerate(prepared.predecessors) if not p)
    masks, children = _explore(prepared, 1 << first, layer_anc, layer_desc, extra, max_states)
    order = _topological(children)
    renumber = {old: new for new, old in enumerate(order)}
    ancestors = [0] * len(order)
    for old in order:  # parents come first, so their ancestor sets are complete
        s = renumber[old]
        for child in children[old]:
            c = renumber[child]
            ancestors[c] |= ancestors[s] | (1 << s)
    antichains = tuple(tuple(bits(masks[old])) for old in order)
    downsets = tuple(_downset(a, layer_anc) for a in antichains)
    secs = [layer.compute_seconds for layer in prepared.layers]
    par = [layer.parameter_bytes for layer in prepared.layers]
    act = [layer.activation_bytes for layer in prepared.layers]
    members = [bits(d) for d in downsets]
    covered = _union(downsets)
    if downsets[-1] != covered:  # pragma: no cover - the step rule always ends in one state
        raise InstanceError("the cut states do not end in one state that holds the whole model",
                            source=profile.source)
    if covered != (1 << len(prepared.layers)) - 1:
        _raise_disconnected(prepared, covered, first)
    graph = StateGraph(
        profile=prepared,
        antichains=antichains,
        downsets=downsets,
        ancestors=tuple(ancestors),
        cum_time=tuple(sum(secs[v] for v in m) for m in members),
        cum_parameter=tuple(sum(par[v] for v in m) for m in members),
        cum_activation=tuple(sum(act[v] for v in m) for m in members),
    )
    for what, totals in (("forward_compute_time + backward_compute_time", graph.cum_time),
                         ("parameter_size", graph.cum_parameter), ("activation_size", graph.cum_activation)):
        if not math.isfinite(totals[-1]):
            raise InstanceError(f"{what}: the layers' total overflows (not a finite number); the values are too large",
                                source=profile.source)
    return graph


def _raise_disconnected(profile: Profile, covered: int, first: int) -> None:
    """Reject layers that no cut state holds: a part of the graph not connected to the first source."""
    lost = [v for v in range(len(profile.layers)) if not covered >> v & 1]
    layer = profile.layers[lost[0]]
    raise InstanceError(
        f"layer {layer.id} is not connected to the first source {profile.layers[first].id} "
        f"({len(lost)} layer{'s' * (len(lost) != 1)} unconnected in all): the partitioner cuts one connected model; "
        "partition each part separately", source=profile.source, path=f"line {layer.line}" if layer.line else None)


def straight_problem(states: StateGraph, workers: int) -> str | None:
    """Why no straight pipeline of ``states`` runs on ``workers`` workers (one stage each), or None
    when one does.  At several levels every inner segment can be cut from a long enough chain, so
    the total worker count is what matters."""
    most = states.max_stages()
    if workers <= most:
        return None
    return (f"a straight pipeline on {workers} workers needs {workers} stages, but the model can be cut into at "
            f"most {most} (its longest chain of cut states; {states.n} states in all): use at most {most} workers "
            "or replicate stages (no --straight)")


def _closures(profile: Profile) -> tuple[list[int], list[int]]:
    """Per layer, the bitsets of its strict ancestors and strict descendants."""
    order = profile.topological_order
    anc = [0] * len(profile.layers)
    for v in order:
        for u in profile.predecessors[v]:
            anc[v] |= anc[u] | (1 << u)
    desc = [0] * len(profile.layers)
    for v in reversed(order):
        for w in profile.successors[v]:
            desc[v] |= desc[w] | (1 << w)
    return anc, desc


def _augmenting_ancestors(profile: Profile, anc: list[int]) -> Callable[[int], int]:
    """Per layer ``a``: its ancestors with an edge to a layer that is neither ``a`` nor an ancestor of
    ``a`` (a bitset), found on first use and kept.

    Only the members of the antichains the search reaches are asked for, so this work stops with
    the search at ``max_states``: found up front for every layer, the sets took seconds on a
    3,000-layer chain and more than a minute on 20,000 layers before the state limit refused the
    chain.  Only an ancestor with two or more successors can qualify (the one successor of an
    ancestor of ``a`` is ``a`` or an ancestor of ``a``), so a chain's sets cost nothing.
    """
    succ_mask = {u: sum(1 << v for v in out) for u, out in enumerate(profile.successors) if len(out) > 1}
    branching = sum(1 << u for u in succ_mask)

    @functools.cache
    def extra(a: int) -> int:
        inside = anc[a] | (1 << a)
        return sum(1 << p for p in bits(anc[a] & branching) if succ_mask[p] & ~inside)

    return extra


def _explore(profile: Profile, start: int, anc: list[int], desc: list[int], extra: Callable[[int], int],
             max_states: int) -> tuple[list[int], list[list[int]]]:
    """Breadth-first search of the antichain DAG: the antichains (bitsets) in discovery order
    and, per antichain, its next antichains (discovery ids, first-found order, no repeats).

    The next antichain is the maximal members of the augmented set with ``u`` replaced by ``v``.
    When ``u`` is an added ancestor (not in the antichain), the antichain's members stay the
    maximal ones, so the next antichain is ``v`` and the members that are not its ancestors: found
    without going through the augmented set, which holds every ancestor of the antichain in a
    model whose layers all also feed one late layer (a member-by-member check there took 15 s at
    500 layers, and longer than anyone waits for more than 2,000 states to be refused).
    """
    ids = {start: 0}
    masks = [start]
    children: list[list[int]] = [[]]
    queue = deque([start])
    while queue:
        antichain = queue.popleft()
        s = ids[antichain]
        augmented = antichain
        for a in bits(antichain):
            augmented |= extra(a)
        below: set[int] = set()  # the v stepped to from an added ancestor: the next antichain is the same
        for u in bits(augmented):
            member = antichain >> u & 1
            for v in profile.successors[u]:
                if not member:
                    if v in below:
                        continue
                    below.add(v)
                if antichain >> v & 1 or desc[v] & augmented:
                    continue
                if member:
                    candidate = (augmented & ~(1 << u)) | (1 << v)
                    nxt = sum(1 << x for x in bits(candidate) if not desc[x] & candidate)
                else:
                    nxt = (antichain & ~anc[v]) | (1 << v)
                t = ids.get(nxt)
                if t is None:
                    if len(masks) >= max_states:
                        raise InstanceError(f"the layer graph has more than {max_states:,} cut states "
                                            "(antichains); the partitioner's tables would be too large",
                                            source=profile.source)
                    t = ids[nxt] = len(masks)
                    masks.append(nxt)
                    children.append([])
                    queue.append(nxt)
                if t not in children[s]:
                    children[s].append(t)
    return masks, children


def _topological(children: list[list[int]]) -> list[int]:
    """Depth-first topological order: roots in id order, children in list order, each node
    placed before everything it reaches (reverse post-order)."""
    seen = [False] * len(children)
    post: list[int] = []
    for root in range(len(children)):
        if seen[root]:
            continue
        seen[root] = True
        stack = [(root, iter(children[root]))]
        while stack:
            node, it = stack[-1]
            for child in it:
                if not seen[child]:
                    seen[child] = True
                    stack.append((child, iter(children[child])))
                    break
            else:
                stack.pop()
                post.append(node)
    post.reverse()
    return post


def _downset(antichain: tuple[int, ...], anc: list[int]) -> int:
    mask = 0
    for a in antichain:
        mask |= anc[a] | (1 << a)
    return mask


def _union(masks: tuple[int, ...]) -> int:
    out = 0
    for m in masks:
        out |= m
    return out
