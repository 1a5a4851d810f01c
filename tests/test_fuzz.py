"""Fuzzing every reader: hostile input ends in pal-opt's own error naming the field, or loads.

Targets: the instance loader (:func:`pal_opt.io.load_instance`, :func:`instance_from_dict`), the
placement-file reader, the Blox importer (files and DataFrames), the job CSV importer, the
measurement reader and the trace reader.  Inputs are valid documents mutated at random field
paths (wrong types and values, deletions, unknown keys, duplicated entries), text-level damage
(truncation, inserted bytes, duplicate keys, huge numbers, NaN/Infinity, deep nesting, other
encodings, BOMs) and CSV damage (missing/extra/duplicate columns, ragged rows, quotes, NUL
bytes, BOMs, huge cells, CRLF).

The invariant: the reader returns normally or raises a :class:`~pal_opt.errors.PalOptError`
(normally :class:`~pal_opt.errors.InstanceError`) whose message names the file and, for a
document that parsed, the field path or the line and column.  Anything else (KeyError,
TypeError, RecursionError, MemoryError, numpy errors...) fails the test with hypothesis's
shrunk example.

Example counts: each default hypothesis test runs :data:`N_DEFAULT` (250) examples — 1,000
JSON documents over the instance and placement readers, 500 CSV documents over the importers and
the trace reader, 150 DataFrame pairs, 140 CLI runs in process and 5 as subprocesses — plus an
exhaustive sweep of every field of three instance documents against 28 hostile values (8,642
documents).  The ``@pytest.mark.slow`` tests (``pytest -m slow tests/test_fuzz.py``) run
:data:`N_SLOW` (10,000) examples per target (70,000 in all) and sweep every cell and column of
the four CSV tables against 49 hostile cells (11,932 files).
"""

from __future__ import annotations

import atexit
import copy
import csv
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pal_opt.cli import main
from pal_opt.errors import InstanceError, PalOptError
from pal_opt.generate import generate_instance
from pal_opt.io import (
    instance_from_dict,
    instance_from_frames,
    load_blox,
    load_instance,
    load_jobs,
    load_measurements,
    load_placement_file,
)
from pal_opt.io.blox import blox_gpu_rows
from pal_opt.io.instance import instance_to_dict
from pal_opt.io.safe import parse_json
from pal_opt.io.traces import read_trace
from pal_opt.model import RoundInstance

#: Examples per default (CI) fuzz test.
N_DEFAULT = 250
#: Examples per slow fuzz test.
N_SLOW = 10_000

_SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    derandomize=False,
)
FAST = settings(max_examples=N_DEFAULT, **_SETTINGS)
SLOW = settings(max_examples=N_SLOW, **_SETTINGS)

_TMP = Path(tempfile.mkdtemp(prefix="pal_opt_fuzz_"))
atexit.register(shutil.rmtree, _TMP, True)  # (it was left in /tmp by every run, 142 files each)


def _tmpfile(name: str, data: bytes) -> Path:
    p = _TMP / name
    p.write_bytes(data)
    return p


# =========================================================================== valid bases
def _base_docs() -> list[dict[str, Any]]:
    hand = {
        "format": "pal-opt/instance",
        "version": 1,
        "name": "base",
        "params": {"locality_penalty": 1.7, "binning": "pal-artifact", "restart_cost": 0.5},
        "cluster": {
            "servers": {"id": [0, "s1", 2], "rack": ["a", "a", 3]},
            "gpus": {
                "id": [0, 1, 2, 3, 4, 5, 17],
                "server": [0, 0, 0, "s1", "s1", 2, 2],
                "state": ["free", "free", "busy", "free", "free", "failed", "free"],
            },
            "factors": {
                "classA": [1.0, 1.1, 0.9, 1.05, 1.0, 1.2, 0.95],
                "classB": [1.0, 1.0, 1.0, 1.01, 0.99, 1.0, 1.0],
            },
        },
        "jobs": [
            {"id": 0, "demand": 2, "class": "classA", "model": "resnet50"},
            {"id": 1, "demand": 1, "model": "BERT", "locality": [1.0, 1.3, 2.0]},
            {"id": "r", "demand": 2, "class": "classB", "placement": [3, 4]},
        ],
        "meta": {"note": "hand-made", "nested": {"x": [1, 2.5, None, True]}},
    }
    gen = instance_to_dict(
        generate_instance(3, 4, 5, racks=2, seed=1, busy_fraction=0.2, failed_fraction=0.1, running_fraction=0.5)
    )
    flat = instance_to_dict(generate_instance(2, 2, 3, seed=2, running_fraction=0.5))
    return [hand, gen, flat]


BASE_DOCS = _base_docs()
for _d in BASE_DOCS:  # the bases are valid
    instance_from_dict(copy.deepcopy(_d))


def _base_instance() -> RoundInstance:
    return generate_instance(3, 4, 5, racks=2, seed=3, busy_fraction=0.2, failed_fraction=0.1, running_fraction=0.6)


def _csv_text(header: list[str], rows: list[list[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def _blox_tables() -> tuple[list[str], list[list[Any]], list[str], list[list[Any]]]:
    inst = _base_instance()
    rows = blox_gpu_rows(inst)
    gh = list(rows[0])
    grows = [[r[h] for h in gh] for r in rows]
    jh = ["job_id", "num_gpus", "perfclass", "model", "is_running", "locality_penalty"]
    jrows = [[j.id, j.demand, j.perfclass, j.model or "", j.placement is not None, ""] for j in inst.jobs]
    jrows[0][-1] = 1.5
    return gh, grows, jh, jrows


GPU_HEADER, GPU_ROWS, JOB_HEADER, JOB_ROWS = _blox_tables()
MEAS_HEADER = ["exp", "uuid", "perf", "node"]
MEAS_ROWS = [["resnet", f"g{i % 5}", 300 + 17 * i, f"c{i % 3}"] for i in range(12)]
TRACE_HEADER = ["job_id", "num_gpus", "submit_time", "duration", "model"]
TRACE_ROWS = [[0, 1, 98, 1481.0, "vgg19"], [1, 12, 115, 4037.0, "DCGAN"], [2, 4, 120, 10.5, "resnet50"],
              [3, 2, 130, 77, "PointNet"]]

for _h, _r in ((GPU_HEADER, GPU_ROWS), (JOB_HEADER, JOB_ROWS)):
    assert _csv_text(_h, _r)
load_blox(_tmpfile("g.csv", _csv_text(GPU_HEADER, GPU_ROWS).encode()),
          _tmpfile("j.csv", _csv_text(JOB_HEADER, JOB_ROWS).encode()))


# =========================================================================== value strategies
class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")

    __repr__ = __str__


_HUGE_INTS = [2**63, 2**64 + 1, -(2**63) - 1, 10**40, 10**41, -(10**50)]
_ODD_FLOATS = [math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, -0.0, 0.0, 1e-300, 2.0**53 + 2]
_ODD_STRINGS = ["", " ", "free", "busy", "failed", "classA", "classZ", "resnet50", "pal-opt/instance", "0", "1.5",
                "NaN", "\u00e9\u4e2d\U0001f600", "a" * 5000, "\ud7ff", "x\ny", "\t", "null", "[]", "{}"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=40),
    st.integers(),
    st.sampled_from(_HUGE_INTS),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(_ODD_FLOATS),
    st.text(max_size=20),
    st.sampled_from(_ODD_STRINGS),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=6),
        st.dictionaries(st.one_of(st.text(max_size=8), st.sampled_from(["id", "demand", "class", "x"])), children,
                        max_size=4),
    ),
    max_leaves=12,
)


def _deep(depth: int, kind: str) -> Any:
    v: Any = 1
    for _ in range(depth):
        v = [v] if kind == "list" else {"k": v}
    return v


# =========================================================================== document mutation
def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (tuple of keys/indices) to a value in the document, the root excluded."""
    out: list[tuple] = []
    stack = [(doc, prefix)]
    while stack:
        node, p = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                out.append((*p, k))
                stack.append((v, (*p, k)))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                out.append((*p, i))
                stack.append((v, (*p, i)))
    out.sort(key=repr)
    return out


def _containers(doc: Any) -> list[tuple]:
    out = [()] if isinstance(doc, (dict, list)) else []
    for p in _paths(doc):
        if isinstance(_get(doc, p), (dict, list)):
            out.append(p)
    return out


def _get(doc: Any, path: tuple) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _show(path: tuple) -> str:
    s = ""
    for k in path:
        s += f"[{k}]" if isinstance(k, int) else (f".{k}" if s else str(k))
    return s


MUTATIONS = ("replace", "delete", "unknown-key", "append", "pop", "duplicate", "swap", "deep", "type-flip")


@st.composite
def mutated_docs(draw: Any, max_ops: int = 3) -> tuple[dict[str, Any], list[str]]:
    """A valid base document with 1..max_ops random mutations; returns it and a log of the ops."""
    doc = copy.deepcopy(draw(st.sampled_from(BASE_DOCS)))
    log: list[str] = []
    for _ in range(draw(st.integers(1, max_ops))):
        op = draw(st.sampled_from(MUTATIONS))
        paths = _paths(doc)
        if not paths:
            break
        if op in ("replace", "type-flip", "delete", "deep"):
            path = draw(st.sampled_from(paths))
            parent = _get(doc, path[:-1])
            if op == "delete":
                del parent[path[-1]]
            elif op == "deep":
                parent[path[-1]] = _deep(draw(st.integers(1, 80)), draw(st.sampled_from(["list", "dict"])))
            elif op == "type-flip":
                old = parent[path[-1]]
                parent[path[-1]] = (
                    [old] if not isinstance(old, list) else (old[0] if old else {}))
            else:
                parent[path[-1]] = draw(json_values)
            log.append(f"{op} {_show(path)}")
        elif op == "unknown-key":
            dicts = [p for p in _containers(doc) if isinstance(_get(doc, p), dict)]
            path = draw(st.sampled_from(dicts))
            key = draw(st.sampled_from(["typo", "demnd", "$schema", "meta", "rack", "state", "servers", "placement"]))
            _get(doc, path)[key] = draw(json_values)
            log.append(f"{op} {_show(path)}.{key}")
        else:
            lists = [p for p in _containers(doc) if isinstance(_get(doc, p), list)]
            if not lists:
                continue
            path = draw(st.sampled_from(lists))
            lst = _get(doc, path)
            if op == "append":
                lst.append(draw(json_values))
            elif op == "pop" and lst:
                lst.pop(draw(st.integers(0, len(lst) - 1)))
            elif op == "duplicate" and lst:
                lst.append(copy.deepcopy(lst[draw(st.integers(0, len(lst) - 1))]))
            elif op == "swap" and len(lst) > 1:
                i, j = draw(st.integers(0, len(lst) - 1)), draw(st.integers(0, len(lst) - 1))
                lst[i], lst[j] = lst[j], lst[i]
            log.append(f"{op} {_show(path)}")
    return doc, log


# =========================================================================== text mutation
_NUMBER_SUBS = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "9" * 5000, "-" + "9" * 41, "1" * 41,
                str(2**64), "0.0", "-0", "1E400", "4.0", "1e-400", "123456789012345678901234567890.5"]


def _json_text(doc: Any) -> str:
    return json.dumps(doc, allow_nan=True, ensure_ascii=False)


@st.composite
def damaged_texts(draw: Any) -> bytes:
    """JSON text damaged below the document level."""
    doc, _ = draw(st.one_of(mutated_docs(max_ops=1), st.tuples(st.sampled_from(BASE_DOCS), st.just([]))))
    text = _json_text(doc)
    kind = draw(st.sampled_from(
        ["truncate", "insert-bytes", "number", "dup-key", "encoding", "bom", "deep-wrap", "deep-field", "random",
         "whitespace", "replace-char", "utf8-invalid"]))
    data: bytes
    if kind == "truncate":
        data = text.encode()[: draw(st.integers(0, max(0, len(text.encode()) - 1)))]
    elif kind == "insert-bytes":
        b = text.encode()
        i = draw(st.integers(0, len(b)))
        data = b[:i] + draw(st.binary(min_size=1, max_size=8)) + b[i:]
    elif kind == "number":
        import re

        nums = list(re.finditer(r"(?<![\w\"])-?\d+(\.\d+)?([eE][-+]?\d+)?", text))
        if not nums:
            data = text.encode()
        else:
            m = draw(st.sampled_from(nums))
            data = (text[: m.start()] + draw(st.sampled_from(_NUMBER_SUBS)) + text[m.end():]).encode()
    elif kind == "dup-key":
        key = draw(st.sampled_from(["format", "version", "cluster", "jobs", "id", "demand", "gpus", "factors"]))
        val = draw(st.sampled_from(["3", "null", "[]", "{}", '"x"', "NaN"]))
        data = text.replace(f'"{key}":', f'"{key}": {val}, "{key}":', 1).encode()
    elif kind == "encoding":
        enc = draw(st.sampled_from(["utf-16", "utf-16-le", "utf-32", "latin-1", "cp1252"]))
        t = text.replace('"name": "', '"name": "caf\u00e9 ', 1) if '"name"' in text else text
        data = t.encode(enc, errors="replace")
    elif kind == "bom":
        data = draw(st.sampled_from([b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf\xef\xbb\xbf"])) + text.encode()
    elif kind == "deep-wrap":
        n = draw(st.sampled_from([63, 64, 65, 1000, 100_000]))
        data = ("[" * n + text + "]" * n).encode()
    elif kind == "deep-field":
        n = draw(st.sampled_from([60, 70, 5000, 200_000]))
        open_, close = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        data = text.replace('"jobs": [', '"jobs": [' + open_ * n + "1" + close * n + ", ", 1).encode()
    elif kind == "random":
        data = draw(st.binary(max_size=200))
    elif kind == "whitespace":
        data = draw(st.sampled_from([b"", b" ", b"\n\n", b"\t \r\n", b"\x0c"]))
    elif kind == "replace-char":
        b = bytearray(text.encode())
        if b:
            b[draw(st.integers(0, len(b) - 1))] = draw(st.integers(0, 255))
        data = bytes(b)
    else:
        data = text.encode() + b"\xc3\x28"
    return data


# =========================================================================== the invariant
# Errors that concern the whole file rather than a field.
_FILE_LEVEL = ("is empty", "is binary", "is UTF-16 text", "not valid UTF-8", "nesting deeper", "larger than the limit",
               "has a header but no rows", "malformed CSV", "is a directory",
               "expected a pandas DataFrame")


def _check_error(exc: PalOptError, source: str | None, *, parsed: bool) -> None:
    msg = str(exc)
    assert msg.strip(), "empty error message"
    assert len(msg) < 1500, f"error message of {len(msg)} characters"
    if isinstance(exc, InstanceError):
        if source is not None:
            assert exc.source == source, (exc.source, source, msg)
            assert msg.startswith(source), msg
        if parsed and not any(f in msg for f in _FILE_LEVEL):
            assert exc.path, f"error names no field: {msg}"


def expect_clean(fn: Callable[[], Any], source: str | None, *, parsed: bool = True) -> Any:
    """Run a reader; it must return or raise a PalOptError that names the source (and field)."""
    try:
        return fn()
    except PalOptError as exc:
        _check_error(exc, source, parsed=parsed)
        return exc


def _is_json(data: bytes) -> bool:
    try:
        parse_json(data.decode("utf-8").lstrip("\ufeff"))
        return True
    except (InstanceError, UnicodeDecodeError):
        return False


# =========================================================================== JSON targets
def _run_instance_doc(doc_log: tuple[dict[str, Any], list[str]]) -> None:
    doc, _log = doc_log
    expect_clean(lambda: instance_from_dict(doc, "m.json"), "m.json")
    data = _json_text(doc).encode()
    p = _tmpfile("inst.json", data)
    res = expect_clean(lambda: load_instance(p), str(p), parsed=True)
    if isinstance(res, RoundInstance):  # what loads must also re-save and re-load identically
        assert instance_to_dict(load_instance(p)) == instance_to_dict(res)


def _run_instance_bytes(data: bytes) -> None:
    p = _tmpfile("inst.json", data)
    expect_clean(lambda: load_instance(p), str(p), parsed=_is_json(data))


def _run_placement_bytes(data: bytes) -> None:
    p = _tmpfile("pl.json", data)
    expect_clean(lambda: load_placement_file(p), str(p), parsed=_is_json(data))


@FAST
@given(mutated_docs())
def test_fuzz_instance_documents(doc_log):
    _run_instance_doc(doc_log)


@FAST
@given(damaged_texts())
def test_fuzz_instance_text(data):
    _run_instance_bytes(data)


@pytest.mark.slow
@SLOW
@given(mutated_docs(max_ops=5))
def test_fuzz_instance_documents_long(doc_log):
    _run_instance_doc(doc_log)


@pytest.mark.slow
@SLOW
@given(damaged_texts())
def test_fuzz_instance_text_long(data):
    _run_instance_bytes(data)


@st.composite
def placement_docs(draw: Any) -> bytes:
    base = {"placements": {"0": [0, 1], "r": [3, 4]}, "method": "pal", "status": "feasible",
            "admission": "pal-order", "objective": 0.1, "info": {"binning": "none"}}
    doc: Any = copy.deepcopy(base)
    if draw(st.booleans()):
        doc = doc["placements"]
    for _ in range(draw(st.integers(0, 3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        _get(doc, path[:-1])[path[-1]] = draw(json_values)
    if draw(st.booleans()):
        doc = draw(json_values)
    return _json_text(doc).encode()


@FAST
@given(st.one_of(placement_docs(), damaged_texts()))
def test_fuzz_placement_files(data):
    _run_placement_bytes(data)


@pytest.mark.slow
@SLOW
@given(st.one_of(placement_docs(), damaged_texts()))
def test_fuzz_placement_files_long(data):
    _run_placement_bytes(data)


def _python_values() -> st.SearchStrategy[Any]:
    """Values no JSON parser produces, for :func:`instance_from_dict` called from Python."""
    return st.one_of(
        json_values,
        st.sampled_from([(1, 2), {1, 2}, frozenset(), b"bytes", np.int64(3), np.float64("nan"), np.float32(1.5),
                         np.array([1, 2]), np.array([[1.0]]), object(), 1 + 2j, Path("x"), range(3), {1: 2},
                         {("t",): 1}, np.bool_(True), float("nan"), 10**400, -(10**400), 10**5000, 2**63,
                         _Unprintable()]),
    )


def _run_python_objects(data: Any) -> None:
    doc = copy.deepcopy(data.draw(st.sampled_from(BASE_DOCS)))
    for _ in range(data.draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        path = data.draw(st.sampled_from(paths))
        _get(doc, path[:-1])[path[-1]] = data.draw(_python_values())
    expect_clean(lambda: instance_from_dict(doc, "<memory>"), "<memory>")


@FAST
@given(st.data())
def test_fuzz_instance_from_python_objects(data):
    _run_python_objects(data)


@pytest.mark.slow
@SLOW
@given(st.data())
def test_fuzz_instance_from_python_objects_long(data):
    _run_python_objects(data)


# every field path x every hostile value, exhaustively (the sampled tests above may miss a pair)
_SWEEP_VALUES: list[Any] = [
    None, True, 0, -1, 1.5, 2**63, 10**5000, math.nan, math.inf, -0.0, "", "x", "free", "classA", [], [[]], {},
    {"id": 1}, np.array([1, 2]), np.array([]), np.int64(3), (1, 2), {1, 2}, b"x", object(), pd.NA, _deep(70, "list"),
    _Unprintable(),
]


def test_sweep_every_field_of_the_instance():
    n = 0
    for base in BASE_DOCS:
        for path in _paths(base):
            for v in _SWEEP_VALUES:
                doc = copy.deepcopy(base)
                _get(doc, path[:-1])[path[-1]] = v
                expect_clean(lambda doc=doc: instance_from_dict(doc, "s.json"), "s.json")
                n += 1
            doc = copy.deepcopy(base)
            del _get(doc, path[:-1])[path[-1]]
            expect_clean(lambda doc=doc: instance_from_dict(doc, "s.json"), "s.json")
            n += 1
    assert n > 5000


def test_duplicate_keys_are_errors_naming_the_key():
    text = _json_text(BASE_DOCS[0]).replace('"demand": 2', '"demand": 1, "demand": 2', 1)
    p = _tmpfile("dup.json", text.encode())
    with pytest.raises(InstanceError) as ei:
        load_instance(p)
    assert str(ei.value) == f"{p}: jobs[0].demand: duplicate key 'demand' (JSON readers disagree on which value wins)"
    text = _json_text(BASE_DOCS[0]).replace('{"format"', '{"version": 2, "format"', 1)
    with pytest.raises(InstanceError, match=r": version: duplicate key 'version'"):
        load_instance(_tmpfile("dup.json", text.encode()))


def test_long_values_give_short_messages():
    doc = copy.deepcopy(BASE_DOCS[0])
    doc["jobs"][0]["class"] = "c" * 1_000_000
    with pytest.raises(InstanceError) as ei:
        instance_from_dict(doc, "big.json")
    assert len(str(ei.value)) < 700 and "characters cut" in str(ei.value)
    assert len(ei.value.message) > 1_000_000  # the attribute keeps everything


def test_instance_from_dict_deep_python_nesting():
    doc = copy.deepcopy(BASE_DOCS[0])
    doc["meta"] = _deep(100_000, "list")
    expect_clean(lambda: instance_from_dict(doc), "<memory>")
    doc = copy.deepcopy(BASE_DOCS[0])
    doc["jobs"] = _deep(100_000, "list")
    expect_clean(lambda: instance_from_dict(doc), "<memory>")
    expect_clean(lambda: instance_from_dict(_deep(100_000, "dict")), "<memory>")


# =========================================================================== CSV targets
_ODD_CELLS = ["", " ", "nan", "NaN", "inf", "-inf", "1e999", "-1", "0", "-0", "1.5", "4.0", "9" * 30, "9" * 5000,
              "1" * 44, "true", "False", "yes", "None", "[1, 2]", "(3)", "'7'", '"x"', "a,b", 'q"uote', "line\nbreak",
              "\u00e9", "\U0001f600", "x" * 10_000, "\x00", "\ufeff", "classA", "classZ", "resnet50", "GPT2", "0x1F",
              "1_000", " 2 ", "+3", "1e5", "2**64", str(2**63), str(-(2**63) - 1), "\r", "\\N", "#",
              "y" * 200_000]  # the last is over the csv module's field size limit


def _cell(draw: Any) -> str:
    return draw(st.one_of(st.sampled_from(_ODD_CELLS), st.text(max_size=12)))


@st.composite
def damaged_csvs(draw: Any, header: list[str], rows: list[list[Any]]) -> bytes:
    """A valid CSV table with structural and cell damage, serialised (possibly badly) to bytes."""
    h = list(header)
    rs = [[str(x) for x in r] for r in rows]
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(
            ["cell", "cell", "cell", "drop-col", "extra-col", "dup-col", "rename-col", "ragged", "dup-row",
             "drop-rows", "swap-cols", "case"]))
        if op == "cell" and rs:
            r = draw(st.integers(0, len(rs) - 1))
            if rs[r]:
                rs[r][draw(st.integers(0, len(rs[r]) - 1))] = _cell(draw)
        elif op == "drop-col" and h:
            c = draw(st.integers(0, len(h) - 1))
            h.pop(c)
            for r in rs:
                if c < len(r):
                    r.pop(c)
        elif op == "extra-col":
            h.append(draw(st.sampled_from(["extra", "", "PerfVar_", "PerfVar_classQ", "FAILED", "Rack_ID", "uuid"])))
            for r in rs:
                r.append(_cell(draw))
        elif op == "dup-col" and h:
            c = draw(st.integers(0, len(h) - 1))
            h.append(h[c])
            for r in rs:
                r.append(_cell(draw) if draw(st.booleans()) else (r[c] if c < len(r) else ""))
        elif op == "rename-col" and h:
            h[draw(st.integers(0, len(h) - 1))] = _cell(draw)
        elif op == "ragged" and rs:
            r = rs[draw(st.integers(0, len(rs) - 1))]
            if draw(st.booleans()) and r:
                r.pop()
            else:
                r.append(_cell(draw))
        elif op == "dup-row" and rs:
            rs.append(list(rs[draw(st.integers(0, len(rs) - 1))]))
        elif op == "drop-rows":
            rs = rs[: draw(st.integers(0, len(rs)))]
        elif op == "swap-cols" and len(h) > 1:
            i, j = draw(st.integers(0, len(h) - 1)), draw(st.integers(0, len(h) - 1))
            h[i], h[j] = h[j], h[i]
        elif op == "case" and h:
            c = draw(st.integers(0, len(h) - 1))
            h[c] = h[c].upper() if draw(st.booleans()) else h[c].lower()
    text = _csv_text(h, rs)
    enc = draw(st.sampled_from(["plain"] * 6 + ["crlf", "bom", "utf-16", "latin-1", "raw-quotes", "truncate", "nul",
                                               "insert-bytes", "tabs"]))
    if enc == "crlf":
        return text.replace("\n", "\r\n").encode()
    if enc == "bom":
        return b"\xef\xbb\xbf" + text.encode()
    if enc in ("utf-16", "latin-1"):
        return (text + "caf\u00e9\n").encode(enc, errors="replace")
    if enc == "raw-quotes":
        i = draw(st.integers(0, len(text)))
        return (text[:i] + draw(st.sampled_from(['"', '""', '"a"b', "'"])) + text[i:]).encode()
    if enc == "truncate":
        return text.encode()[: draw(st.integers(0, len(text.encode())))]
    if enc == "nul":
        i = draw(st.integers(0, len(text)))
        return (text[:i] + "\x00" + text[i:]).encode()
    if enc == "insert-bytes":
        b = text.encode()
        i = draw(st.integers(0, len(b)))
        return b[:i] + draw(st.binary(min_size=1, max_size=6)) + b[i:]
    if enc == "tabs":
        return text.replace(",", "\t").encode()
    return text.encode("utf-8", errors="surrogatepass")


def _run_blox(gdata: bytes, jdata: bytes) -> None:
    g = _tmpfile("gpus.csv", gdata)
    j = _tmpfile("jobs.csv", jdata)
    try:
        load_blox(g, j)
    except PalOptError as exc:
        if isinstance(exc, InstanceError):
            assert exc.source in (str(g), str(j)), str(exc)
        _check_error(exc, None, parsed=True)
        if isinstance(exc, InstanceError) and not any(f in str(exc) for f in _FILE_LEVEL):
            assert exc.path, str(exc)


_GOOD_G = _csv_text(GPU_HEADER, GPU_ROWS).encode()
_GOOD_J = _csv_text(JOB_HEADER, JOB_ROWS).encode()


@FAST
@given(st.one_of(
    st.tuples(damaged_csvs(GPU_HEADER, GPU_ROWS), st.just(_GOOD_J)),
    st.tuples(st.just(_GOOD_G), damaged_csvs(JOB_HEADER, JOB_ROWS)),
    st.tuples(damaged_csvs(GPU_HEADER, GPU_ROWS), damaged_csvs(JOB_HEADER, JOB_ROWS)),
))
def test_fuzz_blox_files(pair):
    _run_blox(*pair)


@pytest.mark.slow
@SLOW
@given(st.one_of(
    st.tuples(damaged_csvs(GPU_HEADER, GPU_ROWS), st.just(_GOOD_J)),
    st.tuples(st.just(_GOOD_G), damaged_csvs(JOB_HEADER, JOB_ROWS)),
    st.tuples(damaged_csvs(GPU_HEADER, GPU_ROWS), damaged_csvs(JOB_HEADER, JOB_ROWS)),
))
def test_fuzz_blox_files_long(pair):
    _run_blox(*pair)


def _run_jobs(data: bytes, classes: Any) -> None:
    p = _tmpfile("jobs_only.csv", data)
    expect_clean(lambda: load_jobs(p, classes=classes, max_gpus=8), str(p))


def _run_measurements(data: bytes, aggregate: str) -> None:
    p = _tmpfile("meas.csv", data)
    res = expect_clean(lambda: load_measurements(p, aggregate), str(p))
    if isinstance(res, np.ndarray):
        assert res.size and np.isfinite(res).all() and (res > 0).all()


def _run_trace(data: bytes) -> None:
    p = _tmpfile("trace.csv", data)
    res = expect_clean(lambda: read_trace(p), str(p))
    if isinstance(res, list):
        for j in res:
            assert j.demand >= 1 and math.isfinite(j.submit_time) and math.isfinite(j.iterations)


_CSV_TARGETS = st.one_of(
    st.tuples(st.just("jobs"), damaged_csvs(JOB_HEADER, JOB_ROWS), st.sampled_from([None, ("classA", "classC")])),
    st.tuples(st.just("meas"), damaged_csvs(MEAS_HEADER, MEAS_ROWS), st.sampled_from(["run", "max", "median"])),
    st.tuples(st.just("trace"), damaged_csvs(TRACE_HEADER, TRACE_ROWS), st.none()),
)


def _run_csv_target(t: tuple[str, bytes, Any]) -> None:
    kind, data, extra = t
    if kind == "jobs":
        _run_jobs(data, extra)
    elif kind == "meas":
        _run_measurements(data, extra)
    else:
        _run_trace(data)


@FAST
@given(_CSV_TARGETS)
def test_fuzz_jobs_measurements_traces(t):
    _run_csv_target(t)


@pytest.mark.slow
@SLOW
@given(_CSV_TARGETS)
def test_fuzz_jobs_measurements_traces_long(t):
    _run_csv_target(t)


_SWEEP_CELLS = [c for c in _ODD_CELLS if len(c) < 1000] + ["y" * 200_000, "1;2", "[3]", "none", "1e-400"]


@pytest.mark.slow
@pytest.mark.parametrize("table", ["gpus", "jobs", "measurements", "trace"])
def test_sweep_every_cell_and_column(table):
    header, rows = {"gpus": (GPU_HEADER, GPU_ROWS), "jobs": (JOB_HEADER, JOB_ROWS),
                    "measurements": (MEAS_HEADER, MEAS_ROWS), "trace": (TRACE_HEADER, TRACE_ROWS)}[table]

    def run(h: list[str], rs: list[list[Any]]) -> None:
        data = _csv_text(h, rs).encode("utf-8", errors="surrogatepass")
        if table == "gpus":
            _run_blox(data, _GOOD_J)
        elif table == "jobs":
            _run_blox(_GOOD_G, data)
            _run_jobs(data, None)
        elif table == "measurements":
            for agg in ("run", "max", "median"):
                _run_measurements(data, agg)
        else:
            _run_trace(data)

    for r in range(len(rows)):
        for c in range(len(header)):
            for v in _SWEEP_CELLS:
                rs = [[str(x) for x in row] for row in rows]
                rs[r][c] = v
                run(header, rs)
    for c in range(len(header)):
        for v in _SWEEP_CELLS:
            run([*header[:c], v, *header[c + 1:]], rows)
        run(header[:c] + header[c + 1:], [list(row[:c]) + list(row[c + 1:]) for row in rows])


# =========================================================================== DataFrames
_FRAME_CELLS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 20), st.sampled_from(_HUGE_INTS), st.floats(), st.text(max_size=6),
    st.sampled_from([pd.NA, pd.NaT, np.nan, np.int64(2), np.float32(1.25), np.bool_(False), [1, 2], {"a": 1}, (3,),
                     pd.Timestamp("2024-01-01"), 1 + 1j, b"x", "1.0", "true", "", "classA", 10**5000,
                     _Unprintable(), np.array([1, 2])]),
)


@st.composite
def damaged_frames(draw: Any, header: list[str], rows: list[list[Any]]) -> Any:
    df = pd.DataFrame([list(r) for r in rows], columns=list(header))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["cell", "cell", "drop-col", "dup-col", "rename", "dtype", "empty", "not-frame",
                                   "index", "multi"]))
        if op == "cell" and len(df):
            df = df.astype(object)
            df.iat[draw(st.integers(0, len(df) - 1)), draw(st.integers(0, df.shape[1] - 1))] = draw(_FRAME_CELLS)
        elif op == "drop-col" and df.shape[1]:
            c = draw(st.integers(0, df.shape[1] - 1))
            df = df.iloc[:, [i for i in range(df.shape[1]) if i != c]]
        elif op == "dup-col" and df.shape[1]:
            c = draw(st.integers(0, df.shape[1] - 1))
            df = pd.concat([df, df.iloc[:, [c]]], axis=1)
        elif op == "rename" and df.shape[1]:
            cols = list(df.columns)
            cols[draw(st.integers(0, len(cols) - 1))] = draw(st.sampled_from([0, 1.5, None, ("a", "b"), "", "x"]))
            df.columns = cols
        elif op == "dtype" and df.shape[1]:
            c = df.columns[draw(st.integers(0, df.shape[1] - 1))]
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # float32 of a huge integer overflows to inf: that is the damage
                    df[c] = df[c].astype(draw(st.sampled_from(["string", "category", "float32", object])))
            except (ValueError, TypeError):
                pass
        elif op == "empty":
            df = df.iloc[0:0]
        elif op == "index" and len(df):
            df.index = [f"r{i}" for i in range(len(df))]
        elif op == "multi" and df.shape[1]:
            df.columns = pd.MultiIndex.from_tuples([(str(c), "x") for c in df.columns])
        elif op == "not-frame":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # to_dict() of duplicate columns warns
                as_dict = df.to_dict()
            return draw(st.sampled_from([None, [], {}, "gpus.csv", df.iloc[:, 0] if df.shape[1] else 1, as_dict]))
    return df


def _base_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    return (pd.DataFrame(GPU_ROWS, columns=GPU_HEADER), pd.DataFrame(JOB_ROWS, columns=JOB_HEADER))


instance_from_frames(*_base_frames())


def _run_frames(pair: tuple[Any, Any]) -> None:
    g, j = pair
    expect_clean(lambda: instance_from_frames(g, j), None)


_FRAME_PAIRS = st.one_of(
    st.tuples(damaged_frames(GPU_HEADER, GPU_ROWS), st.builds(lambda: _base_frames()[1])),
    st.tuples(st.builds(lambda: _base_frames()[0]), damaged_frames(JOB_HEADER, JOB_ROWS)),
)


@settings(max_examples=150, **_SETTINGS)
@given(_FRAME_PAIRS)
def test_fuzz_instance_from_frames(pair):
    _run_frames(pair)


@pytest.mark.slow
@SLOW
@given(_FRAME_PAIRS)
def test_fuzz_instance_from_frames_long(pair):
    _run_frames(pair)


# =========================================================================== the CLI
def _cli(argv: list[str], capsys: Any) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def _assert_cli_clean(rc: int, out: str, err: str, outfile: Path, ok: bool) -> None:
    assert "Traceback" not in err and "Traceback" not in out
    if ok:
        assert rc == 0, err
        assert outfile.exists()
    else:
        assert rc == 2, (rc, err)
        assert err.count("\n") == 1 and err.startswith("pal-opt: error: "), err
        assert len(err) < 2000, err
        assert not outfile.exists(), "an output file was written for bad input"
        assert not [p for p in outfile.parent.iterdir() if p.name.startswith(f".{outfile.name}.")], "temp file left"


def _loads(p: Path) -> bool:
    try:
        load_instance(p)
        return True
    except PalOptError:
        return False


@settings(max_examples=60, **_SETTINGS)
@given(st.one_of(mutated_docs().map(lambda dl: _json_text(dl[0]).encode()), damaged_texts()),
       st.sampled_from(["pal", "pmfirst", "packed", "packed-sticky", "random"]))
def test_fuzz_cli_solve(data, method):
    d = Path(tempfile.mkdtemp(dir=_TMP))
    inst = d / "in.json"
    inst.write_bytes(data)
    out = d / "out.json"
    import contextlib

    buf_out, buf_err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf_out), contextlib.redirect_stderr(buf_err):
        rc = main(["solve", str(inst), "--method", method, "--out", str(out)])
    _assert_cli_clean(rc, buf_out.getvalue(), buf_err.getvalue(), out, _loads(inst))
    if rc == 0:
        assert json.loads(out.read_text())["method"] == method


@settings(max_examples=40, **_SETTINGS)
@given(st.one_of(
    st.tuples(damaged_csvs(GPU_HEADER, GPU_ROWS), st.just(_GOOD_J)),
    st.tuples(st.just(_GOOD_G), damaged_csvs(JOB_HEADER, JOB_ROWS)),
))
def test_fuzz_cli_import_blox(pair):
    import contextlib

    d = Path(tempfile.mkdtemp(dir=_TMP))
    g, j, out = d / "g.csv", d / "j.csv", d / "out.json"
    g.write_bytes(pair[0])
    j.write_bytes(pair[1])
    try:
        load_blox(g, j)
        ok = True
    except PalOptError:
        ok = False
    buf_out, buf_err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf_out), contextlib.redirect_stderr(buf_err):
        rc = main(["import", "blox", "--gpus", str(g), "--jobs", str(j), "-o", str(out)])
    _assert_cli_clean(rc, buf_out.getvalue(), buf_err.getvalue(), out, ok)


@settings(max_examples=40, **_SETTINGS)
@given(st.one_of(placement_docs(), damaged_texts()))
def test_fuzz_cli_check(data):
    import contextlib

    d = Path(tempfile.mkdtemp(dir=_TMP))
    inst = d / "in.json"
    inst.write_text(_json_text(BASE_DOCS[0]))
    pl = d / "pl.json"
    pl.write_bytes(data)
    buf_out, buf_err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf_out), contextlib.redirect_stderr(buf_err):
        rc = main(["check", str(inst), str(pl)])
    err = buf_err.getvalue()
    assert "Traceback" not in err
    assert rc in (0, 1, 2), rc
    if rc == 2:
        assert err.count("\n") == 1 and err.startswith("pal-opt: error: "), err
    else:
        assert err == "", err


_SUBPROCESS_CASES = {
    "deep": b"[" * 300_000 + b"]" * 300_000,
    "utf16": json.dumps(BASE_DOCS[0]).encode("utf-16"),
    "huge-int": json.dumps(BASE_DOCS[0]).replace('"demand": 2', '"demand": ' + "9" * 100_000, 1).encode(),
    "truncated": json.dumps(BASE_DOCS[1]).encode()[:777],
    "bad-field": json.dumps({**BASE_DOCS[0], "jobs": [{"id": 1, "demand": {"x": []}, "class": "classA"}]}).encode(),
}


@pytest.mark.parametrize("case", sorted(_SUBPROCESS_CASES))
def test_fuzz_cli_subprocess(case, tmp_path):
    inst = tmp_path / "in.json"
    inst.write_bytes(_SUBPROCESS_CASES[case])
    out = tmp_path / "out.json"
    r = subprocess.run([sys.executable, "-m", "pal_opt.cli", "solve", str(inst), "--out", str(out)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("pal-opt: error: ") and str(inst) in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.json"]


@FAST
@given(st.text(alphabet=st.sampled_from(["a", ",", '"', "\n", "\r", "\x0c", "\u2028", "\x1c", "é"]), max_size=60))
def test_csv_lines_split_like_stringio(text):
    """read_csv's line splitter (which avoids StringIO's 4-bytes-per-character copy) cuts the
    text exactly where ``io.StringIO(text, newline="")`` does, so CSV parsing is unchanged."""
    from pal_opt.io.csvfile import _lines

    assert list(_lines(text)) == list(io.StringIO(text, newline=""))


# =========================================================================== the schema checker's shortcuts
_ITEM_SCHEMAS = [
    {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
    {"type": "integer", "minimum": 1},
    {"type": ["integer", "string"], "minimum": -(2**63 - 1), "maximum": 2**63 - 1, "minLength": 1},
    {"enum": ["free", "busy", "failed"]},
    {"type": "number", "exclusiveMinimum": 0},
    {"type": "number", "minimum": 1, "maximum": 2.5},
    {"type": "string", "minLength": 1, "maxLength": 3},
    {"type": ["array", "null"], "uniqueItems": True, "items": {"type": "integer", "minimum": 0}},
    {"type": "array", "minItems": 3, "maxItems": 3, "items": {"type": "number", "exclusiveMinimum": 0}},
    {"type": "object", "required": ["a"], "additionalProperties": False,
     "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"const": "x"}}}},
    # the key-and-length shortcuts (objects and arrays accepted without jsonschema) and int enums
    {"const": 1},
    {"enum": [0, 2, 4]},
    {"enum": [1, "a"]},
    {"type": "object", "required": ["a"], "anyOf": [{"required": ["b"]}, {"required": ["c"]}],
     "additionalProperties": False, "properties": {"a": True, "b": {"type": "integer"}, "c": True},
     "propertyNames": {"type": "string", "minLength": 1}, "minProperties": 2, "maxProperties": 3},
    {"type": ["object", "array"], "oneOf": [{"required": ["a"]}, {"required": ["b"]}], "minItems": 1,
     "maxItems": 2, "items": {"type": ["integer", "object"]}},
    {"allOf": [{"required": ["a"]}, {"minProperties": 2}], "properties": {"a": {"enum": [0, 1]}},
     "additionalProperties": {"type": "string"}},
]
_JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 4), st.sampled_from([2**63 - 1, 2**63, -(2**63), 10**30]),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([0.0, 1.0, 2.0, 2.5, -0.0, 1e19]),
    st.sampled_from(["", "a", "free", "busy", "xyzw", "x"]),
)
_JSON_ITEMS = st.recursive(
    _JSON_SCALARS,
    lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(st.sampled_from(["a", "b", "c"]), c, max_size=3)),
    max_leaves=6,
)


@FAST
@given(st.sampled_from(range(len(_ITEM_SCHEMAS))), st.lists(_JSON_ITEMS, max_size=12))
def test_schema_checker_agrees_with_jsonschema(k, values):
    """SchemaChecker's column shortcuts (fast scalar tests, per-value and per-shape memo, flattened
    items, hashed uniqueItems) reach jsonschema's verdict, and name the first bad item."""
    import jsonschema

    from pal_opt.io.validation import SchemaChecker

    item = _ITEM_SCHEMAS[k]
    ref = jsonschema.Draft202012Validator(item)
    bad = [i for i, v in enumerate(values) if not ref.is_valid(v)]
    problem = SchemaChecker({"type": "array", "items": item}).first_problem(values)
    assert (problem is None) == (not bad), (problem, bad)
    if bad:
        assert problem.path[0] == bad[0], (problem, bad)
