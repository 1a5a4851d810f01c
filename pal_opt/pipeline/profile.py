"""PipeDream layer profiles (``graph.txt``): reading, validation and the optimiser's preprocessing.

A profile has one line per layer and one tab-indented line per edge::

    node2 -- Conv2d(3, 64) -- forward_compute_time=22.316, backward_compute_time=6.405, activation_size=198246400.0, parameter_size=93184.0
    \tnode1 -- node2

Times are milliseconds per sample, sizes bytes.  ``activation_size`` may be a list ``[a; b; ...]``
(a layer with several outputs), which counts as its sum.  A layer line may end with
`` -- stage_id=N`` (PipeDream writes that into partitioned graphs); it is read and ignored.

:func:`load_profile` reads a file into a :class:`Profile`; anything malformed raises
:class:`~pal_opt.errors.InstanceError` naming the file, the line and what is wrong.
:meth:`Profile.prepared` applies PipeDream's preprocessing (drop ``Input`` sources and
``__getitem__`` sinks) before the cut states are built (:mod:`pal_opt.pipeline.states`).
"""

from __future__ import annotations

import math
import numbers
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from ..errors import InstanceError
from ..io.textfile import read_text, refuse_markup, with_cut_hint
from ..options import file_path, require_items, require_text

__all__ = ["Layer", "Profile", "load_profile", "parse_profile", "MAX_PROFILE_BYTES", "MAX_LAYERS"]

#: Largest profile file read (PipeDream's largest published profile is about 200 kB).
MAX_PROFILE_BYTES: int = 16 * 1024 * 1024
#: Most layers a profile may have.
MAX_LAYERS: int = 20_000

_FIELDS = ("forward_compute_time", "backward_compute_time", "activation_size", "parameter_size")
_SEP = " -- "


class Layer(NamedTuple):
    """One layer (node) of a profile (an immutable record).

    Attributes
    ----------
    id
        The node's name in the file (``node12``).
    description
        What the layer is (``Conv2d(...)``, ``Input``, ``__getitem__(0)``...).
    forward_ms, backward_ms
        Forward and backward compute time per sample, in milliseconds.
    activation_bytes
        Size of the layer's output activations (a list in the file is summed).
    parameter_bytes
        Size of the layer's parameters.
    line
        1-based line of the file that declared it (0 for layers built in memory).
    """

    id: str
    description: str
    forward_ms: float
    backward_ms: float
    activation_bytes: float
    parameter_bytes: float
    line: int = 0

    @property
    def compute_seconds(self) -> float:
        """Forward plus backward time in seconds, as PipeDream's optimiser counts it."""
        return (self.forward_ms + self.backward_ms) / 1000.0



def _find_cycle(nodes: set[int], predecessors: Sequence[Sequence[int]]) -> list[int]:
    """One cycle of the graph on ``nodes`` (its nodes in edge order, from its first node in
    file order), or [] if it has none: :mod:`graphlib` finds it (imported here, on the error path
    only)."""
    import graphlib

    try:
        graphlib.TopologicalSorter({v: [u for u in predecessors[v] if u in nodes] for v in sorted(nodes)}).prepare()
    except graphlib.CycleError as exc:
        cycle = list(exc.args[1][:-1])  # each node a predecessor of the next; the first repeated last
        first = cycle.index(min(cycle))
        return cycle[first:] + cycle[:first]
    return []


class Profile:
    """A layer graph: layers in file order and directed edges between them.

    Immutable.  The adjacency lists and a topological order are computed once, when the profile
    is made, which also rejects a graph with a cycle.  (A plain class with slots rather than a
    frozen dataclass, and :class:`Layer` a named tuple: importing :mod:`dataclasses` and building
    the classes costs about a fifth of a small ``pal-opt partition`` run.)

    Parameters
    ----------
    layers
        The layers, in the order the file declares them.
    edges
        ``(u, v)`` pairs of indices into ``layers``, one per edge line (``u`` feeds ``v``).
    source
        The file the profile came from (``"<memory>"`` otherwise).
    edge_lines
        The file line of each edge (empty when built in memory), for error messages.

    Attributes
    ----------
    successors, predecessors
        Per layer, the layers it feeds / that feed it, in edge order, without repeats.
    topological_order
        Layer indices in a topological order (Kahn's algorithm, ties by file order): the linear
        chain in which the partitioner's stages are reported; for a chain-shaped model, the chain.

    Raises
    ------
    InstanceError
        The graph has a cycle (the message names one of its edges, by file line when known).
    """

    __slots__ = ("layers", "edges", "source", "edge_lines", "successors", "predecessors", "topological_order")
    layers: tuple[Layer, ...]
    edges: tuple[tuple[int, int], ...]
    source: str
    edge_lines: tuple[int, ...]
    successors: tuple[tuple[int, ...], ...]
    predecessors: tuple[tuple[int, ...], ...]
    topological_order: tuple[int, ...]

    def __init__(self, layers: Sequence[Layer], edges: Sequence[tuple[int, int]], source: str = "<memory>",
                 edge_lines: Sequence[int] = ()):
        init = object.__setattr__
        init(self, "layers", require_items(layers, "layers", "a list of Layers", of=Layer))
        init(self, "edges", _edges(edges, len(self.layers)))
        init(self, "source", require_text(source, "source"))
        init(self, "edge_lines", require_items(edge_lines, "edge_lines", "a list of line numbers", of=numbers.Integral))
        init(self, "successors", _adjacency(len(self.layers), self.edges, forward=True))
        init(self, "predecessors", _adjacency(len(self.layers), self.edges, forward=False))
        init(self, "topological_order", self._topological())

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Profile is immutable; cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Profile is immutable; cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Profile):
            return NotImplemented
        return (self.layers, self.edges, self.source) == (other.layers, other.edges, other.source)

    def __hash__(self) -> int:
        return hash((self.layers, self.edges, self.source))

    def __repr__(self) -> str:
        return f"Profile({len(self.layers)} layers, {len(self.edges)} edges, source={self.source!r})"

    def _topological(self) -> tuple[int, ...]:
        import heapq

        indegree = [len(p) for p in self.predecessors]
        ready = [v for v, d in enumerate(indegree) if d == 0]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            u = heapq.heappop(ready)
            order.append(u)
            for v in self.successors[u]:
                indegree[v] -= 1
                if indegree[v] == 0:
                    heapq.heappush(ready, v)
        if len(order) < len(self.layers):
            self._raise_cycle(set(range(len(self.layers))) - set(order))
        return tuple(order)

    def _raise_cycle(self, stuck: set[int]) -> None:
        """Name a cycle among the layers the topological order could not reach, by its edge that
        comes last in the file (the one that closed it; any edge of it was named before, and
        nodes downstream of a cycle are stuck too without being on it)."""
        edge_of = {(u, v): e for e, (u, v) in enumerate(self.edges)}
        cycle = _find_cycle(stuck, self.predecessors)
        if not cycle:  # pragma: no cover - a stuck set always holds a cycle
            raise InstanceError("the layer graph has a cycle", source=self.source)
        pairs = list(zip(cycle, cycle[1:] + cycle[:1], strict=True))
        e = max((edge_of[p] for p in pairs), key=lambda k: (self.edge_lines[k] if k < len(self.edge_lines) else 0, k))
        u, v = self.edges[e]
        line = self.edge_lines[e] if e < len(self.edge_lines) else 0
        names = " -> ".join(self.layers[k].id for k in [*cycle, cycle[0]])
        raise InstanceError(f"the layer graph has a cycle, {names}, closed by edge {self.layers[u].id} -> "
                            f"{self.layers[v].id}", source=self.source, path=f"line {line}" if line else f"edges[{e}]")

    def prepared(self) -> Profile:
        """The graph PipeDream's optimiser partitions.

        Sources whose description starts with ``Input`` are removed (the input always goes
        with the first stage and costs nothing); then sinks whose description starts with
        ``__getitem__`` are removed (unused outputs).  Each rule is applied once, to the graph
        as it stands, as PipeDream does.  Layer and edge order are kept.
        """
        drop = {v for v, layer in enumerate(self.layers)
                if not self.predecessors[v] and layer.description.startswith("Input")}
        out_degree = [sum(1 for w in s if w not in drop) for s in self.successors]
        drop |= {v for v, layer in enumerate(self.layers)
                 if v not in drop and out_degree[v] == 0 and layer.description.startswith("__getitem__")}
        if not drop:
            return self
        keep = [v for v in range(len(self.layers)) if v not in drop]
        new_index = {v: i for i, v in enumerate(keep)}
        kept_edges = [(e, u, v) for e, (u, v) in enumerate(self.edges) if u in new_index and v in new_index]
        return Profile(
            layers=tuple(self.layers[v] for v in keep),
            edges=tuple((new_index[u], new_index[v]) for _, u, v in kept_edges),
            source=self.source,
            edge_lines=tuple(self.edge_lines[e] for e, _, _ in kept_edges) if self.edge_lines else (),
        )


def _edges(edges: Any, n: int) -> tuple[tuple[int, int], ...]:
    """``edges`` checked: pairs of positions of the ``n`` layers (an :class:`InputTypeError` or
    :class:`InstanceError` naming ``edges``, not an ``IndexError`` deep inside)."""
    pairs = require_items(edges, "edges", "a list of (from, to) layer positions")
    for k, e in enumerate(pairs):
        ok = isinstance(e, tuple | list) and len(e) == 2 and all(isinstance(x, numbers.Integral) and 0 <= int(x) < n for x in e)
        if not ok:
            raise InstanceError(f"must be a pair of layer positions 0..{n - 1}, got {e!r:.60}", path=f"edges[{k}]")
    return tuple((int(u), int(v)) for u, v in pairs)


def _adjacency(n: int, edges: Iterable[tuple[int, int]], *, forward: bool) -> tuple[tuple[int, ...], ...]:
    lists: list[list[int]] = [[] for _ in range(n)]
    seen: set[tuple[int, int]] = set()
    for u, v in edges:
        if (u, v) in seen:
            continue
        seen.add((u, v))
        if forward:
            lists[u].append(v)
        else:
            lists[v].append(u)
    return tuple(tuple(x) for x in lists)


# --------------------------------------------------------------------------- reading
def load_profile(path: str | os.PathLike[str]) -> Profile:
    """Read a PipeDream ``graph.txt`` file.

    Parameters
    ----------
    path
        The profile.

    Returns
    -------
    Profile
        The layers and edges as the file gives them (no preprocessing; see
        :meth:`Profile.prepared`).

    Raises
    ------
    InstanceError
        The file is empty, too large, binary, not UTF-8, or a line is malformed (the message
        names the file, the line and what is wrong), or the graph has a cycle.
    MissingFileError
        The file is missing (an :class:`InstanceError` and a ``FileNotFoundError``).
    OSError
        The file is unreadable.
    """
    src = file_path(path)
    text = read_text(src, max_bytes=MAX_PROFILE_BYTES, what="profile")
    refuse_markup(text, src, "a PipeDream profile (graph.txt)")
    try:
        return parse_profile(text, source=src)
    except InstanceError as exc:  # the last line malformed where the file was cut in it: said so
        raise with_cut_hint(exc, text) from None


def parse_profile(text: str, *, source: str = "<memory>") -> Profile:
    """Parse the text of a ``graph.txt`` profile (see :func:`load_profile`).

    Examples
    --------
    >>> p = parse_profile(
    ...     "node1 -- Input -- forward_compute_time=0.0, backward_compute_time=0.0, activation_size=8.0, parameter_size=0.0\\n"
    ...     "node2 -- Linear -- forward_compute_time=1.5, backward_compute_time=2.5, activation_size=[4.0; 4.0], parameter_size=64.0\\n"
    ...     "\\tnode1 -- node2\\n")
    >>> [layer.id for layer in p.layers], p.edges, p.layers[1].activation_bytes, p.layers[1].compute_seconds
    (['node1', 'node2'], ((0, 1),), 8.0, 0.004)
    """
    layers: list[Layer] = []
    index: dict[str, int] = {}
    pending: list[tuple[int, str, str]] = []
    require_text(source, "source")
    for number, raw in enumerate(require_text(text).split("\n"), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        if line.startswith("\t"):
            pending.append((number, *_edge_tokens(line, number, source)))
            continue
        if line[0].isspace() and all(t.strip() in index for t in line.strip().split(_SEP)) \
                and len(line.strip().split(_SEP)) == 2:  # two declared layers: an edge, mis-indented
            lead = line[: len(line) - len(line.lstrip())]
            shown = f"{len(lead)} space{'s' * (len(lead) > 1)}" if set(lead) == {" "} else repr(lead)
            raise InstanceError(f"an edge line starts with a tab; this one starts with {shown}: "
                                f"{_clip(line.strip())!r}", source=source, path=f"line {number}")
        layer = _parse_layer(line, number, source)
        if layer.id in index:
            raise InstanceError(f"layer {layer.id!r} declared twice (first on line {layers[index[layer.id]].line})",
                                source=source, path=f"line {number}")
        if len(layers) >= MAX_LAYERS:
            raise InstanceError(f"more than {MAX_LAYERS:,} layers", source=source, path=f"line {number}")
        index[layer.id] = len(layers)
        layers.append(layer)
    if not layers:
        raise InstanceError("profile has no layer lines", source=source)
    edges: list[tuple[int, int]] = []
    for number, u, v in pending:
        for name in (u, v):
            if name not in index:
                raise InstanceError(f"edge names layer {name!r}, which is not declared", source=source,
                                    path=f"line {number}")
        if u == v:
            raise InstanceError(f"edge from layer {u!r} to itself", source=source, path=f"line {number}")
        edges.append((index[u], index[v]))
    return Profile(layers, edges, source, [n for n, _, _ in pending])  # rejects a cycle, naming the file


def _edge_tokens(line: str, number: int, source: str) -> tuple[str, str]:
    parts = line.strip().split(_SEP)
    if len(parts) != 2 or not all(p.strip() and not any(c.isspace() for c in p.strip()) for p in parts):
        raise InstanceError(f"malformed edge line, expected '<tab>nodeU -- nodeV', got {line.strip()!r}",
                            source=source, path=f"line {number}")
    return parts[0].strip(), parts[1].strip()


def _parse_layer(line: str, number: int, source: str) -> Layer:
    where = f"line {number}"
    tokens = line.strip().split(_SEP)
    if len(tokens) == 4 and tokens[3].startswith("stage_id="):
        tokens = tokens[:3]
    if len(tokens) != 3:
        raise InstanceError(
            "malformed layer line, expected 'nodeN -- description -- forward_compute_time=F, "
            f"backward_compute_time=B, activation_size=A, parameter_size=P', got {_clip(line)!r}",
            source=source, path=where)
    node_id, description, metadata = (t.strip() for t in tokens)
    if not node_id or any(c.isspace() for c in node_id):
        raise InstanceError(f"malformed layer name {node_id!r}", source=source, path=where)
    values = _parse_metadata(metadata, source, where)
    if not math.isfinite(values[0] + values[1]):
        raise InstanceError("forward_compute_time + backward_compute_time overflows (not a finite number)",
                            source=source, path=where)
    return Layer(node_id, description, *values, line=number)


#: A ``[...]`` list with a comma in it (PipeDream separates a list's values by ``;``).
_COMMA_LIST = re.compile(r"\[[^\]]*,[^\]]*\]")


def _parse_metadata(metadata: str, source: str, where: str) -> tuple[float, float, float, float]:
    found: dict[str, float] = {}
    listed = _COMMA_LIST.search(metadata)
    if listed:
        raise InstanceError(f"a list's values are separated by ';', not ',': {_clip(listed.group(0))!r}",
                            source=source, path=where)
    for item in metadata.split(","):
        key, sep, value = item.strip().partition("=")
        key = key.strip()
        if not item.strip():
            raise InstanceError("an empty field (a comma too many)", source=source, path=where)
        if not sep or key not in _FIELDS:
            raise InstanceError(f"unexpected field {item.strip()!r}; the fields are {', '.join(_FIELDS)}",
                                source=source, path=where)
        if key in found:
            raise InstanceError(f"field {key} given twice", source=source, path=where)
        found[key] = _parse_size(value.strip(), key, source, where)
    missing = [f for f in _FIELDS if f not in found]
    if missing:
        raise InstanceError(f"missing field {missing[0]}", source=source, path=where)
    return found[_FIELDS[0]], found[_FIELDS[1]], found[_FIELDS[2]], found[_FIELDS[3]]


def _parse_size(text: str, key: str, source: str, where: str) -> float:
    if key == "activation_size" and text.startswith("["):
        if not text.endswith("]"):
            raise InstanceError(f"{key}: unclosed list {_clip(text)!r}", source=source, path=where)
        inner = text[1:-1].strip()
        if not inner:
            raise InstanceError(f"{key}: empty list", source=source, path=where)
        total = sum(_parse_number(t.strip(), key, source, where) for t in inner.split(";"))
        if not math.isfinite(total):
            raise InstanceError(f"{key}: the list's sum overflows (not a finite number)", source=source, path=where)
        return total
    return _parse_number(text, key, source, where)


def _parse_number(text: str, key: str, source: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InstanceError(f"{key}: not a number: {_clip(text)!r}", source=source, path=where) from None
    if not math.isfinite(value) or value < 0:
        raise InstanceError(f"{key}: must be a finite number >= 0, got {_clip(text)}", source=source, path=where)
    return value


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
