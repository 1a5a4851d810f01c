"""``pal-opt simulate TRACE --cluster round.json``: a PAL trace replayed on an instance file's
cluster (its servers, racks and measured factors), deterministic, and bad input as one line with
exit status 2 and nothing written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from pal_opt.cli import main
from pal_opt.io import instance_to_dict, load_instance
from pal_opt.io.traces import read_trace
from pal_opt.model import Cluster, RoundInstance
from pal_opt.simulate import SimConfig, simulate

DATA = Path(__file__).resolve().parents[1] / "examples" / "data"
TRACE = DATA / "trace.csv"
CLASSES = ("classA", "classB", "classC", "classD")


def _cluster_file(path: Path, slow_server: int | None = None, **kw: object) -> Path:
    """Servers of 8, 4, 4 and 8 GPUs in two racks, factors 1.0 but for one slow server."""
    server = [0] * 8 + [1] * 4 + [2] * 4 + [3] * 8
    f = np.ones(len(server))
    if slow_server is not None:
        f[np.asarray(server) == slow_server] = 1.5
    cl = Cluster.from_arrays(range(len(server)), server, {c: f for c in CLASSES},
                             rack_of_server={0: "r0", 1: "r0", 2: "r1", 3: "r1"}, **kw)  # type: ignore[arg-type]
    path.write_text(json.dumps(instance_to_dict(RoundInstance(cl, ()))))
    return path


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str, out: str = "r.json") -> tuple[int, str, Path]:
    target = tmp_path / out
    rc = main(["simulate", str(TRACE), "-o", str(target), "--quiet", *args])
    return rc, capsys.readouterr().err, target


def test_the_trace_runs_on_the_file_s_cluster(tmp_path, capsys):
    cluster_file = _cluster_file(tmp_path / "c.json", slow_server=3)
    rc, err, out = _run(tmp_path, capsys, "--cluster", str(cluster_file), "--policy", "pal")
    assert rc == 0, err
    doc = json.loads(out.read_text())
    assert doc["num_gpus"] == 24 and doc["config"]["cluster"] == str(cluster_file)
    assert doc["config"]["variability_source"]["kind"] == "cluster file"
    # the same as the API on that cluster: the file's servers, racks and factors are what ran
    cluster = load_instance(cluster_file).cluster
    api = simulate(read_trace(TRACE), cluster, SimConfig(policy="pal"))
    assert doc["avg_jct"] == pytest.approx(api.summary["avg_jct"])
    assert "warning" not in err  # the factors are the file's: no default source to warn about


def test_the_file_s_factors_are_used_and_the_run_is_deterministic(tmp_path, capsys):
    slow = _cluster_file(tmp_path / "slow.json", slow_server=0)
    even = _cluster_file(tmp_path / "even.json")
    runs = [json.loads(_run(tmp_path, capsys, "--cluster", str(f), "--policy", "packed", out=f"{f.stem}{i}.json")[2]
                       .read_text()) for f in (slow, slow, even) for i in (0,)]
    assert runs[0]["avg_jct"] == runs[1]["avg_jct"] and runs[0]["job_results"] == runs[1]["job_results"]
    assert runs[0]["avg_jct"] > runs[2]["avg_jct"]  # a server 1.5x slower shows in the JCT


def test_busy_and_failed_gpus_of_the_file_start_free(tmp_path, capsys):
    held = _cluster_file(tmp_path / "held.json", state=[1] * 4 + [2] * 4 + [0] * 16)
    free = _cluster_file(tmp_path / "free.json")
    a = json.loads(_run(tmp_path, capsys, "--cluster", str(held), out="a.json")[2].read_text())
    b = json.loads(_run(tmp_path, capsys, "--cluster", str(free), out="b.json")[2].read_text())
    assert a["job_results"] == b["job_results"]


@pytest.mark.parametrize("case, message", [
    ("missing", "{f}: --cluster: no such file"),
    ("typed", "{f}: cluster.gpus.type: a cluster of GPU types (a, b): a PAL trace runs on one GPU type (a sia "
              "trace takes --cluster TYPE:SERVERSxGPUS,...)"),
    ("classes", "{f}: cluster.factors: no factors for class 'classB', which jobs of the trace have (the file has "
                "classA, classC, classD)"),
    ("variability", "--synthetic-variability draws factors for a synthetic cluster; --cluster {f} brings its own "
                    "(its cluster.factors)"),
    ("overwrite", "--out {f}: this is the input --cluster ({f}), which it would overwrite; write to another file"),
])
def test_bad_cluster_files_are_one_line(tmp_path, capsys, case, message):
    f = tmp_path / "c.json"
    extra: list[str] = []
    if case == "typed":
        _cluster_file(f, gpu_types=["a"] * 12 + ["b"] * 12)
    elif case == "classes":
        doc = json.loads(_cluster_file(f).read_text())
        del doc["cluster"]["factors"]["classB"]
        f.write_text(json.dumps(doc))
    elif case != "missing":
        _cluster_file(f)
    if case == "variability":
        extra = ["--synthetic-variability", "3"]
    before = f.read_bytes() if f.exists() else None
    out = "c.json" if case == "overwrite" else "r.json"
    rc, err, target = _run(tmp_path, capsys, "--cluster", str(f), *extra, out=out)
    assert rc == 2
    assert err.strip() == "pal-opt: error: " + message.format(f=f)
    assert (f.read_bytes() if f.exists() else None) == before
    if case != "overwrite":
        assert not target.exists()


def test_a_sia_trace_takes_no_cluster_file(tmp_path, capsys):
    f = _cluster_file(tmp_path / "c.json")
    out = tmp_path / "r.json"
    rc = main(["simulate", str(DATA / "newtrace-mini.csv"), "--profiles", str(tmp_path), "--cluster", str(f),
               "-o", str(out)])
    assert rc == 2 and not out.exists()
    assert "an instance file is a cluster for a pal trace" in capsys.readouterr().err


def test_a_cluster_of_one_named_type_runs_as_untyped(tmp_path, capsys):
    named = _cluster_file(tmp_path / "a100.json", slow_server=1, gpu_types=["a100"] * 24)
    plain = _cluster_file(tmp_path / "plain.json", slow_server=1)
    a = json.loads(_run(tmp_path, capsys, "--cluster", str(named), out="a.json")[2].read_text())
    b = json.loads(_run(tmp_path, capsys, "--cluster", str(plain), out="b.json")[2].read_text())
    assert a["job_results"] == b["job_results"] and a["config"]["variability_draw"] is None


def test_a_shape_stays_a_shape_where_a_file_has_its_name(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _cluster_file(tmp_path / "4x4")  # 24 GPUs, not 16
    rc, err, out = _run(tmp_path, capsys, "--cluster", "4x4", "--synthetic-variability", "0")
    assert rc == 0, err
    doc = json.loads(out.read_text())
    assert doc["num_gpus"] == 16 and doc["config"]["cluster"] == "4x4"


@pytest.mark.skipif(not Path("/dev/fd").is_dir(), reason="no /dev/fd")
def test_a_pipe_or_a_directory_is_a_cluster_file_not_a_bad_shape(tmp_path, capsys):
    """``--cluster <(cat round.json)`` and ``--cluster somedir`` were ``--cluster must look like
    16x4 or 4x4x4``: only a regular file counted as one.  The pipe is read, and the directory
    said to be one."""
    r, w = os.pipe()
    os.write(w, _cluster_file(tmp_path / "c.json").read_bytes())  # a few kB: within the pipe's buffer
    os.close(w)
    try:
        rc, err, out = _run(tmp_path, capsys, "--cluster", f"/dev/fd/{r}", "--policy", "pal")
    finally:
        os.close(r)
    assert rc == 0, err
    assert json.loads(out.read_text())["num_gpus"] == 24
    (tmp_path / "racks.csv").mkdir()
    rc, err, out = _run(tmp_path, capsys, "--cluster", str(tmp_path / "racks.csv"), out="d.json")
    assert rc == 2 and not out.exists()
    assert err == f"pal-opt: error: {tmp_path / 'racks.csv'}: is a directory, expected an instance file\n"


def test_a_topology_file_names_the_import_that_converts_it(tmp_path, capsys):
    graphml = DATA / "cluster.graphml"
    rc, err, out = _run(tmp_path, capsys, "--cluster", str(graphml))
    assert rc == 2 and not out.exists()
    assert err.strip() == (f"pal-opt: error: --cluster {graphml}: simulate takes an instance file (*.json); convert "
                           f"this one first: pal-opt import graphml {graphml} -o cluster.json")
    nodes = DATA / "nodes.json"
    rc, err, out = _run(tmp_path, capsys, "--cluster", str(nodes))
    assert rc == 2 and not out.exists()
    assert err.strip() == (f"pal-opt: error: --cluster {nodes}: a Kubernetes node list; convert it first: "
                           f"pal-opt import k8s {nodes} -o cluster.json")


@pytest.mark.skipif(not Path("/dev/fd").is_dir(), reason="no /dev/fd")
@pytest.mark.parametrize("command", ["simulate", "solve"])
def test_a_node_list_through_a_pipe_names_the_import_too(tmp_path, capsys, command):
    """``--cluster <(cat nodes.json)`` was ``/dev/fd/63: format: is required``: the node list was
    recognised by reading the file again, which a pipe does not allow.  ``solve nodes.json``
    said the same of a regular file."""
    r, w = os.pipe()
    os.write(w, (DATA / "nodes.json").read_bytes())  # 17.5 kB: within the pipe's buffer
    os.close(w)
    try:
        if command == "simulate":
            rc, err, out = _run(tmp_path, capsys, "--cluster", f"/dev/fd/{r}")
            hint = f"pal-opt: error: --cluster /dev/fd/{r}: a Kubernetes node list; convert it first: "
        else:
            rc, err = main(["solve", f"/dev/fd/{r}"]), capsys.readouterr().err
            hint = (f"pal-opt: error: /dev/fd/{r}: a Kubernetes node list (kubectl get nodes -o json), not an "
                    "instance file; convert it first: ")
    finally:
        os.close(r)
    assert rc == 2
    assert err.strip() == f"{hint}pal-opt import k8s /dev/fd/{r} -o cluster.json"


def test_the_failure_log_names_servers_by_their_ids(tmp_path, capsys):
    f = tmp_path / "named.json"
    server = ["nodeA"] * 8 + ["nodeB"] * 4 + ["nodeC"] * 4 + ["nodeD"] * 8
    cl = Cluster.from_arrays(range(24), server, {c: np.ones(24) for c in CLASSES})
    f.write_text(json.dumps(instance_to_dict(RoundInstance(cl, ()))))
    rc, err, out = _run(tmp_path, capsys, "--cluster", str(f), "--failures", "--failure-scale", "2000")
    assert rc == 0, err
    log = json.loads(out.read_text())["failure_log"]
    assert {e["kind"] for e in log} == {"gpu", "server"}
    for e in log:
        if e["kind"] == "server":
            assert e["server"] == ["nodeA", "nodeB", "nodeC", "nodeD"][e["component"]]
        else:
            assert e["server"] == server[e["component"]]
