"""Slurm GPUs per node and their types: ``slurm.conf`` ``Gres=`` and ``gres.conf``.

A node's GPUs are a count per GPU type (:class:`NodeGpus`; the type ``None`` when the file names
none), each remembered with the line that gave it (:class:`Origin`), so that an error or warning
can name the file and line.

``slurm.conf``
    ``NodeName=... Gres=gpu:N`` lines; ``gpu:TYPE:N``, several entries (``gpu:a100:4,gpu:v100:4``),
    ``(S:0-1)`` bindings and ``no_consume`` allowed; ``gpu`` alone is one GPU, ``gpu:TYPE`` one of
    that type.  A ``NodeName=DEFAULT`` line sets the GRES of the lines after it.
``gres.conf``
    ``Name=gpu`` lines (other names are not GPUs and are skipped): ``Type=`` the type; the count is
    ``Count=`` (K, M, G, T, P suffixes), else the number of device files in ``File=`` (a hostlist
    expression: ``/dev/nvidia[0-7]`` is eight, ``/dev/nvidia0,/dev/nvidia1`` two), else one (a
    ``MultipleFiles=`` line is one GPU with several device files).  A line with ``NodeName=`` (a
    hostlist) applies to those nodes, a line without to every node, as each node's ``slurmd``
    reads it; several lines for a node add up per type.  A device file given twice for one node, a
    ``Count`` that differs from the number of ``File`` devices, ``File`` with ``MultipleFiles`` and
    a line that is neither a GRES nor an ``AutoDetect`` line are errors.  ``AutoDetect=`` (``nvml``,
    ``nvidia``, ``rsmi``, ``oneapi``, ``nrt``; ``off``), on a line alone for every node or on a
    ``NodeName`` line for those nodes, means ``slurmd`` finds the GPUs on the node at run time,
    which a file cannot say: such a node's count must come from a ``Name=gpu`` line or from
    elsewhere (:func:`resolve_gpus`), else it is an error naming the ``AutoDetect`` line.

Device numbers: a GPU given by an NVIDIA device file, ``/dev/nvidiaN``, has the device number
``N`` (:func:`node_devices`); the exports name a node's GPUs by them when every GPU node's GPUs
are given so.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, NoReturn

from ..errors import InstanceError, counted
from .slurmconf import ConfigLine, expand_field, key_values, line_ref, parse_count

__all__ = [
    "AUTODETECT_VALUES",
    "Origin",
    "NodeGpus",
    "GresConf",
    "slurm_conf_gpus",
    "gres_conf_gpus",
    "resolve_gpus",
    "node_types",
    "node_devices",
]

#: ``AutoDetect`` values Slurm knows (``off``: no detection).
AUTODETECT_VALUES: frozenset[str] = frozenset({"nvml", "nvidia", "rsmi", "oneapi", "nrt", "off"})

#: An NVIDIA GPU's device file; its number is the GPU's device number on the node.
_NVIDIA_DEVICE = re.compile(r"/dev/nvidia(\d+)")

_GRES_KEYS = ("nodename", "name", "type", "file", "multiplefiles", "count", "autodetect")


class Origin(NamedTuple):
    """Where a node's GPUs of one type were given: file and line, and the field (``Gres``,
    ``Type``); ``source`` None for a command-line option named by ``field``."""

    source: str | None
    number: int
    field: str

    def __str__(self) -> str:
        return self.field if self.source is None else f"{self.source} line {self.number}"

    def seen_from(self, source: str | None) -> str:
        """As an error about ``source`` names it: ``line 3``, ``line 3 of FILE`` or the option."""
        return self.field if self.source is None else line_ref(self.number, self.source, source or "")


@dataclass
class NodeGpus:
    """A node's GPUs: ``counts[type]`` (``None``: no type named), types in the order first given,
    and where each type was first given."""

    counts: dict[str | None, int] = field(default_factory=dict)
    origins: dict[str | None, Origin] = field(default_factory=dict)
    #: a gres.conf line gave no Count= and no File=: one GPU, unless AutoDetect finds the count
    uncounted: bool = False
    #: per type, the device numbers of its GPUs in the order given; None unless every GPU of the
    #: node was given by an NVIDIA device file (``File=/dev/nvidiaN``)
    devices: dict[str | None, list[int]] | None = None

    def add(self, gpu_type: str | None, count: int, origin: Origin) -> None:
        self.counts[gpu_type] = self.counts.get(gpu_type, 0) + count
        self.origins.setdefault(gpu_type, origin)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def kept(self) -> dict[str | None, int]:
        """The types with at least one GPU."""
        return {t: n for t, n in self.counts.items() if n > 0}


def _gres_entries(spec: str, line: ConfigLine) -> list[tuple[str | None, int]]:
    """``(type, count)`` of each ``gpu`` entry of a ``Gres=`` value: ``gpu:8``, ``gpu:a100:4,nic:1``,
    ``gpu:2(S:0-1)``, ``gpu:a100``, ``gpu``."""
    out: list[tuple[str | None, int]] = []
    for entry in re.sub(r"\([^)]*\)", "", spec).split(","):
        parts = entry.strip().split(":")
        if parts[0].strip().lower() != "gpu":
            continue
        rest = [p.strip() for p in parts[1:] if p.strip().lower() != "no_consume"]
        count = parse_count(rest[-1]) if rest else 1
        if count is None and rest and re.fullmatch(r"[-+].*|[\d.]+[kKmMgGtTpP]?", rest[-1]):
            # gpu:-2, gpu:a100:1.5, a count of 13 digits: not a type (gpu:1g.5gb, a MIG type, is one)
            raise InstanceError(f"bad GPU count {rest[-1]!r} in Gres={spec!r} (a count is a whole number >= 0 "
                                "of at most 12 digits, with an optional K, M, G, T or P)", source=line.source, path=line.at("Gres"))
        if count is None and len(rest) == 1:  # gpu:TYPE: one GPU of that type
            out.append((rest[0], 1))
        elif count is None or len(rest) > 2 or (len(rest) == 2 and not rest[0]):
            raise InstanceError(f"bad GPU entry {entry.strip()!r} in Gres={spec!r} (expected gpu:N or gpu:TYPE:N)",
                                source=line.source, path=line.at("Gres"))
        else:
            out.append((rest[0] if len(rest) == 2 else None, count))
    return out


def slurm_conf_gpus(lines: Iterable[ConfigLine]) -> dict[str, NodeGpus]:
    """Each node's GPUs from the ``NodeName`` lines of a ``slurm.conf`` (module docstring).

    Nodes without a ``gpu`` GRES (and no ``NodeName=DEFAULT Gres=`` before them) have no GPUs
    (an empty :class:`NodeGpus`: the file says they have none); a node defined twice is an error.
    """
    default: tuple[list[tuple[str | None, int]], ConfigLine] | None = None
    out: dict[str, NodeGpus] = {}
    line_of: dict[str, ConfigLine] = {}
    for line in lines:
        first = line.text.split("=", 1)[0].strip().lower()
        if first != "nodename":
            continue
        kv = {k.lower(): v for k, v in key_values(line)}
        gres = (_gres_entries(kv["gres"], line), line) if "gres" in kv else default
        if kv["nodename"].lower() == "default":
            default = gres
            continue
        for node in expand_field(kv["nodename"], line, "NodeName"):
            if node in line_of:
                first_on = line_of[node].seen_from(line.source)
                raise InstanceError(f"node {node!r} is defined twice (first on {first_on})", source=line.source,
                                    path=line.at("NodeName"))
            line_of[node] = line
            gpus = out[node] = NodeGpus()
            if gres is not None:
                for gpu_type, count in gres[0]:
                    gpus.add(gpu_type, count, Origin(gres[1].source, gres[1].number, "Gres"))
    return out


@dataclass(frozen=True)
class _GresLine:
    """One ``Name=gpu`` line of a gres.conf: its nodes (None: every node), type, count, devices."""

    line: ConfigLine
    order: int
    nodes: tuple[str, ...] | None
    gpu_type: str | None
    count: int
    devices: tuple[str, ...]
    counted: bool = True


@dataclass
class GresConf:
    """The GPU lines and ``AutoDetect`` settings of a ``gres.conf`` (module docstring)."""

    gpu_lines: list[_GresLine] = field(default_factory=list)
    autodetect: list[tuple[ConfigLine, frozenset[str] | None, str]] = field(default_factory=list)

    def autodetect_line(self, node: str) -> tuple[ConfigLine, str] | None:
        """The ``AutoDetect`` line in force on ``node`` and its value, when detection is on: the
        last line naming the node, else the last line for every node."""
        mine = [(line, v) for line, nodes, v in self.autodetect if nodes is not None and node in nodes]
        every = [(line, v) for line, nodes, v in self.autodetect if nodes is None]
        chosen = mine[-1] if mine else every[-1] if every else None
        return chosen if chosen is not None and chosen[1] != "off" else None

    def node_gpus(self, nodes: Sequence[str]) -> dict[str, NodeGpus]:
        """Each of ``nodes``' GPUs from the lines that apply to it (nodes no line gives a GPU are absent)."""
        wanted = set(nodes)
        per_node: dict[str, list[_GresLine]] = {}
        everywhere = [g for g in self.gpu_lines if g.nodes is None]
        for g in self.gpu_lines:
            for node in g.nodes or ():
                if node in wanted:
                    per_node.setdefault(node, []).append(g)
        out: dict[str, NodeGpus] = {}
        for node in nodes:
            mine = per_node.get(node, [])
            applying = sorted([*everywhere, *mine], key=lambda g: g.order) if mine else everywhere
            if applying:
                out[node] = _sum_lines(node, applying)
        return out


def _sum_lines(node: str, lines: Sequence[_GresLine]) -> NodeGpus:
    gpus = NodeGpus()
    seen: dict[str, ConfigLine] = {}
    numbers: dict[str | None, list[int]] | None = {}
    for g in lines:
        matches = [_NVIDIA_DEVICE.fullmatch(dev) for dev in g.devices]
        if numbers is not None and matches and all(matches):
            numbers.setdefault(g.gpu_type, []).extend(int(m.group(1)) for m in matches if m)
        else:
            numbers = None
        for dev in g.devices:
            if dev in seen:
                where = seen[dev].seen_from(g.line.source)
                raise InstanceError(f"device {dev} of node {node!r} is given twice (also on {where})",
                                    source=g.line.source, path=g.line.at("File"))
            seen[dev] = g.line
        gpus.add(g.gpu_type, g.count, Origin(g.line.source, g.line.number, "Type"))
        gpus.uncounted |= not g.counted
    distinct = numbers is not None and len(set(itertools.chain.from_iterable(numbers.values()))) == gpus.total
    gpus.devices = numbers if distinct else None
    return gpus


def _gres_line(line: ConfigLine, order: int, kv: Mapping[str, str], nodes: tuple[str, ...] | None) -> _GresLine:
    """A ``Name=gpu`` line's type, count and devices."""
    if "file" in kv and "multiplefiles" in kv:
        raise InstanceError("File and MultipleFiles are mutually exclusive", source=line.source,
                            path=line.at("MultipleFiles"))
    devices = tuple(expand_field(kv["file"], line, "File")) if "file" in kv else ()
    count = len(devices) if devices else 1
    if "count" in kv:
        given = parse_count(kv["count"])
        if given is None:
            raise InstanceError(f"Count must be a whole number of at most 12 digits (K, M, G, T, P suffixes allowed), "
                                f"got {kv['count']!r}",
                                source=line.source, path=line.at("Count"))
        if devices and given != len(devices):
            raise InstanceError(f"Count={kv['count']} but File= names {len(devices)} device files (Count must be "
                                "their number, or left out)", source=line.source, path=line.at("Count"))
        count = given
    gpu_type = kv.get("type") or None
    return _GresLine(line, order, nodes, gpu_type, count, devices, counted=bool(devices) or "count" in kv)


def gres_conf_gpus(lines: Iterable[ConfigLine]) -> GresConf:
    """The GPU lines and ``AutoDetect`` settings of a ``gres.conf`` (module docstring)."""
    conf = GresConf()
    for line in lines:
        kv: dict[str, str] = {}
        for key, value in key_values(line):
            low = key.lower()
            if low in kv and low in _GRES_KEYS:
                raise InstanceError(f"{key} given twice", source=line.source, path=line.at(key))
            kv[low] = value
        nodes = tuple(expand_field(kv["nodename"], line, "NodeName")) if "nodename" in kv else None
        if "autodetect" in kv:
            value = kv["autodetect"].lower()
            if value not in AUTODETECT_VALUES:
                raise InstanceError(f"unknown AutoDetect value {kv['autodetect']!r} (Slurm knows "
                                    f"{', '.join(sorted(AUTODETECT_VALUES))})", source=line.source,
                                    path=line.at("AutoDetect"))
            conf.autodetect.append((line, None if nodes is None else frozenset(nodes), value))
        if "name" not in kv:
            if "autodetect" in kv:
                continue
            raise InstanceError("expected a Name= (GRES) or AutoDetect= line", source=line.source, path=line.at())
        if kv["name"].lower() == "gpu":
            conf.gpu_lines.append(_gres_line(line, len(conf.gpu_lines), kv, nodes))
    return conf


def resolve_gpus(
    hosts: Sequence[str],
    gres_conf: GresConf | None,
    slurm_conf: Mapping[str, NodeGpus] | None,
    gpus_per_node: int | None,
) -> tuple[dict[str, NodeGpus], list[str]]:
    """Each host's GPUs, and warnings: a host's ``gres.conf`` lines first (the devices its ``slurmd``
    registers), else its ``slurm.conf`` ``Gres``, else ``gpus_per_node`` (untyped).  But a host
    the ``slurm.conf`` defines without a ``gpu`` GRES has none (Slurm schedules only the GRES
    ``slurm.conf`` gives a node; ``gres.conf`` details them), and a host whose ``gres.conf`` lines
    give no count (no ``Count=``, no ``File=``) under ``AutoDetect`` takes its ``slurm.conf`` count,
    else ``gpus_per_node`` (of the one type its lines name), else it is one whose count none gives.

    The warnings name the hosts whose ``gres.conf`` and ``slurm.conf`` GPUs differ (type names
    compared ignoring case, as Slurm compares them), and the hosts
    under an ``AutoDetect`` line that none of the three gives a count (taken as without GPUs); when
    that leaves no host a GPU, it is an error naming the ``AutoDetect`` line.
    """
    from_gres = gres_conf.node_gpus(hosts) if gres_conf is not None else {}
    conf = slurm_conf or {}
    out: dict[str, NodeGpus] = {}
    differ: list[str] = []
    detected: list[tuple[str, ConfigLine, str]] = []
    declared_none: list[str] = []
    for h in hosts:
        if h in from_gres and h in conf and not conf[h].total:
            out[h] = conf[h]
            if from_gres[h].total:
                declared_none.append(h)
        elif (h in from_gres and from_gres[h].uncounted and gres_conf is not None
              and (auto := gres_conf.autodetect_line(h)) is not None):
            # slurmd detects the devices: slurm.conf or --gpus-per-node says how many (it was
            # one GPU per line when neither was given, without a word)
            if h in conf:
                out[h] = conf[h]
            elif gpus_per_node is not None:  # of the type the node's lines name, when one
                kind = next(iter(from_gres[h].counts)) if len(from_gres[h].counts) == 1 else None
                out[h] = NodeGpus({kind: gpus_per_node}, {kind: Origin(None, 0, "--gpus-per-node")})
            else:
                detected.append((h, *auto))
        elif h in from_gres:
            out[h] = from_gres[h]
            if h in conf and _folded(conf[h]) != _folded(from_gres[h]):
                differ.append(f"{h} ({_says(from_gres[h])} in {_file(from_gres[h])}, {_says(conf[h])} in "
                              f"{_file(conf[h])})")
        elif h in conf:
            out[h] = conf[h]
        elif gpus_per_node is not None:
            out[h] = NodeGpus({None: gpus_per_node}, {None: Origin(None, 0, "--gpus-per-node")})
        elif gres_conf is not None and (auto := gres_conf.autodetect_line(h)) is not None:
            detected.append((h, *auto))
    notes = []
    if declared_none:
        notes.append(f"{_nodes(declared_none)} with GPUs in the gres.conf but no Gres=gpu in the slurm.conf, taken "
                     f"as without GPUs (Slurm schedules only the GRES the slurm.conf gives a node): "
                     f"{declared_none[0]}" + (f" and {len(declared_none) - 1} more" if len(declared_none) > 1 else ""))
    if differ:
        notes.append(f"{_nodes(differ)} with other GPUs in the gres.conf than in the slurm.conf, the gres.conf's "
                     f"taken (the devices slurmd registers): {differ[0]}"
                     + (f" and {len(differ) - 1} more" if len(differ) > 1 else ""))
    if detected:
        h, line, value = detected[0]
        what = (f"AutoDetect={value}: slurmd finds the GPUs of {_nodes(detected)} ({h}"
                + (f" and {len(detected) - 1} more" if len(detected) > 1 else "") + ") at run time, which pal-opt "
                "cannot do from the files; give their counts in Name=gpu lines, as Gres=gpu:N in the slurm.conf "
                "(--slurm-conf) or with --gpus-per-node")
        if not any(g.total for g in out.values()):
            raise InstanceError(what, source=line.source, path=line.at("AutoDetect"))
        notes.append(f"{line.source} line {line.number}: {what}; taken as nodes without GPUs")
    return out, notes


def _folded(gpus: NodeGpus) -> dict[str | None, int]:
    """A node's GPUs per type, type names in lower case: Slurm matches a ``gres.conf`` ``Type``
    to a ``slurm.conf`` ``Gres`` type ignoring case (``A100`` is ``a100`` there)."""
    out: dict[str | None, int] = {}
    for t, n in gpus.kept().items():
        key = None if t is None else t.lower()
        out[key] = out.get(key, 0) + n
    return out


def _nodes(items: Sequence[object]) -> str:
    return counted(len(items), "node")


def _file(gpus: NodeGpus) -> str:
    return str(next(iter(gpus.origins.values())).source)


def _says(gpus: NodeGpus) -> str:
    return ", ".join(f"{n} {t or 'untyped'}" for t, n in gpus.kept().items()) or "no GPU"


def node_types(gpus: Mapping[str, NodeGpus]) -> dict[str, tuple[str, ...]] | None:
    """Each GPU node's GPU types, one per GPU in the order the types were given, when every GPU
    node names a type; None when none does.

    A node may hold GPUs of several types (a type per GPU, as :class:`~pal_opt.model.Cluster`
    keeps them).  GPU nodes with and without a type, or one node with GPUs of both kinds, are an
    error naming a node of each kind and the file, line and field of the one without a type.
    """
    typed: tuple[str, str, Origin] | None = None
    untyped: tuple[str, Origin] | None = None
    for node, g in gpus.items():
        kept = g.kept()
        names = [t for t in kept if t is not None]
        if names and None in kept:
            _mixed(node, g.origins[None], names[0], g.origins[names[0]], "and of type")
        if names and typed is None:
            typed = (node, names[0], g.origins[names[0]])
        elif kept and not names and untyped is None:
            untyped = (node, g.origins[None])
        if typed is not None and untyped is not None:
            _mixed(untyped[0], untyped[1], typed[1], typed[2], f"but node {typed[0]!r} has type")
    if typed is None:
        return None
    return {node: tuple(str(t) for t, n in g.kept().items() for _ in range(n)) for node, g in gpus.items()
            if g.total}


def node_devices(gpus: Mapping[str, NodeGpus]) -> dict[str, tuple[int, ...]] | None:
    """Each GPU node's device numbers, one per GPU in :func:`node_types`' order (by type in the
    order the types were given, then in the order of the lines), when every GPU node's GPUs were
    given by NVIDIA device files (``File=/dev/nvidia[0-7]``); None otherwise (the exports then
    number a node's GPUs by rank)."""
    out: dict[str, tuple[int, ...]] = {}
    for node, g in gpus.items():
        if not g.total:
            continue
        if g.devices is None:
            return None
        out[node] = tuple(n for t in g.kept() for n in g.devices.get(t, ()))
    return out


def _mixed(bare: str, bare_at: Origin, gpu_type: str, typed_at: Origin, joint: str) -> NoReturn:
    """The error of GPUs without a type (on node ``bare``) beside GPUs of ``gpu_type``."""
    at = bare_at if bare_at.source is not None else typed_at
    raise InstanceError(f"node {bare!r} has GPUs without a type ({bare_at.seen_from(at.source)}) {joint} "
                        f"{gpu_type!r} ({typed_at.seen_from(at.source)}): pal-opt types every GPU node or none "
                        "(name a type on every GPU node, Gres=gpu:TYPE:N or Type=, or on none)", source=at.source,
                        path=f"line {at.number}, {at.field}")
