"""Bad input anywhere: exit status 2, one stderr line naming the file and the field, no output.

Each case writes a broken file, runs the CLI in process (``main``) with an output path, and
checks: status 2, nothing on stdout, exactly one line on stderr that starts with
``pal-opt: error:``, names the file and the field path (or line and column), no traceback, and
no output file.  A few cases run as a subprocess too.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pal_opt.cli import main
from pal_opt.errors import InstanceError
from pal_opt.io import load_instance, load_measurements, load_placement_file
from pal_opt.io.safe import read_text

# --------------------------------------------------------------------------- a valid base
BASE: dict[str, Any] = {
    "format": "pal-opt/instance",
    "version": 1,
    "name": "base",
    "params": {"locality_penalty": 1.7, "binning": "pal-artifact", "restart_cost": 0.0},
    "cluster": {
        "servers": {"id": [0, 1, 2], "rack": ["a", "a", "b"]},
        "gpus": {
            "id": [0, 1, 2, 3, 4, 5, 6],
            "server": [0, 0, 0, 1, 1, 2, 2],
            "state": ["free", "free", "busy", "free", "free", "failed", "free"],
        },
        "factors": {
            "classA": [1.0, 1.1, 0.9, 1.05, 1.0, 1.2, 0.95],
            "classB": [1.0, 1.0, 1.0, 1.01, 0.99, 1.0, 1.0],
        },
    },
    "jobs": [
        {"id": 0, "demand": 2, "class": "classA", "model": "resnet50"},
        {"id": 1, "demand": 1, "model": "BERT"},
        {"id": "r", "demand": 2, "class": "classB", "placement": [3, 4]},
    ],
}


def test_base_is_valid(tmp_path):
    p = tmp_path / "base.json"
    p.write_text(json.dumps(BASE))
    inst = load_instance(p)
    assert inst.cluster.racked and inst.job_by_id["r"].placement == (3, 4)


def mutate(fn: Callable[[dict[str, Any]], Any]) -> str:
    d = copy.deepcopy(BASE)
    fn(d)
    return json.dumps(d)


def setter(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set ``a.b[2].c`` style paths in the document."""

    def fn(d: dict[str, Any]) -> None:
        keys: list[Any] = []
        for part in path.split("."):
            name, _, rest = part.partition("[")
            keys.append(name)
            while rest:
                idx, _, rest = rest.partition("]")
                keys.append(int(idx))
                rest = rest.lstrip("[")
        node: Any = d
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value

    return fn


def deleter(path: str, key: str) -> Callable[[dict[str, Any]], None]:
    def fn(d: dict[str, Any]) -> None:
        node: Any = d
        for part in path.split(".") if path else []:
            name, _, idx = part.partition("[")
            node = node[name]
            if idx:
                node = node[int(idx.rstrip("]"))]
        del node[key]

    return fn


def raw(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode()


def patched(old: str, new: str) -> str:
    text = json.dumps(BASE)
    assert old in text
    return text.replace(old, new, 1)


# (case id, file content, expected text in the message after the file name)
JSON_CASES: list[tuple[str, bytes | str, str]] = [
    ("empty", b"", "instance file is empty"),
    ("whitespace", b"  \n\t\n", "instance file is empty"),
    ("binary", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
    # PowerShell's `>` writes UTF-16: said so, not "binary" (format review)
    ("utf-16", '{"format": "pal-opt/instance"}'.encode("utf-16"), "instance file is UTF-16 text; pal-opt reads UTF-8"),
    # UTF-32-LE's mark begins with UTF-16-LE's (diff review)
    ("utf-32", '{"format": "pal-opt/instance"}'.encode("utf-32"), "instance file is UTF-32 text; pal-opt reads UTF-8"),
    ("utf-16-no-mark", '{"format": "pal-opt/instance"}'.encode("utf-16-le"), "instance file is UTF-16LE text"),
    ("not-utf8", b'{"format": "pal-opt/instance", "name": "caf\xe9"}', "not valid UTF-8"),
    ("deep-nesting-recursion", "[" * 200_000 + "]" * 200_000, "nesting deeper than"),
    ("deep-nesting", '{"format": "pal-opt/instance", "meta": ' + "[" * 100 + "]" * 100 + "}", "nesting deeper than 64"),
    ("syntax", '{"format": "pal-opt/instance",\n "version": }', "line 2 column"),
    # a file cut short (a copy or a write interrupted) said only "Expecting value" (fourteenth session)
    ("truncated", json.dumps(BASE)[:60], "line 1 column 61: invalid JSON: Expecting property name enclosed in double "
                                         "quotes (the text ends there: is the file cut short?)"),
    ("truncated-in-string", json.dumps(BASE)[:150], "line 1 column 147: invalid JSON: Unterminated string starting at "
                                                    "(the text ends inside it: is the file cut short?)"),
    ("top-array", "[1, 2, 3]", "top level: must be an object, got an array"),
    ("top-string", '"hello"', "top level: must be an object"),
    # "(an instance file)", as a placement file's reader says "(a placement file)" (users' review)
    ("format", mutate(setter("format", "other")), "format: must be 'pal-opt/instance' (an instance file), got 'other'"),
    ("version", mutate(setter("version", 2)), "version: unsupported version 2"),
    ("missing-cluster", mutate(deleter("", "cluster")), "cluster: is required"),
    ("missing-jobs", mutate(deleter("", "jobs")), "jobs: is required"),
    ("unknown-top", mutate(setter("jobz", [])), "jobz: unknown field"),
    # exports crashed (TSV) or wrote XML that cannot be read back (bad-input review)
    ("id-control", patched('"id": "r"', '"id": "a\\u0001b"'), "jobs[2].id: must be text without a control character"),
    ("id-surrogate", patched('"id": "r"', '"id": "\\ud800"'), "jobs[2].id: must be text without a control character"),
    ("rack-tab", patched('"rack": ["a", "a", "b"]', '"rack": ["a", "a", "b\\tc"]'), "must be text without a control character (tab, line break)"),
    ("unknown-nested", mutate(setter("cluster.gpus.colour", [])), "cluster.gpus.colour: unknown field"),
    ("jobs-not-array", mutate(setter("jobs", {"0": 1})), "jobs: must be an array, got an object"),
    ("job-not-object", mutate(setter("jobs[1]", 5)), "jobs[1]: must be an object"),
    ("missing-demand", mutate(deleter("jobs[0]", "demand")), "jobs[0].demand: is required"),
    ("demand-zero", mutate(setter("jobs[0].demand", 0)), "jobs[0].demand: must be a positive integer, got 0"),
    ("demand-negative", mutate(setter("jobs[0].demand", -3)), "jobs[0].demand: must be a positive integer, got -3"),
    ("demand-fraction", mutate(setter("jobs[0].demand", 2.5)), "jobs[0].demand: must be a positive integer, got 2.5"),
    ("demand-string", mutate(setter("jobs[0].demand", "2")), "jobs[0].demand: must be a positive integer, got '2'"),
    ("demand-bool", mutate(setter("jobs[0].demand", True)), "jobs[0].demand: must be a positive integer, got true"),
    ("demand-null", mutate(setter("jobs[0].demand", None)), "jobs[0].demand: must be a positive integer, got null"),
    ("demand-nan", patched('"demand": 2', '"demand": NaN'), "jobs[0].demand: must be a positive integer, got NaN"),
    ("demand-huge-float", patched('"demand": 2', '"demand": 1e400'), "jobs[0].demand: must be a positive integer, got 1e400"),
    ("demand-huge-int", patched('"demand": 2', '"demand": ' + "9" * 5000), "jobs[0].demand: must be a positive integer, got 999"),
    ("demand-int64", patched('"demand": 2', '"demand": ' + str(2**70)), "jobs[0].demand: must be a positive integer that fits in 64 bits"),
    ("dup-gpu", mutate(setter("cluster.gpus.id[3]", 1)), "cluster.gpus.id[3]: duplicate GPU id 1"),
    ("dup-job", mutate(setter("jobs[1].id", 0)), "jobs[1].id: duplicate job id 0"),
    ("dup-job-text", mutate(setter("jobs[1].id", "0")), "jobs[1].id: duplicate job id '0'"),
    ("job-id-empty", mutate(setter("jobs[1].id", "")), "jobs[1].id: must be an integer or a non-empty string"),
    ("job-id-float", mutate(setter("jobs[1].id", 1.5)), "jobs[1].id: must be an integer or a non-empty string, got 1.5"),
    ("gpu-id-negative", mutate(setter("cluster.gpus.id[0]", -1)), "cluster.gpus.id[0]: must be a non-negative integer, got -1"),
    ("gpu-id-string", mutate(setter("cluster.gpus.id[2]", "g2")), "cluster.gpus.id[2]: must be a non-negative integer, got 'g2'"),
    ("gpu-id-huge", mutate(setter("cluster.gpus.id[2]", 2**64)), "cluster.gpus.id[2]: must be a non-negative integer that fits in 64 bits"),
    ("no-gpus", mutate(setter("cluster.gpus.id", [])), "cluster.gpus.id: must not be empty"),
    ("server-column-length", mutate(setter("cluster.gpus.server", [0, 0])), "cluster.gpus.server: must have 7 entries"),
    ("factor-nan", patched("1.05", "NaN"), "cluster.factors.classA[3]: must be a finite positive number, got NaN"),
    ("factor-infinity", patched("1.05", "Infinity"), "cluster.factors.classA[3]: must be a finite positive number, got Infinity"),
    ("factor-neg-infinity", patched("1.05", "-Infinity"), "cluster.factors.classA[3]: must be a finite positive number, got -Infinity"),
    ("factor-overflow", patched("1.05", "1e999"), "cluster.factors.classA[3]: must be a finite positive number, got 1e999"),
    # far outside, the binning's arithmetic overflowed: NaN objectives, negative levels, hangs
    ("factor-huge", mutate(setter("cluster.factors.classA[3]", 1e20)), "must be in 1e-06..1e+06 (a slowdown relative to a typical GPU), got 1e+20"),
    ("factor-tiny", mutate(setter("cluster.factors.classA[3]", 1e-300)), "must be in 1e-06..1e+06"),
    ("factor-zero", mutate(setter("cluster.factors.classA[3]", 0)), "cluster.factors.classA[3]: must be a finite positive number, got 0"),
    ("factor-negative", mutate(setter("cluster.factors.classB[6]", -1.0)), "cluster.factors.classB[6]: must be a finite positive number, got -1.0"),
    ("factor-string", mutate(setter("cluster.factors.classB[0]", "1.0")), "cluster.factors.classB[0]: must be a finite positive number, got '1.0'"),
    ("factor-length", mutate(setter("cluster.factors.classB", [1.0])), "cluster.factors.classB: must have 7 entries"),
    ("factors-empty", mutate(setter("cluster.factors", {})), "cluster.factors: must give the factors of at least one class"),
    ("unknown-server", mutate(setter("cluster.gpus.server[6]", 9)), "cluster.gpus.server[6]: unknown server 9"),
    ("server-without-gpus", mutate(setter("cluster.servers", {"id": [0, 1, 2, 3], "rack": ["a", "a", "b", "b"]})), "cluster.servers.id[3]: server 3 has no GPUs"),
    ("dup-server", mutate(setter("cluster.servers.id", [0, 1, 1])), "cluster.servers.id[2]: duplicate server id 1"),
    ("rack-length", mutate(setter("cluster.servers.rack", ["a"])), "cluster.servers.rack: must have 3 entries"),
    ("rack-null", mutate(setter("cluster.servers.rack[1]", None)), "cluster.servers.rack[1]: must be an integer or a non-empty string, got null"),
    ("unknown-state", mutate(setter("cluster.gpus.state[4]", "broken")), "cluster.gpus.state[4]: must be one of 'free', 'busy', 'failed', got 'broken'"),
    ("state-int", mutate(setter("cluster.gpus.state[0]", 1)), "cluster.gpus.state[0]: must be one of"),
    ("unknown-model", mutate(setter("jobs[1].model", "llama")), "jobs[1].model: unknown model 'llama' and no class given"),
    ("no-class-no-model", mutate(deleter("jobs[1]", "model")), "jobs[1].class: is required when no known model is given"),
    ("unknown-class", mutate(setter("jobs[0].class", "classZ")), "jobs[0].class: class 'classZ' has no GPU factors"),
    ("model-class-without-factors", mutate(setter("jobs[1].model", "PointNet")), "jobs[1].model: model 'PointNet' is classD, which has no GPU factors"),
    ("placement-unknown-gpu", mutate(setter("jobs[2].placement", [3, 40])), "jobs[2].placement[1]: unknown GPU 40"),
    # (a running job on a busy or failed GPU is not an error: it must move, tests/test_io.py)
    ("placement-length", mutate(setter("jobs[2].placement", [3])), "jobs[2].placement: a running job must hold exactly demand=2 GPUs, got 1"),
    # (a pipeline's GPUs are read stage by stage: an allowed count below its demand is no stage map)
    ("placement-short-pipeline", mutate(lambda d: d["jobs"][2].update(
        kind="strong-scaling", allowed_counts=[1, 2], placement=[3],
        pipeline={"stage_times": [1.0, 1.0], "replicas": [1, 1]})),
     "jobs[2].placement: a running pipeline job holds its stages' GPUs, exactly demand=2, got [3]"),
    ("placement-twice", mutate(setter("jobs[2].placement", [3, 3])), "jobs[2].placement[1]: GPU 3 listed twice"),
    ("placement-not-int", mutate(setter("jobs[2].placement", [3, "4"])), "jobs[2].placement[1]: must be a GPU id (non-negative integer), got '4'"),
    ("placement-shared", mutate(lambda d: d["jobs"].append({"id": 9, "demand": 1, "class": "classA", "placement": [4]})), "jobs[3].placement[0]: GPU 4 is also held by jobs[2]"),
    ("locality-length", mutate(setter("jobs[0].locality", [1.0, 1.7])), "jobs[0].locality: must be [server, rack, cluster] penalties, got 2 values"),
    ("locality-decreasing", mutate(setter("jobs[0].locality", [1.0, 2.0, 1.5])), "jobs[0].locality: penalties must not decrease"),
    ("locality-zero", mutate(setter("jobs[0].locality", [0, 1.0, 1.5])), "jobs[0].locality[0]: must be a finite positive number, got 0"),
    ("locality-nan", patched('"class": "classA", "model"', '"locality": [1, NaN, 2], "class": "classA", "model"'), "jobs[0].locality[1]: must be a finite positive number, got NaN"),
    ("pipeline-sum", mutate(setter("jobs[0].pipeline", {"stage_times": [2.0, 1.0], "replicas": [2, 1]})), "jobs[0].pipeline.replicas: must add up to demand=2, got [2, 1] (sum 3)"),
    ("pipeline-lengths", mutate(setter("jobs[0].pipeline", {"stage_times": [2.0], "replicas": [1, 1]})), "jobs[0].pipeline.replicas: must give one count per stage (1), got [1, 1]"),
    ("pipeline-negative-time", mutate(setter("jobs[0].pipeline", {"stage_times": [2.0, -1.0], "replicas": [1, 1]})), "jobs[0].pipeline.stage_times[1]: must be at least 0, got -1.0"),
    ("pipeline-no-time", mutate(setter("jobs[0].pipeline", {"stage_times": [0.0, 0.0], "replicas": [1, 1]})), "jobs[0].pipeline.stage_times: at least one stage must take time"),
    ("pipeline-zero-replicas", mutate(setter("jobs[0].pipeline", {"stage_times": [1.0, 1.0], "replicas": [2, 0]})), "jobs[0].pipeline.replicas[1]: must be a positive integer, got 0"),
    ("pipeline-missing", mutate(setter("jobs[0].pipeline", {"stage_times": [1.0]})), "jobs[0].pipeline.replicas: is required"),
    ("param-lambda", mutate(setter("params.locality_penalty", 0.5)), "params.locality_penalty: must be at least 1, got 0.5"),
    ("param-lambda-inf", patched('"locality_penalty": 1.7', '"locality_penalty": Infinity'), "params.locality_penalty: must be a finite number, got Infinity"),
    ("param-binning", mutate(setter("params.binning", "kmeans")), "params.binning: must be one of 'pal-artifact', 'silhouette', 'none', got 'kmeans'"),
    ("param-restart", mutate(setter("params.restart_cost", -1)), "params.restart_cost: must be at least 0, got -1"),
    ("param-unknown", mutate(setter("params.lambda", 2)), "params.lambda: unknown field"),
    ("name-type", mutate(setter("name", 7)), "name: must be a non-empty string, got 7"),
    ("meta-nan", mutate(setter("meta", {"x": [1, 2]})).replace("[1, 2]", "[1, NaN]"), "meta.x[1]: must be a finite number, got NaN"),
]



def typed(fn: Callable[[dict[str, Any]], Any] | None = None) -> str:
    """BASE on a typed cluster (GPUs 0-2 of type a, 3-6 of type b, throughput for classA), mutated."""
    def both(d: dict[str, Any]) -> None:
        d["cluster"]["gpus"]["type"] = ["a", "a", "a", "b", "b", "b", "b"]
        d["cluster"]["throughput"] = {"classA": {"a": 1.0, "b": 2.0}}
        if fn is not None:
            fn(d)

    return mutate(both)


# GPU types: unknown types, a throughput missing for a type, a type a job can never get
JSON_CASES += [
    ("gpu-type-length", typed(setter("cluster.gpus.type", ["a"])), "cluster.gpus.type: must have 7 entries"),
    ("gpu-type-empty", typed(setter("cluster.gpus.type[2]", "")), "cluster.gpus.type[2]: must be a non-empty string"),
    ("job-unknown-type", typed(setter("jobs[0].gpu_type", "v100")),
     "jobs[0].gpu_type: unknown GPU type 'v100' (cluster types: a, b)"),
    ("job-unknown-allowed-type", typed(setter("jobs[1].allowed_types", ["b", "v100"])),
     "jobs[1].allowed_types[1]: unknown GPU type 'v100' (cluster types: a, b)"),
    ("job-type-untyped-cluster", mutate(setter("jobs[0].gpu_type", "a")),
     "jobs[0].gpu_type: unknown GPU type 'a' (cluster types: none: cluster.gpus.type is not given)"),
    ("guaranteed-without-type", typed(setter("jobs[0].kind", "guaranteed")),
     "jobs[0].gpu_type: a guaranteed job needs its GPU type"),
    # (a type with fewer GPUs than the job needs is not bad input: tests/test_typed_unplaceable.py)
    ("placement-off-type", typed(lambda d: d["jobs"][2].update(kind="guaranteed", gpu_type="a")),
     "jobs[2].placement[0]: GPU 3 is of type 'b', which the job may not use (its GPU type: 'a')"),
    ("placement-off-allowed-types", typed(lambda d: d["jobs"][2].update(allowed_types=["a"], placement=[0, 4])),
     "jobs[2].placement[1]: GPU 4 is of type 'b', which the job may not use (its GPU type: 'a')"),
    ("placement-mixes-types", typed(setter("jobs[2].placement", [1, 3])),
     "jobs[2].placement: GPUs of types 'a', 'b', but the job does not mix types (mix_types)"),
    ("type-and-allowed-types", typed(lambda d: d["jobs"][0].update(gpu_type="a", allowed_types=["b"])),
     "jobs[0].allowed_types: give gpu_type (one type) or allowed_types, not both"),
    ("kind-unknown", typed(setter("jobs[0].kind", "elastic")), "jobs[0].kind: must be one of 'rigid', 'strong-scaling'"),
    ("counts-of-rigid-job", typed(setter("jobs[0].allowed_counts", [1, 2])),
     "jobs[0].allowed_counts: a rigid job runs on exactly demand=2 GPUs, got [1, 2]"),
    ("counts-without-demand", typed(lambda d: d["jobs"][0].update(kind="strong-scaling", allowed_counts=[1, 4])),
     "jobs[0].allowed_counts: must include the demand (2), got [1, 4]"),
    ("throughput-missing-type", typed(lambda d: d["cluster"]["throughput"]["classA"].pop("b")),
     "cluster.throughput.classA: no throughput on GPU type 'b' (a row gives every type: a, b)"),
    ("throughput-unknown-type", typed(lambda d: d["cluster"]["throughput"]["classA"].update(v100=3.0)),
     "cluster.throughput.classA.v100: unknown GPU type 'v100' (cluster types: a, b)"),
    ("throughput-unknown-class", typed(lambda d: d["cluster"]["throughput"].update(classZ={"a": 1.0, "b": 1.0})),
     "cluster.throughput.classZ: class 'classZ' has no GPU factors"),
    ("throughput-untyped-cluster", mutate(setter("cluster.throughput", {"classA": {"a": 1.0}})),
     "cluster.throughput.classA: the cluster has no GPU types (cluster.gpus.type)"),
    ("throughput-zero", typed(setter("cluster.throughput.classA.b", 0)), "cluster.throughput.classA.b: must be"),
]


def test_typed_base_is_valid(tmp_path):
    p = tmp_path / "typed.json"
    p.write_text(typed())
    inst = load_instance(p)
    assert inst.cluster.type_names == ("a", "b") and inst.cluster.throughput["classA"]["b"] == 2.0


def _expect_one_line_error(rc: int, out: str, err: str, *must: str) -> None:
    assert rc == 2, err
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("pal-opt: error: ")
    assert "Traceback" not in err
    for m in must:
        assert m in err, (m, err)


@pytest.mark.parametrize("content,expected", [(c, e) for _, c, e in JSON_CASES], ids=[i for i, _, _ in JSON_CASES])
def test_bad_instance_file(content, expected, tmp_path, capsys):
    src = tmp_path / "inst.json"
    src.write_bytes(raw(content))
    out_path = tmp_path / "out.json"
    rc = main(["solve", str(src), "--method", "packed", "--out", str(out_path)])
    out, err = capsys.readouterr()
    _expect_one_line_error(rc, out, err, f"pal-opt: error: {src}: ", expected)
    assert not out_path.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inst.json"]


def test_bad_instance_in_check_too(tmp_path, capsys):
    src = tmp_path / "inst.json"
    src.write_text(mutate(setter("jobs[0].demand", 0)))
    pl = tmp_path / "p.json"
    pl.write_text('{"placements": {}}')
    rc = main(["check", str(src), str(pl)])
    out, err = capsys.readouterr()
    _expect_one_line_error(rc, out, err, str(src), "jobs[0].demand")


@pytest.mark.parametrize(
    "content,expected",
    [
        (b"", "placement file is empty"),
        ("[1, 2]", "top level: must be an object"),
        ('{"placements": [1]}', "placements: must be an object"),
        ('{"placements": {"0": 3}}', "placements.0: must be an array"),
        ('{"placements": {"0": [1, 2.5]}}', "placements.0[1]: must be a GPU id (integer), got 2.5"),
        ('{"placements": {"0": [1]}, "objective": NaN}', "objective: must be a finite number, got NaN"),
        ('{"method": "pal", "status": "feasible"}',
         "placements: missing, and the file is not a bare {job id: [GPU ids]} object either (method: must be an array"),
    ],
)
def test_bad_placement_file(content, expected, tmp_path, capsys):
    inst = tmp_path / "inst.json"
    inst.write_text(json.dumps(BASE))
    pl = tmp_path / "p.json"
    pl.write_bytes(raw(content))
    rc = main(["check", str(inst), str(pl)])
    out, err = capsys.readouterr()
    _expect_one_line_error(rc, out, err, f"{pl}: ", expected)


@pytest.mark.parametrize("bare", [False, True])
def test_gpu_ids_follow_the_instance_files_rule(bare, tmp_path, capsys):
    """A GPU id written 4.0 is the id 4, as in an instance file (it passed the file's schema and
    then check() called it a violation, exit 1); "4" and 4.5 are bad input naming the field."""
    inst = tmp_path / "inst.json"
    inst.write_text(json.dumps(BASE))
    pl = tmp_path / "p.json"

    def write(ids: list[Any]) -> None:
        placements = {"0": ids, "1": [6]}
        pl.write_text(json.dumps(placements if bare else {"placements": placements, "stages": {"0": [ids]}}))

    write([1.0, 4.0])
    assert main(["check", str(inst), str(pl)]) == 0
    assert "valid (2 jobs placed" in capsys.readouterr().out
    assert load_placement_file(pl)["placements"]["0"] == [1, 4]
    for bad, shown in (["4", "'4'"], [4.5, "4.5"]):
        write([1, bad])
        rc = main(["check", str(inst), str(pl)])
        out, err = capsys.readouterr()
        _expect_one_line_error(rc, out, err, f"{pl}: ", "0[1]: must be a GPU id (integer), got " + shown)


def test_missing_file_and_directory(tmp_path, capsys):
    rc = main(["solve", str(tmp_path / "nope.json")])
    out, err = capsys.readouterr()
    _expect_one_line_error(rc, out, err, "nope.json", "no such instance file")
    rc = main(["solve", str(tmp_path)])
    out, err = capsys.readouterr()
    _expect_one_line_error(rc, out, err, str(tmp_path), "is a directory")


def test_size_limit(tmp_path):
    p = tmp_path / "big.json"
    p.write_text(json.dumps(BASE))
    with pytest.raises(InstanceError, match="larger than the limit of 100 bytes"):
        load_instance(p, max_bytes=100)
    with pytest.raises(InstanceError, match="larger than the limit"):
        read_text(p, max_bytes=10)


# --------------------------------------------------------------------------- CSV importers
GPU_OK = (
    ",GPU_ID,GPU_UUID,Node_ID,IN_USE,JOB_IDS,PerfVar_classA,PerfVar_classB\n"
    "0,0,u0,0,False,,1.00,1.0\n"
    "1,1,u1,0,True,7,1.10,1.0\n"
    "2,2,u2,1,True,7,0.95,1.0\n"
    "3,3,u3,1,True,55,1.02,1.0\n"
)
JOBS_OK = "job_id,num_gpus,model,perfclass\n7,2,resnet50,\n8,1,BERT,\n"


def gpu_with(line: int, col: str, value: str) -> str:
    rows = [r.split(",") for r in GPU_OK.strip().split("\n")]
    rows[line - 1][rows[0].index(col)] = value
    return "\n".join(",".join(r) for r in rows) + "\n"


# (case id, gpus.csv, jobs.csv, which file is named, expected text)
CSV_CASES: list[tuple[str, bytes | str, bytes | str, str, str]] = [
    ("gpus-empty", b"", JOBS_OK, "gpus", "GPU table is empty"),
    ("gpus-binary", b"GPU_ID\x00\x01\x02", JOBS_OK, "gpus", "binary"),
    ("gpus-not-utf8", GPU_OK.encode().replace(b"u3", b"\xff\xfe"), JOBS_OK, "gpus", "not valid UTF-8"),
    ("gpus-header-only", GPU_OK.split("\n")[0] + "\n", JOBS_OK, "gpus", "has a header but no rows"),
    ("gpus-no-gpu-id", GPU_OK.replace(",GPU_ID,", ",GPUID,"), JOBS_OK, "gpus", "header: missing column 'GPU_ID'"),
    ("gpus-no-node", GPU_OK.replace("Node_ID", "Node"), JOBS_OK, "gpus", "header: missing column 'Node_ID'"),
    ("gpus-no-perfvar", GPU_OK.replace("PerfVar_", "Var_"), JOBS_OK, "gpus", "header: no PerfVar_<class> column"),
    ("gpus-ragged", GPU_OK + "4,4,u4,1\n", JOBS_OK, "gpus", "line 6: has 4 fields but the header has 8"),
    # a spreadsheet's "CSV" in a locale whose separator is ';' (or a tab-separated export)
    ("gpus-semicolons", GPU_OK.replace(",", ";"), JOBS_OK, "gpus",
     "(the header has no comma but ';': pal-opt reads comma-separated files)"),
    ("jobs-tabs", GPU_OK, JOBS_OK.replace(",", "\t"), "jobs", "(the header has no comma but tabs: pal-opt reads "
     "comma-separated files)"),
    ("gpus-quote", GPU_OK + '4,4,"u4,1,False,,1.0,1.0\n', JOBS_OK, "gpus", "line"),
    ("gpu-id-text", gpu_with(3, "GPU_ID", "two"), JOBS_OK, "gpus", "line 3, column GPU_ID: must be a non-negative integer, got 'two'"),
    ("gpu-id-negative", gpu_with(3, "GPU_ID", "-2"), JOBS_OK, "gpus", "line 3, column GPU_ID: must be a non-negative integer, got '-2'"),
    ("gpu-id-fraction", gpu_with(3, "GPU_ID", "1.5"), JOBS_OK, "gpus", "line 3, column GPU_ID: must be a non-negative integer, got '1.5'"),
    ("gpu-id-huge", gpu_with(3, "GPU_ID", "9" * 30), JOBS_OK, "gpus", "line 3, column GPU_ID: must be a non-negative integer that fits in 64 bits"),
    ("gpu-id-dup", gpu_with(3, "GPU_ID", "0"), JOBS_OK, "gpus", "line 3, column GPU_ID: duplicate GPU id 0 (also on line 2)"),
    ("node-empty", gpu_with(2, "Node_ID", ""), JOBS_OK, "gpus", "line 2, column Node_ID: must not be empty"),
    ("in-use", gpu_with(2, "IN_USE", "maybe"), JOBS_OK, "gpus", "line 2, column IN_USE: must be true or false, got 'maybe'"),
    ("factor-nan", gpu_with(4, "PerfVar_classA", "nan"), JOBS_OK, "gpus", "line 4, column PerfVar_classA: must be a finite number, got 'nan'"),
    ("factor-inf", gpu_with(4, "PerfVar_classA", "inf"), JOBS_OK, "gpus", "line 4, column PerfVar_classA: must be a finite number, got 'inf'"),
    ("factor-overflow", gpu_with(4, "PerfVar_classB", "1e999"), JOBS_OK, "gpus", "line 4, column PerfVar_classB: must be a finite number"),
    ("factor-zero", gpu_with(4, "PerfVar_classA", "0"), JOBS_OK, "gpus", "line 4, column PerfVar_classA: must be a positive number, got '0'"),
    ("factor-negative", gpu_with(5, "PerfVar_classA", "-1.1"), JOBS_OK, "gpus", "line 5, column PerfVar_classA: must be a positive number"),
    ("factor-text", gpu_with(5, "PerfVar_classA", "fast"), JOBS_OK, "gpus", "line 5, column PerfVar_classA: must be a number, got 'fast'"),
    ("factor-empty", gpu_with(5, "PerfVar_classA", ""), JOBS_OK, "gpus", "line 5, column PerfVar_classA: must be a number, got an empty cell"),
    ("rack-mismatch", GPU_OK.replace("PerfVar_classB\n", "PerfVar_classB,Rack_ID\n").replace(",1.0\n", ",1.0,r0\n", 3).replace(",1.0\n", ",1.0,r1\n"), JOBS_OK, "gpus", "line 5, column Rack_ID: server 1 is in rack 'r0' on line 4 but in 'r1' here"),
    # (a queued job on a failed GPU is not bad input: it must move, as in an instance file; tests/test_io.py)
    ("shared-gpu", gpu_with(3, "JOB_IDS", '"7,8"'), JOBS_OK, "gpus", "line 3, column JOB_IDS: GPU 1 is shared by jobs [7, 8]"),
    ("running-count", gpu_with(3, "IN_USE", "False"), JOBS_OK, "jobs", "line 2: job 7 needs 2 GPUs but holds 1"),
    ("jobs-empty", GPU_OK, b"", "jobs", "job CSV is empty"),
    ("jobs-binary", GPU_OK, b"\x00\x00", "jobs", "binary"),
    ("jobs-not-utf8", GPU_OK, b"job_id,num_gpus,model\n7,2,r\xe9snet\n", "jobs", "not valid UTF-8"),
    ("jobs-no-demand", GPU_OK, "job_id,gpus_needed,model\n1,2,BERT\n", "jobs", "header: missing column 'num_gpus'"),
    ("jobs-no-class-or-model", GPU_OK, "job_id,num_gpus\n1,2\n", "jobs", "header: missing column 'perfclass' or 'model'"),
    ("jobs-demand-zero", GPU_OK, "job_id,num_gpus,model\n1,0,BERT\n", "jobs", "line 2, column num_gpus: must be a positive integer, got '0'"),
    ("jobs-demand-fraction", GPU_OK, "job_id,num_gpus,model\n1,2.5,BERT\n", "jobs", "line 2, column num_gpus: must be a positive integer, got '2.5'"),
    ("jobs-demand-negative", GPU_OK, "job_id,num_gpus,model\n1,-4,BERT\n", "jobs", "line 2, column num_gpus: must be a positive integer, got '-4'"),
    ("jobs-demand-huge", GPU_OK, "job_id,num_gpus,model\n1," + "9" * 4000 + ",BERT\n", "jobs", "line 2, column num_gpus: must be a positive integer, got '999"),
    ("jobs-demand-nan", GPU_OK, "job_id,num_gpus,model\n1,NaN,BERT\n", "jobs", "line 2, column num_gpus: must be a positive integer, got 'NaN'"),
    ("jobs-dup", GPU_OK, "job_id,num_gpus,model\n1,1,BERT\n1.0,1,BERT\n", "jobs", "line 3, column job_id: duplicate job id '1.0' (also on line 2)"),
    ("jobs-unknown-model", GPU_OK, "job_id,num_gpus,model\n1,1,llama\n", "jobs", "line 2, column model: unknown model 'llama' and no perfclass given"),
    ("jobs-neither", GPU_OK, "job_id,num_gpus,model,perfclass\n1,1,,\n", "jobs", "line 2, column perfclass: job 1 has neither a class nor a model"),
    ("jobs-class-without-factors", GPU_OK, "job_id,num_gpus,perfclass\n1,1,classD\n", "jobs", "line 2, column perfclass: class 'classD' has no GPU factors"),
    ("jobs-model-class-without-factors", GPU_OK, "job_id,num_gpus,model\n1,1,vgg19\n", "jobs", "line 2, column model: class 'classC' has no GPU factors"),
    ("jobs-lambda-nan", GPU_OK, "job_id,num_gpus,model,locality_penalty\n1,1,BERT,nan\n", "jobs", "line 2, column locality_penalty: must be a finite number, got 'nan'"),
    ("jobs-lambda-small", GPU_OK, "job_id,num_gpus,model,locality_penalty\n1,1,BERT,0.5\n", "jobs", "line 2, column locality_penalty: must be from 1 to 1e+06, got '0.5'"),
    # accepted by import, then refused by solve as jobs[0].locality[1] (format review)
    ("jobs-lambda-huge", GPU_OK, "job_id,num_gpus,model,locality_penalty\n1,1,BERT,2000000\n", "jobs", "line 2, column locality_penalty: must be from 1 to 1e+06, got '2000000'"),
    ("jobs-running-flag", GPU_OK, "job_id,num_gpus,model,is_running\n1,1,BERT,maybe\n", "jobs", "line 2, column is_running: must be true or false, got 'maybe'"),
    ("jobs-running-no-gpus", GPU_OK, "job_id,num_gpus,model,is_running\n8,1,BERT,true\n", "jobs", "line 2, column is_running: job 8 is marked running but holds no GPU"),
    # read as the last copy, or as Python's numbers, with exit 0 (bad-input review)
    ("jobs-dup-column", GPU_OK, "job_id,num_gpus,model,num_gpus\n1,4,BERT,2\n", "jobs", "header: column 'num_gpus' appears twice"),
    ("jobs-dup-column-case", GPU_OK, "job_id,num_gpus,model,Model\n1,4,BERT,vgg19\n", "jobs", "header: column 'model' appears twice ('model' and 'Model'; column names are case-insensitive)"),
    ("gpus-dup-column", GPU_OK.replace("PerfVar_classB\n", "PerfVar_classA\n"), JOBS_OK, "gpus", "header: column 'PerfVar_classA' appears twice"),
    ("jobs-demand-underscore", GPU_OK, "job_id,num_gpus,model\n1,1_000,BERT\n", "jobs", "line 2, column num_gpus: must be a positive integer, got '1_000'"),
    ("jobs-demand-fullwidth", GPU_OK, "job_id,num_gpus,model\n1,\uff12,BERT\n", "jobs", "line 2, column num_gpus: must be a positive integer, got '\uff12'"),
    ("factor-underscore", gpu_with(4, "PerfVar_classA", "1_0"), JOBS_OK, "gpus", "line 4, column PerfVar_classA: must be a number, got '1_0'"),
    ("jobs-not-running-but-holds", GPU_OK, "job_id,num_gpus,model,is_running\n7,2,BERT,false\n", "jobs", "line 2, column is_running: job 7 is marked not running but"),
]


@pytest.mark.parametrize(
    "gpus,jobs,which,expected",
    [(g, j, w, e) for _, g, j, w, e in CSV_CASES],
    ids=[c[0] for c in CSV_CASES],
)
def test_bad_blox_import(gpus, jobs, which, expected, tmp_path, capsys):
    gp = tmp_path / "gpus.csv"
    jp = tmp_path / "jobs.csv"
    gp.write_bytes(raw(gpus))
    jp.write_bytes(raw(jobs))
    out_path = tmp_path / "inst.json"
    rc = main(["import", "blox", "--gpus", str(gp), "--jobs", str(jp), "-o", str(out_path)])
    out, err = capsys.readouterr()
    named = gp if which == "gpus" else jp
    _expect_one_line_error(rc, out, err, f"pal-opt: error: {named}: ", expected)
    assert not out_path.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpus.csv", "jobs.csv"]


def test_valid_csv_base(tmp_path, capsys):
    gp = tmp_path / "gpus.csv"
    jp = tmp_path / "jobs.csv"
    gp.write_text(GPU_OK)
    jp.write_text(JOBS_OK)
    out_path = tmp_path / "inst.json"
    assert main(["import", "blox", "--gpus", str(gp), "--jobs", str(jp), "-o", str(out_path)]) == 0
    inst = load_instance(out_path)
    assert inst.job_by_id[7].placement == (1, 2)
    assert inst.cluster.state.tolist() == [0, 0, 0, 1]


# --------------------------------------------------------------------------- measurements
MEAS_CASES = [
    ("resnet", "uuid,perf\na,1\nb,x\n", "line 3, column perf: must be a number, got 'x'"),
    ("bert", "uuid,perf\na,1\nb,-2\n", "line 3, column perf: must be a positive number, got '-2'"),
    ("bert", "uuid,perf\na,1\nb,inf\n", "line 3, column perf: must be a finite number, got 'inf'"),
    ("pagerank", "uuid,speed\na,1\n", "header: missing column 'perf'"),
    ("pagerank", "", "measurement file is empty"),
    # a factor out of FACTOR_RANGE was reported as "factors.classB: factor of GPU 3 ...", naming no file
    ("bert", "uuid,perf\na,1\nb,1\nc,1e7\n",
     "line 4, column perf: perf 1e+07 is 1e+07 times the file's median 1; a factor must be in 1e-06..1e+06"),
    ("resnet", "uuid,perf\na,1e-4\nb,1e3\nc,1e3\n", "line 2, column perf: perf 0.0001 is 1e-07 times"),
]


@pytest.mark.parametrize("which,content,expected", MEAS_CASES)
def test_bad_measurements_via_generate(which, content, expected, tmp_path, capsys):
    d = tmp_path / "lh"
    d.mkdir()
    for name in ("resnet", "bert", "pagerank"):
        (d / f"{name}-longhorn-agg.csv").write_text("uuid,perf\na,1\nb,2\n")
    bad = d / f"{which}-longhorn-agg.csv"
    bad.write_text(content)
    out_path = tmp_path / "inst.json"
    rc = main(["generate", "--nodes", "2", "--gpus-per-node", "2", "--jobs", "3", "--measurements", str(d),
               "-o", str(out_path)])
    out, err = capsys.readouterr()
    _expect_one_line_error(rc, out, err, f"{bad}: ", expected)
    assert not out_path.exists()


@pytest.mark.parametrize("command", [
    ["generate", "--nodes", "2", "--gpus-per-node", "2", "--jobs", "3"],
    ["import", "slurm", "TOPOLOGY", "--gpus-per-node", "2"],
])
@pytest.mark.parametrize("given,expected", [
    # a file given for the directory was "FILE/resnet-longhorn-agg.csv: no such file"
    ("file", "--measurements: not a directory: give the directory that holds PAL's bert-longhorn-agg.csv"),
    ("missing", "--measurements: no such directory"),
])
def test_measurements_must_be_a_directory(command, given, expected, tmp_path, capsys):
    f = tmp_path / "resnet-longhorn-agg.csv"
    f.write_text("uuid,perf\na,1\nb,2\n")
    topology = tmp_path / "topology.conf"
    topology.write_text("SwitchName=s0 Nodes=n[1-2]\n")
    path = f if given == "file" else tmp_path / "nowhere"
    out_path = tmp_path / "inst.json"
    argv = [str(topology) if a == "TOPOLOGY" else a for a in command]
    rc = main([*argv, "--measurements", str(path), "-o", str(out_path)])
    out, err = capsys.readouterr()
    _expect_one_line_error(rc, out, err, f"{path}: ", expected)
    assert not out_path.exists()


def test_import_measurements_need_only_the_files_of_the_classes_asked_for(tmp_path, capsys):
    """``import ... --classes classA --measurements DIR`` reads DIR's resnet file only, and a DIR
    holding just that file did (before ``longhorn_files``, which asked for all four classes' files
    and refused it: ``DIR/bert-longhorn-agg.csv: no such file``).  A class asked for whose file is
    missing is still that one line."""
    d = tmp_path / "lh"
    d.mkdir()
    (d / "resnet-longhorn-agg.csv").write_text("uuid,perf\na,1\nb,2\n")
    topology = tmp_path / "topology.conf"
    topology.write_text("SwitchName=s0 Nodes=n[1-2]\n")
    out_path = tmp_path / "inst.json"
    argv = ["import", "slurm", str(topology), "--gpus-per-node", "2", "--measurements", str(d), "-o", str(out_path)]
    rc = main([*argv, "--classes", "classA"])
    assert rc == 0 and "wrote" in capsys.readouterr().out
    assert set(json.loads(out_path.read_text())["cluster"]["factors"]) == {"classA"}
    out_path.unlink()
    rc = main([*argv, "--classes", "classA,classB"])
    out, err = capsys.readouterr()
    # the option is named, as simulate --variability DIR names it (fourteenth session: it was not)
    _expect_one_line_error(rc, out, err, f"{d / 'bert-longhorn-agg.csv'}: --measurements {d}: no such file")
    assert not out_path.exists()


def test_measurement_factor_range_names_the_gpus_first_row(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("uuid,perf\na,1\nb,1\nc,5\nb,1e7\n")
    with pytest.raises(InstanceError, match=r"m.csv: line 3, column perf: the GPU's max perf 1e\+07 is 2e\+06 times"):
        load_measurements(p, "max")
    p.write_text("uuid,perf\na,1\nb,1\nc,5\nb,1\nb,1e7\n")  # b's median run is 1: in range
    assert load_measurements(p, "median").tolist() == [1.0, 1.0, 5.0]


def test_measurements_need_uuid_for_per_gpu_aggregates(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("perf\n1\n2\n")
    assert load_measurements(p).tolist() == [1 / 1.5, 2 / 1.5]
    with pytest.raises(InstanceError, match="missing column 'uuid'"):
        load_measurements(p, "max")


# --------------------------------------------------------------------------- options
@pytest.mark.parametrize(
    "argv,expected",
    [
        (["generate", "--nodes", "2", "--gpus-per-node", "2", "--jobs", "1", "--busy-fraction", "1.5", "-o", "{out}"], "--busy-fraction must be between 0 and 1"),
        (["generate", "--nodes", "0", "--gpus-per-node", "2", "--jobs", "1"], "argument --nodes: must be >= 1"),
        (["generate", "--nodes", "2", "--gpus-per-node", "2", "--jobs", "1", "--locality-penalty", "nan"], "argument --locality-penalty: must be finite"),
        (["generate", "--nodes", "2", "--gpus-per-node", "2", "--jobs", "1", "--racks", "5", "-o", "{out}"], "--racks must not exceed the servers (2), got 5"),
        (["generate", "--nodes", "2", "--gpus-per-node", "2", "--jobs", "1", "--busy-fraction", "0.8", "--failed-fraction",
          "0.8", "-o", "{out}"], "--busy-fraction + --failed-fraction must not exceed 1, got 0.8 + 0.8"),
        (["generate", "--nodes", "2", "--gpus-per-node", "2", "--jobs", "1"], "the following arguments are required: -o/--out/--output"),
        (["solve", "{inst}", "--method", "best"], "argument --method: invalid choice: 'best'"),
        (["solve", "{inst}", "--method", "random", "--backend", "highs"], "backend"),
        (["solve", "{inst}", "--method", "packed", "--gap", "0.01"], "gap"),
        (["import", "blox", "--gpus", "{gpus}", "--jobs", "{jobs}", "--locality-penalty", "0.5", "-o", "{out}"], "argument --locality-penalty: must be >= 1, got '0.5'"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        # a cluster size with a few digits too many fails at once instead of allocating terabytes
        (["generate", "--nodes", "99999999999999", "--gpus-per-node", "4", "--jobs", "1", "-o", "{out}"],
         "399,999,999,999,996 GPUs; pal-opt builds clusters of at most 1,048,576"),
        (["generate", "--cluster", "aws:99999999999999x4", "--jobs", "1", "-o", "{out}"],
         "--cluster aws:99999999999999x4: 399,999,999,999,996 GPUs"),
        (["simulate", "{trace}", "--cluster", "99999999x99999", "-o", "{out}"], "9,999,899,900,001 GPUs"),
        # GPU ids in ASCII digits: int() took '٤' (Arabic-Indic four) for GPU 4
        (["repair", "{inst}", "{inst}", "--failed", "\u0664", "-o", "{out}"], "GPU ids must be integers, got '\u0664'"),
        # a missing cluster file is named as such, before the options it would rule out
        (["simulate", "{trace}", "--cluster", "{tmp}/none.json", "--synthetic-variability", "0", "-o", "{out}"],
         "none.json: --cluster: no such file"),
        # within the cluster size limit, but a file solve would refuse (more than 2,000,000 JSON values)
        (["generate", "--nodes", "40000", "--gpus-per-node", "8", "--jobs", "1", "-o", "{out}"],
         "--nodes x --gpus-per-node and --jobs: the instance it makes (320,000 GPUs on 40,000 servers, 1 jobs"),
        (["simulate", "{trace}", "--trace-format", "sia", "--profiles", "{tmp}", "--cluster", "aws:99999999999999x4",
          "-o", "{out}"], "399,999,999,999,996 GPUs"),
        # an output that cannot be a file is refused before any work
        (["solve", "{inst}", "-o", ""], "argument -o/--out/--output: empty file name"),
        (["solve", "{inst}", "-o", "{tmp}"], "is a directory; give a file name"),
        (["simulate", "{trace}", "-o", "{tmp}"], "is a directory; give a file name"),
        (["simulate", "{trace}", "-o", "{out}", "--plot", ""], "argument --plot: empty file name"),
        (["partition", "{trace}", "--machines", "4", "--bandwidth", "1e9", "-o", "{tmp}"], "is a directory"),
        # a negative seed was a ValueError traceback from numpy
        (["solve", "{inst}", "--method", "random", "--seed", "-1"], "argument --seed: must be >= 0, got '-1'"),
        (["simulate", "{trace}", "--seed", "-5", "-o", "{out}"], "argument --seed: must be >= 0"),
        # an empty --cluster is not the default cluster
        (["simulate", "{trace}", "--cluster", "", "-o", "{out}"], "--cluster must look like 16x4"),
        (["simulate", "{trace}", "--trace-format", "sia", "--profiles", "{tmp}", "--cluster", "", "-o", "{out}"],
         "--cluster: expected TYPE:SERVERSxGPUS"),
    ],
)
def test_bad_options(argv, expected, tmp_path, capsys):
    inst = tmp_path / "inst.json"
    inst.write_text(json.dumps(BASE))
    (tmp_path / "gpus.csv").write_text(GPU_OK)
    (tmp_path / "jobs.csv").write_text(JOBS_OK)
    (tmp_path / "trace.csv").write_text("job_id,num_gpus,submit_time,duration,model\n1,2,0,100,BERT\n")
    subs = {"inst": inst, "gpus": tmp_path / "gpus.csv", "jobs": tmp_path / "jobs.csv", "out": tmp_path / "o.json",
            "trace": tmp_path / "trace.csv", "tmp": tmp_path}
    rc = main([a.format(**subs) for a in argv])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("pal-opt") and "Traceback" not in err
    assert expected in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpus.csv", "inst.json", "jobs.csv", "trace.csv"]


@pytest.mark.parametrize(
    "argv,expected",
    [
        (["repair", "{inst}", "{pl}", "--failed", "0,99", "-o", "{out}"],
         "--failed 99: not a GPU of {inst} (its 7 GPUs have ids between 0 and 6)"),
        (["solve", "{inst}", "--method", "ilp", "--jobs", "0,zz", "-o", "{out}"],
         "--jobs zz: not a job of {inst} (its 3 jobs: 0, 1, r)"),
        (["solve", "{inst}", "--method", "ilp", "--jobs", "1,r,1", "-o", "{out}"], "--jobs: job 1 is given twice"),
    ],
)
def test_ids_an_option_gives_are_checked_against_the_round(argv, expected, tmp_path, capsys):
    """``repair --failed 99`` said ``failed GPU 99 is not a GPU of the round``, and ``solve --jobs``
    ``job 'zz' is not in the queue`` or ``job 1 is listed twice in jobs=`` (the API's argument),
    naming neither the option nor the file the round came from."""
    inst = tmp_path / "inst.json"
    inst.write_text(json.dumps(BASE))
    pl = tmp_path / "pl.json"
    pl.write_text(json.dumps({"format": "pal-opt/placement", "version": 1, "placements": {"0": [0, 1]}}))
    subs = {"inst": inst, "pl": pl, "out": tmp_path / "o.json"}
    assert main([a.format(**subs) for a in argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"pal-opt: error: {expected.format(**subs)}\n"
    assert not (tmp_path / "o.json").exists()


# --------------------------------------------------------------------------- as a process
@pytest.mark.parametrize("case", ["deep-nesting-recursion", "demand-huge-int", "not-utf8", "placement-shared"])
def test_bad_input_subprocess(case, tmp_path):
    content = next(c for i, c, _ in JSON_CASES if i == case)
    src = tmp_path / "inst.json"
    src.write_bytes(raw(content))
    out_path = tmp_path / "out.json"
    r = subprocess.run(
        [sys.executable, "-m", "pal_opt.cli", "solve", str(src), "--out", str(out_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"pal-opt: error: {src}: ")
    assert "Traceback" not in r.stderr
    assert not out_path.exists()


def test_paths_in_messages_are_the_ones_given(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("rel.json").write_text(mutate(setter("jobs[0].demand", 2.5)))
    rc = main(["solve", "rel.json"])
    _, err = capsys.readouterr()
    assert rc == 2
    assert err == "pal-opt: error: rel.json: jobs[0].demand: must be a positive integer, got 2.5\n"


def test_unwritable_output_is_one_line(tmp_path, capsys):
    target = tmp_path / "no-such-dir" / "x.json"
    rc = main(["generate", "--nodes", "2", "--gpus-per-node", "2", "--jobs", "1", "-o", str(target)])
    out, err = capsys.readouterr()
    _expect_one_line_error(rc, out, err, f"pal-opt: error: --out {target}: cannot write: directory "
                                         f"{target.parent} does not exist")
    # solve and repair refuse it before the solve, not after minutes of it (the plot too)
    inst = str(Path(__file__).resolve().parents[1] / "instances" / "paper-16x4.json")
    placed = tmp_path / "placed.json"
    assert main(["solve", inst, "--method", "pal", "-o", str(placed)]) == 0
    capsys.readouterr()
    for argv in (["solve", inst, "--method", "ilp", "-o", str(target)],
                 ["solve", inst, "--method", "ilp", "-o", str(tmp_path / "a.json"), "--plot", str(target.with_suffix(".png"))],
                 ["repair", inst, str(placed), "--failed", "0", "-o", str(target)]):
        rc = main(argv)
        out, err = capsys.readouterr()
        _expect_one_line_error(rc, out, err, "cannot write: directory", "does not exist")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["placed.json"]
    rc = main(["generate", "--nodes", "2", "--gpus-per-node", "2", "--jobs", "1", "-o", str(tmp_path)])
    out, err = capsys.readouterr()  # refused by the option's type, before anything is generated
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("pal-opt generate: error: argument -o/--out/--output: ") and f"'{tmp_path}' is a directory" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["placed.json"]


# --------------------------------------------------------------------------- an output over an input
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "data"


@pytest.mark.parametrize(
    "argv,names",
    [
        (["solve", "{inst}", "--method", "packed", "-o", "{inst}"], "--out {inst}: this is the input INSTANCE.json"),
        (["solve", "{inst}", "-o", "{tmp}/./sub/../inst.json"], "this is the input INSTANCE.json"),
        (["solve", "{inst}", "-o", "{tmp}/link.json"], "this is the input INSTANCE.json"),  # a symbolic link to it
        # repair: the placement in force is an input too, refused like any other (write elsewhere, then move)
        (["repair", "{inst}", "{pl}", "--failed", "0", "-o", "{pl}"], "this is the input PLACEMENT.json"),
        (["repair", "{inst}", "{pl}", "--failed", "0", "-o", "{inst}"], "this is the input INSTANCE.json"),
        (["export", "slurm", "{inst}", "{pl}", "-o", "{pl}"], "this is the input PLACEMENT.json"),
        (["export", "graphml", "{inst}", "-o", "{inst}"], "this is the input INSTANCE.json"),
        (["import", "blox", "--gpus", "{gpus}", "--jobs", "{jobs}", "-o", "{jobs}"], "this is the input --jobs"),
        (["import", "blox", "--gpus", "{gpus}", "--jobs", "{jobs}", "-o", "{gpus}"], "this is the input --gpus"),
        (["import", "slurm", "{topo}", "--gpus-per-node", "8", "-o", "{topo}"], "this is the input topology file"),
        (["import", "slurm", "{topo}", "--slurm-conf", "{sconf}", "-o", "{sconf}"], "this is the input --slurm-conf"),
        (["import", "k8s", "{nodes}", "--jobs", "{jobs}", "-o", "{jobs}"], "this is the input --jobs"),
        (["import", "graphml", "{graph}", "-o", "{graph}"], "this is the input topology file"),
        (["generate", "--nodes", "2", "--gpus-per-node", "2", "--jobs", "1", "--measurements", "{tmp}",
          "-o", "{tmp}/bert-longhorn-agg.csv"], "this is the input --measurements"),
        (["simulate", "{trace}", "-o", "{trace}"], "this is the input TRACE"),
        (["simulate", "{trace}", "-o", "{out}", "--jobs-csv", "{trace}"], "--jobs-csv {trace}: this is the input TRACE"),
        (["simulate", "{trace}", "--variability", "classA={meas}", "-o", "{meas}"], "this is the input --variability classA"),
        (["simulate", "{trace}", "--variability", "{tmp}", "-o", "{tmp}/resnet-longhorn-agg.csv"],
         "this is the input --variability"),
        (["simulate", "{trace}", "-o", "{out}", "--jobs-csv", "{out}"], "--jobs-csv {out}: the same file as --out"),
        (["simulate-sia", "{trace}", "--profiles", "{tmp}", "-o", "{trace}"], "this is the input TRACE"),
        (["partition", "{graph}", "--machines", "4", "--bandwidth", "1e9", "-o", "{graph}"], "this is the input PROFILE"),
    ],
)
def test_an_output_over_an_input_is_refused(argv, names, tmp_path, capsys):
    """Every command refuses, before any work, an output that is one of its inputs (it was
    overwritten: ``solve INST -o INST`` replaced the round by its placement)."""
    files = {"inst": "inst.json", "pl": "pl.json", "gpus": "gpus.csv", "jobs": "jobs.csv", "topo": "topology.conf",
             "sconf": "slurm.conf", "nodes": "nodes.json", "graph": "cluster.graphml", "trace": "trace.csv",
             "meas": "resnet-longhorn-agg.csv"}
    (tmp_path / "inst.json").write_text(json.dumps(BASE))
    (tmp_path / "pl.json").write_text('{"placements": {"0": [0, 1]}}')
    (tmp_path / "gpus.csv").write_text(GPU_OK)
    for name in ("jobs.csv", "topology.conf", "slurm.conf", "nodes.json", "cluster.graphml", "trace.csv"):
        (tmp_path / name).write_bytes((EXAMPLES / name).read_bytes())
    for name in ("resnet", "bert", "pagerank"):
        (tmp_path / f"{name}-longhorn-agg.csv").write_text("uuid,perf\na,1\nb,1.2\n")
    (tmp_path / "link.json").symlink_to(tmp_path / "inst.json")
    (tmp_path / "sub").mkdir()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    subs = {k: tmp_path / v for k, v in files.items()} | {"tmp": tmp_path, "out": tmp_path / "o.json"}
    rc = main([a.format(**subs) for a in argv])
    out, err = capsys.readouterr()
    _expect_one_line_error(rc, out, err, "pal-opt: error: ", names.format(**subs), "which it would overwrite"
                           if "the same file" not in names else "give each output its own file")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


@pytest.mark.parametrize(
    "argv,expected",
    [
        # (an empty --down is no node down: what sinfo prints on a healthy cluster, tests/test_topology.py)
        (["import", "k8s", "{nodes}", "--gpu-resource", ""], "argument --gpu-resource: must not be empty, got ''"),
        (["import", "k8s", "{nodes}", "--gpu-resource", " "], "argument --gpu-resource: must not be empty, got ' '"),
        (["import", "slurm", "{topo}", "--gpus-per-node", "8", "--measurements", ""], "argument --measurements: empty file name"),
        (["import", "graphml", "{graph}", "--jobs", ""], "argument --jobs: empty file name"),
        (["import", "graphml", "{graph}", "--name", ""], "argument --name: must not be empty"),
        (["import", "blox", "--gpus", "", "--jobs", "{graph}"], "argument --gpus: empty file name"),
        (["generate", "--nodes", "2", "--gpus-per-node", "2", "--jobs", "1", "--measurements", ""],
         "argument --measurements: empty file name"),
        (["solve", ""], "argument INSTANCE.json: empty file name"),
        (["simulate", ""], "argument trace: empty file name"),
    ],
)
def test_empty_values_are_bad_input(argv, expected, tmp_path, capsys):
    """An empty --down was no node down and an empty --measurements no measurements, silently; an
    empty --gpu-resource said 'no node has capacity' and an empty file name 'is a directory'."""
    subs = {"topo": EXAMPLES / "topology.conf", "nodes": EXAMPLES / "nodes.json", "graph": EXAMPLES / "cluster.graphml"}
    out = tmp_path / "o.json"
    rc = main([a.format(**subs) for a in argv] + ["-o", str(out)])
    stdout, err = capsys.readouterr()
    assert rc == 2 and stdout == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert expected in err and not out.exists()


def test_ids_in_any_script_with_joiners_and_no_break_spaces_are_taken(tmp_path):
    """The rule against control characters refused ordinary text at first: a Persian word needs a
    zero-width non-joiner, emoji sequences a zero-width joiner, and a no-break space is a space."""
    from pal_opt.io import load_instance, save_instance

    doc = copy.deepcopy(BASE)
    ids = ["\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", "job\xa01", "team\U0001F468\u200d\U0001F469"]
    for job, jid in zip(doc["jobs"], ids, strict=True):
        job["id"] = jid
    path = tmp_path / "i.json"
    path.write_text(json.dumps(doc))
    inst = load_instance(path)
    assert [j.id for j in inst.jobs] == ids
    save_instance(inst, tmp_path / "again.json")
    assert [j.id for j in load_instance(tmp_path / "again.json").jobs] == ids


def test_a_repeated_column_no_reader_uses_is_taken(tmp_path, capsys):
    """Only the columns a reader looks up must be named once (a review of this change: "note,note"
    was refused along with "num_gpus,num_gpus")."""
    gp, jp, out = tmp_path / "gpus.csv", tmp_path / "jobs.csv", tmp_path / "i.json"
    gp.write_text(GPU_OK)
    jp.write_text("job_id,num_gpus,model,note,note\n1,1,BERT,a,b\n")
    assert main(["import", "blox", "--gpus", str(gp), "--jobs", str(jp), "-o", str(out)]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("command", ["simulate", "simulate-sia"])
def test_a_utf16_trace_is_named_utf16(command, tmp_path, capsys):
    """The trace readers opened the file as UTF-8 text themselves: "cannot read trace: 'utf-8'
    codec can't decode byte 0xff" (diff review)."""
    trace = tmp_path / "trace.csv"
    trace.write_bytes("job_id,num_gpus,submit_time,duration,model\n1,2,0,100,BERT\n".encode("utf-16"))
    argv = [command, str(trace), "--out", str(tmp_path / "o.json")]
    rc = main(argv + (["--profiles", str(tmp_path)] if command == "simulate-sia" else ["--cluster", "2x2"]))
    out, err = capsys.readouterr()
    _expect_one_line_error(rc, out, err, "trace.csv: trace file is UTF-16 text; pal-opt reads UTF-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.csv"]


def test_measurements_near_the_float_limits(tmp_path):
    """np.median averaged two perf values near the largest float into inf (a numpy warning, then
    "0 times the file's median inf"); a subnormal median overflowed the division the same way."""
    import warnings

    big, tiny = tmp_path / "big.csv", tmp_path / "tiny.csv"
    big.write_text("perf\n1.7e308\n1.6e308\n")
    tiny.write_text("perf\n5e-324\n5e-324\n1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert load_measurements(big).round(6).tolist() == [round(1.7 / 1.65, 6), round(1.6 / 1.65, 6)]
        with pytest.raises(InstanceError, match=r"tiny.csv: line 4, column perf: perf 1 is inf times the file's median"):
            load_measurements(tiny)



@pytest.mark.parametrize("attr", ["factor_classA", "throughput_classA"])
@pytest.mark.parametrize(("value", "shown"), [("NaN", "nan"), ("1" + "0" * 400, "100000000000000000...0000000000000000000")],
                         ids=["nan", "400-digit-long"])
def test_a_graphml_number_past_a_floats_range_is_refused_as_nan_is(attr, value, shown, tmp_path, capsys):
    """A GPU's ``factor_<class>`` or ``throughput_<class>`` declared ``long`` with 400 digits raised
    ``OverflowError`` from ``math.isfinite`` (a traceback); it is refused in the line NaN gets."""
    given = {"factor_classA": ("double", "1.0"), "throughput_classA": ("double", "2.0")}
    given[attr] = ("double" if value == "NaN" else "long", value)
    keys = "".join(f'<key id="{a}" for="node" attr.name="{a}" attr.type="{t}"/>\n' for a, (t, _) in given.items())
    data = "".join(f'<data key="{a}">{v}</data>' for a, (_, v) in given.items())
    src = tmp_path / "c.graphml"
    src.write_text(
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n'
        '<key id="kind" for="node" attr.name="kind" attr.type="string"/>\n'
        '<key id="id" for="node" attr.name="id" attr.type="long"/>\n'
        '<key id="type" for="node" attr.name="type" attr.type="string"/>\n'
        f'{keys}<graph edgedefault="directed">\n'
        '<node id="s"><data key="kind">server</data></node>\n'
        f'<node id="g"><data key="kind">gpu</data><data key="id">0</data><data key="type">A</data>{data}</node>\n'
        '<edge source="s" target="g"/>\n</graph>\n</graphml>\n'
    )
    out_path = tmp_path / "out.json"
    rc = main(["import", "graphml", str(src), "-o", str(out_path)])
    out, err = capsys.readouterr()
    prefix = attr.split("_")[0]
    _expect_one_line_error(rc, out, err, f"{src}: node 'g'.{attr}: must be a finite number > 0 named "
                                         f"{prefix}_<class>, got {shown}")
    assert not out_path.exists()
