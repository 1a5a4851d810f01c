"""Large inputs: a 16,384-GPU round round-trips and PAL's placement passes the checker; oversized
and pathological files are rejected quickly with bounded memory.

Timings of the 16k round are in ``benchmarks/large_instance.py`` (not asserted here).  Memory is
measured in a child process: it imports pal-opt once, then forks one grandchild per file, whose
``ru_maxrss`` (peak resident set) starts at the size of the process it was forked from, so the
growth is what reading that one file cost.  Limits are documented in ``docs/limits.md``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pal_opt.check import check
from pal_opt.cli import main
from pal_opt.errors import InstanceError
from pal_opt.generate import generate_instance
from pal_opt.io import instance_to_dict, load_instance, save_instance
from pal_opt.io.safe import DEFAULT_MAX_BYTES, DEFAULT_MAX_CELLS, DEFAULT_MAX_DEPTH, DEFAULT_MAX_VALUES
from pal_opt.solve import solve

MB = 1024 * 1024


# =========================================================================== the 16k round
def test_16k_gpu_round_round_trips_and_pal_is_valid(tmp_path):
    inst = generate_instance(2048, 8, 4800, racks=16, seed=7, busy_fraction=0.1, failed_fraction=0.01,
                             running_fraction=0.3)
    assert inst.cluster.num_gpus == 16_384
    p = tmp_path / "large.json"
    save_instance(inst, p)
    # far inside the limits
    assert p.stat().st_size * 50 < DEFAULT_MAX_BYTES
    assert p.read_text().count(",") * 10 < DEFAULT_MAX_VALUES
    back = load_instance(p)
    assert instance_to_dict(back) == instance_to_dict(inst)
    for c, v in inst.cluster.factors.items():
        assert np.array_equal(back.cluster.factors[c], v)  # bit for bit
    r = solve(back, "pal")
    assert r.jobs_placed > 1000
    assert check(back, r) == []
    assert check(back, json.loads(r.to_json())) == []  # as the CLI writes it


# =========================================================================== pathological files
_CHILD = textwrap.dedent(
    """
    import json, os, resource, sys, time
    from pal_opt.errors import PalOptError
    from pal_opt.io import load_instance
    from pal_opt.io.blox import load_blox
    from pal_opt.io.traces import read_trace

    def rss_mb():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    for kind, path in json.loads(sys.argv[1]):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            base = rss_mb()
            t0 = time.perf_counter()
            try:
                if kind == "instance":
                    load_instance(path)
                elif kind == "trace":
                    read_trace(path)
                else:
                    load_blox(path, path)
                err = None
            except PalOptError as exc:
                err = [type(exc).__name__, str(exc)]
            except BaseException as exc:  # reported, so the test fails with it
                err = ["UNEXPECTED " + type(exc).__name__, str(exc)[:300]]
            out = {"path": path, "seconds": time.perf_counter() - t0, "base_mb": base, "peak_mb": rss_mb(),
                   "error": err}
            os.write(w, json.dumps(out).encode())
            os._exit(0)
        os.close(w)
        chunks = []
        while True:
            b = os.read(r, 65536)
            if not b:
                break
            chunks.append(b)
        os.waitpid(pid, 0)
        print(b"".join(chunks).decode(), flush=True)
    """
)


def _write_cases(d: Path, size: int) -> dict[str, tuple[str, Path, str]]:
    """name -> (reader kind, file, expected message fragment)."""
    cases: dict[str, tuple[str, Path, str]] = {}

    def add(name: str, kind: str, fragment: str, parts: list[bytes], repeat: bytes = b"", tail: bytes = b"") -> None:
        p = d / f"{name}.{'json' if kind == 'instance' else 'csv'}"
        with open(p, "wb") as fh:
            for part in parts:
                fh.write(part)
            if repeat:
                n = max(0, size - sum(map(len, parts)) - len(tail)) // len(repeat)
                chunk = repeat * (MB // len(repeat))
                for _ in range(n // (MB // len(repeat))):
                    fh.write(chunk)
                fh.write(repeat * (n % (MB // len(repeat))))
            fh.write(tail)
        cases[name] = (kind, p, fragment)

    sparse = d / "over-limit.json"
    with open(sparse, "wb") as fh:
        fh.truncate(300 * MB)  # sparse: no disk, no time
    cases["over-limit"] = ("instance", sparse, "larger than the limit")
    add("deep-nesting", "instance", "nesting deeper than", [], b"[")
    add("huge-integer", "instance", "jobs[0].demand: must be a positive integer, got 999",
        [b'{"format": "pal-opt/instance", "version": 1, "cluster": {"gpus": {"id": [0], "server": [0]}, '
         b'"factors": {"classA": [1.0]}}, "jobs": [{"id": 0, "class": "classA", "demand": '], b"9", b"}]}")
    add("huge-float", "instance", "must be a positive integer",
        [b'{"format": "pal-opt/instance", "version": 1, "cluster": {"gpus": {"id": [0], "server": [0]}, '
         b'"factors": {"classA": [1.0]}}, "jobs": [{"id": 0, "class": "classA", "demand": 1.'], b"5", b"}]}")
    add("many-values", "instance", "more than the limit of", [b'{"meta": ['], b"1.5,", b"1]}")
    add("huge-string", "instance", "format: is required", [b'{"meta": "'], "\U0001f600".encode(), b'"}')
    # ASCII with one character outside the BMP: Python stores the whole text at 4 bytes/character
    add("ascii-and-emoji", "instance", "format: is required", ['{"meta": "\U0001f600'.encode()], b"a", b'"}')
    add("csv-many-cells", "trace", "more than the limit of", [b"job_id,num_gpus,submit_time,duration,model\n"],
        b"1,1,1,1,x\n")
    add("csv-huge-cell", "blox", "malformed CSV", [b"GPU_ID,Node_ID\n0,"], b"7", b"\n")
    add("csv-one-column", "trace", "more than the limit of", [b"job_id\n"], b"1\r")
    return cases


def _measure(cases: dict[str, tuple[str, Path, str]]) -> dict[str, dict]:
    arg = json.dumps([[kind, str(p)] for kind, p, _ in cases.values()])
    r = subprocess.run([sys.executable, "-c", _CHILD, arg], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    by_path = {row["path"]: row for row in rows}
    return {name: by_path[str(p)] for name, (_, p, _) in cases.items()}


@pytest.fixture(scope="module")
def pathological(tmp_path_factory) -> tuple[dict, dict, int]:
    d = tmp_path_factory.mktemp("pathological")
    size = 24 * MB
    cases = _write_cases(d, size)
    return cases, _measure(cases), size


@pytest.mark.parametrize("name", ["over-limit", "deep-nesting", "huge-integer", "huge-float", "many-values",
                                  "huge-string", "ascii-and-emoji", "csv-many-cells", "csv-huge-cell",
                                  "csv-one-column"])
def test_pathological_file_is_rejected_quickly_with_bounded_memory(pathological, name):
    cases, results, size = pathological
    kind, path, fragment = cases[name]
    res = results[name]
    assert res["error"] is not None, f"{name} was accepted"
    etype, msg = res["error"]
    assert etype == "InstanceError", res["error"]
    assert msg.startswith(str(path)) and fragment in msg, msg
    assert len(msg) < 1000
    grew = res["peak_mb"] - res["base_mb"]
    file_mb = path.stat().st_size / MB
    if name == "over-limit":
        assert grew < 20, f"{grew:.0f} MB to reject a file by its size"
        assert res["seconds"] < 0.5
    else:
        # the bytes, the decoded text (up to 4 bytes per character) and, for one huge JSON string,
        # its parsed copy: at most about 8 times the file, whatever its shape
        assert grew < 8 * file_mb + 64, f"{grew:.0f} MB for a {file_mb:.0f} MB file"
        assert res["seconds"] < 20, f"{res['seconds']:.1f} s"


def test_limits_are_the_documented_ones():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "limits.md").read_text()
    for value in (f"{DEFAULT_MAX_BYTES:,}", f"{DEFAULT_MAX_DEPTH}", f"{DEFAULT_MAX_VALUES:,}",
                  f"{DEFAULT_MAX_CELLS:,}"):
        assert value in doc, value


def test_cli_rejects_an_oversized_file_in_one_line(tmp_path, capsys):
    p = tmp_path / "big.json"
    with open(p, "wb") as fh:
        fh.truncate(DEFAULT_MAX_BYTES + 1)
    out = tmp_path / "pl.json"
    rc = main(["solve", str(p), "--out", str(out)])
    o, e = capsys.readouterr()
    assert rc == 2 and o == "" and e.count("\n") == 1
    assert f"instance file is {DEFAULT_MAX_BYTES + 1:,} bytes, larger than the limit" in e
    assert not out.exists()


def test_explicit_smaller_limit(tmp_path):
    p = tmp_path / "i.json"
    save_instance(generate_instance(4, 4, 4, seed=0), p)
    with pytest.raises(InstanceError, match="larger than the limit of 100 bytes"):
        load_instance(p, max_bytes=100)
