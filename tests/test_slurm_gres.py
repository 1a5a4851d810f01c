"""Slurm import: GPU types from ``Gres=gpu:TYPE:N``, ``gres.conf`` (``--gres-conf``) and ``Include`` lines.

Every GPU node typed gives a typed cluster, none an untyped one, some of each one error line
naming a node of each kind; a node may hold two types.  ``gres.conf`` counts ``File=`` device
ranges, ``Count=``, lines without ``NodeName`` (every node) and several lines per node, and wins
over ``slurm.conf``; ``AutoDetect`` cannot be read offline.  ``Include`` works in all three files,
relative to the including file, with globs, a depth limit, cycle detection and one size limit for
the lot.  Bad input through the CLI: exit 2, one line, nothing written.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from pal_opt.cli import main
from pal_opt.errors import InstanceError
from pal_opt.io import load_instance, load_placement_file
from pal_opt.topology import (
    load_slurm,
    parse_gres_conf,
    parse_slurm_conf_gres,
    parse_topology_conf,
    to_cluster,
)

DATA = Path(__file__).resolve().parents[1] / "examples" / "data"
TOPOLOGY_CONF = DATA / "topology.conf"
SLURM_CONF = DATA / "slurm.conf"
GRES_CONF = DATA / "gres.conf"
TWO_NODES = "SwitchName=s0 Nodes=n[1-2]\n"


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def run(capsys, *argv: object) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def types_by_node(topo) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for host, gpu_type in zip(topo.gpu_host.tolist(), topo.gpu_types, strict=True):
        out.setdefault(topo.hosts[host], []).append(gpu_type)
    return out


# --------------------------------------------------------------------------- GPU types
def test_example_slurm_conf_gives_a_typed_cluster():
    topo = load_slurm(TOPOLOGY_CONF, slurm_conf=SLURM_CONF)
    cl = to_cluster(topo)
    assert cl.type_names == ("a100", "h100") and cl.type_counts.tolist() == [32, 28]
    assert {cl.server_ids[s] for s in cl.server_of[cl.type_of == 1].tolist()} == {f"gpu0{i}" for i in range(5, 9)}


def test_slurm_conf_types_every_node_or_none():
    assert parse_slurm_conf_gres("NodeName=n1 Gres=gpu:a100:4,nic:1\nNodeName=n2 Gres=gpu:4(S:0-1)\n"
                                 "NodeName=n3 Gres=gpu:v100\nNodeName=n4 Gres=gpu:tesla:no_consume:2\n") == {
        "n1": {"a100": 4}, "n2": {None: 4}, "n3": {"v100": 1}, "n4": {"tesla": 2}}


def test_untyped_gres_gives_an_untyped_cluster(tmp_path):
    topo = tmp_path / "t.conf"
    topo.write_text(TWO_NODES)
    untyped = load_slurm(topo, slurm_conf=write(tmp_path, "s.conf", "NodeName=n[1-2] Gres=gpu:4\n"))
    assert untyped.gpu_types is None and not to_cluster(untyped).typed
    typed = load_slurm(topo, slurm_conf=write(tmp_path, "s2.conf", "NodeName=n[1-2] Gres=gpu:a100:4\n"))
    assert to_cluster(typed).type_names == ("a100",)


def test_a_node_may_hold_two_gpu_types(tmp_path):
    """The model keeps a type per GPU (rows per server and type in the program): a node of two
    types is read, its GPUs in the order the types are written."""
    topo = write(tmp_path, "t.conf", TWO_NODES)
    conf = write(tmp_path, "s.conf", "NodeName=n1 Gres=gpu:a100:2,gpu:v100:3\nNodeName=n2 Gres=gpu:v100:1\n")
    t = load_slurm(topo, slurm_conf=conf, down="n1")
    assert types_by_node(t) == {"n1": ["a100", "a100", "v100", "v100", "v100"], "n2": ["v100"]}
    cl = to_cluster(t)
    assert cl.type_names == ("a100", "v100") and cl.type_counts.tolist() == [2, 4]
    assert int((cl.state == 2).sum()) == 5


@pytest.mark.parametrize(("slurm", "extra", "where", "what"), [
    ("NodeName=n1 Gres=gpu:a100:4\nNodeName=n2 Gres=gpu:4\n", {}, "s.conf: line 2, Gres",
     "node 'n2' has GPUs without a type (line 2) but node 'n1' has type 'a100' (line 1)"),
    ("NodeName=n1 Gres=gpu:4\nNodeName=n2 Gres=gpu:h100:4\n", {}, "s.conf: line 1, Gres",
     "node 'n1' has GPUs without a type (line 1) but node 'n2' has type 'h100' (line 2)"),
    ("NodeName=n1 Gres=gpu:a100:4,gpu:2\n", {"gpus_per_node": 2}, "s.conf: line 1, Gres",
     "node 'n1' has GPUs without a type (line 1) and of type 'a100' (line 1)"),
    ("NodeName=n1 Gres=gpu:a100:4\n", {"gpus_per_node": 2}, "s.conf: line 1, Gres",
     "node 'n2' has GPUs without a type (--gpus-per-node) but node 'n1' has type 'a100' (line 1)"),
])
def test_gpu_nodes_with_and_without_a_type_are_an_error(tmp_path, slurm, extra, where, what):
    conf = write(tmp_path, "s.conf", slurm)
    with pytest.raises(InstanceError) as exc:
        load_slurm(write(tmp_path, "t.conf", TWO_NODES), slurm_conf=conf, **extra)
    assert str(exc.value).startswith(f"{tmp_path}/{where}: ")
    assert exc.value.message.startswith(what) and "pal-opt types every GPU node or none" in exc.value.message


def test_bad_gpu_gres_entry_names_the_line(tmp_path):
    for bad in ("gpu:a:b:4", "gpu:a100:x", "gpu::4"):
        with pytest.raises(InstanceError, match=r"line 2, Gres: bad GPU entry"):
            parse_slurm_conf_gres(f"NodeName=n1 Gres=gpu:1\nNodeName=n2 Gres={bad}\n", "s.conf")



def test_continuation_lines_join_with_nothing_in_between_as_slurm_joins_them():
    # Slurm's _get_next_line drops the backslash and appends the next line as it is: a GRES list
    # or a hostlist may be cut anywhere.  An escaped "#" is not a comment.
    text = ("NodeName=n[1-\\\n2] Gres=gpu:a100:4,\\\ngpu:v100:2   \\  \r\n"
            "  Feature=a\\#b # comment \\\nNodeName=n3 Gres=gpu:t4:1\n")
    assert parse_slurm_conf_gres(text, "s.conf") == {"n1": {"a100": 4, "v100": 2}, "n2": {"a100": 4, "v100": 2},
                                                       "n3": {"t4": 1}}
    assert parse_topology_conf("SwitchName=s0 Nodes=n[1-\\\n2]").hosts == ("n1", "n2")

# --------------------------------------------------------------------------- gres.conf
GRES_TEXT = """\
# comment line
AutoDetect=off
NodeName=n[1-2] Name=gpu Type=a100 File=/dev/nvidia[0-3]   # four devices
nodename = n2  NAME = "gpu" type = a100 file = /dev/nvidia4,/dev/nvidia5
NodeName=n3 Name=gpu Type=v100 Count=2 \\
    Cores=0-3
Name=mps Count=200
NodeName=n4 Name=gpu Type=t4 MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/cap1
Name=gpu Type=t4 Count=1
"""


def test_gres_conf_counts_devices_per_node_and_type():
    got = parse_gres_conf(GRES_TEXT, "g.conf", nodes=["n1", "n2", "n3", "n4", "n5"])
    assert got == {"n1": {"a100": 4, "t4": 1}, "n2": {"a100": 6, "t4": 1}, "n3": {"v100": 2, "t4": 1},
                   "n4": {"t4": 2}, "n5": {"t4": 1}}
    assert parse_gres_conf("NodeName=a Name=gpu File=/dev/nvidia[0-7]\nNodeName=b Name=GPU Count=1k\n"
                           "NodeName=c Name=gpu\n") == {"a": {None: 8}, "b": {None: 1024}, "c": {None: 1}}


def test_gres_conf_example_matches_the_slurm_conf_example():
    by_gres = load_slurm(TOPOLOGY_CONF, gres_conf=GRES_CONF)
    by_slurm = load_slurm(TOPOLOGY_CONF, slurm_conf=SLURM_CONF)
    assert by_gres.gpu_types == by_slurm.gpu_types and len(by_gres.gpu_ids) == 60
    assert load_slurm(TOPOLOGY_CONF, slurm_conf=SLURM_CONF, gres_conf=GRES_CONF).notes == ()



def test_type_names_differing_in_case_only_are_not_a_disagreement(tmp_path):
    # Slurm matches gres.conf's Type to slurm.conf's Gres type ignoring case (gres.c,
    # _compare_conf_counts): no warning; the gres.conf's spelling is the one kept
    topo = write(tmp_path, "t.conf", TWO_NODES)
    slurm = write(tmp_path, "s.conf", "NodeName=n[1-2] Gres=gpu:a100:4\n")
    gres = write(tmp_path, "g.conf", "NodeName=n[1-2] Name=gpu Type=A100 File=/dev/nvidia[0-3]\n")
    t = load_slurm(topo, slurm_conf=slurm, gres_conf=gres)
    assert t.notes == () and set(t.gpu_types) == {"A100"}
    other = write(tmp_path, "o.conf", "NodeName=n[1-2] Name=gpu Type=A100 File=/dev/nvidia[0-2]\n")
    assert len(load_slurm(topo, slurm_conf=slurm, gres_conf=other).notes) == 1

def test_gres_conf_wins_over_slurm_conf_which_wins_over_gpus_per_node(tmp_path, caplog):
    topo = write(tmp_path, "t.conf", "SwitchName=s0 Nodes=n[1-3]\n")
    slurm = write(tmp_path, "s.conf", "NodeName=n[1-2] Gres=gpu:8\n")
    gres = write(tmp_path, "g.conf", "NodeName=n1 Name=gpu File=/dev/nvidia[0-3]\n")
    t = load_slurm(topo, slurm_conf=slurm, gres_conf=gres, gpus_per_node=2)
    assert {h: t.gpu_host.tolist().count(i) for i, h in enumerate(t.hosts)} == {"n1": 4, "n2": 8, "n3": 2}
    assert len(t.notes) == 1 and "n1 (4 untyped in" in t.notes[0] and "8 untyped in" in t.notes[0]
    with caplog.at_level(logging.WARNING, logger="pal_opt.topology"):
        to_cluster(t)
    assert any("the gres.conf's taken" in r.getMessage() for r in caplog.records)


def test_gres_conf_types_and_a_node_of_two_types(tmp_path):
    topo = write(tmp_path, "t.conf", TWO_NODES)
    gres = write(tmp_path, "g.conf", "NodeName=n1 Name=gpu Type=a100 File=/dev/nvidia[0-1]\n"
                 "NodeName=n1 Name=gpu Type=v100 File=/dev/nvidia[2-3]\nNodeName=n2 Name=gpu Type=v100 Count=1\n")
    assert types_by_node(load_slurm(topo, gres_conf=gres)) == {"n1": ["a100", "a100", "v100", "v100"], "n2": ["v100"]}
    mixed = write(tmp_path, "m.conf", "NodeName=n1 Name=gpu Type=a100 Count=2\nNodeName=n2 Name=gpu Count=2\n")
    with pytest.raises(InstanceError, match=r"m\.conf: line 2, Type: node 'n2' has GPUs without a type"):
        load_slurm(topo, gres_conf=mixed)


GRES_BAD = [
    ("NodeName=n1 Name=gpu File=/dev/nvidia[0-3] Count=8\n", "line 1, Count", "Count=8 but File= names 4"),
    ("NodeName=n1 Name=gpu File=/dev/nvidia0 MultipleFiles=/dev/nvidia1\n", "line 1, MultipleFiles",
     "mutually exclusive"),
    ("Name=gpu File=/dev/nvidia[0-1]\nNodeName=n2 Name=gpu File=/dev/nvidia1\n", "line 2, File",
     "device /dev/nvidia1 of node 'n2' is given twice (also on line 1)"),
    ("NodeName=n1 Name=gpu Count=lots\n", "line 1, Count", "Count must be a whole number"),
    # a whole number all the same, only too long: "must be a whole number" misled
    ("NodeName=n1 Name=gpu Count=9999999999999\n", "line 1, Count",
     "Count must be a whole number of at most 12 digits (K, M, G, T, P suffixes allowed), got '9999999999999'"),
    ("AutoDetect=cuda\n", "line 1, AutoDetect", "unknown AutoDetect value 'cuda'"),
    ("NodeName=n1 Type=a100 Count=2\n", "line 1", "expected a Name= (GRES) or AutoDetect= line"),
    ("NodeName=n1 Name=gpu Type=a Type=b\n", "line 1, Type", "Type given twice"),
    ("NodeName=n[1- Name=gpu\n", "line 1, NodeName", "unclosed"),
    ("NodeName=n1 Name=gpu File=/dev/nvidia[3-0]\n", "line 1, File", "runs backwards"),
    ("NodeName=n1 Name=gpu Type=\"a100\n", "line 1", "bad quoting"),
    ("AutoDetect=nvml\n", "line 1, AutoDetect",
     "AutoDetect=nvml: slurmd finds the GPUs of 2 nodes (n1 and 1 more) at run time"),
]


@pytest.mark.parametrize(("text", "where", "what"), GRES_BAD, ids=[w for _, _, w in GRES_BAD])
def test_gres_conf_errors_name_file_line_and_field(tmp_path, text, where, what):
    gres = write(tmp_path, "g.conf", text)
    with pytest.raises(InstanceError) as exc:
        load_slurm(write(tmp_path, "t.conf", TWO_NODES), gres_conf=gres)
    assert str(exc.value).startswith(f"{gres}: {where}: ") and what in exc.value.message, str(exc.value)


def test_autodetect_takes_counts_from_elsewhere_or_warns(tmp_path):
    topo = write(tmp_path, "t.conf", TWO_NODES)
    gres = write(tmp_path, "g.conf", "AutoDetect=nvml\nNodeName=n1 Name=gpu Type=a100 File=/dev/nvidia[0-3]\n")
    # n2's count from the slurm.conf: nothing to say
    t = load_slurm(topo, gres_conf=gres, slurm_conf=write(tmp_path, "s.conf", "NodeName=n2 Gres=gpu:a100:8\n"))
    assert len(t.gpu_ids) == 12 and t.notes == ()
    # from nowhere: n2 is taken as without GPUs, with a warning naming the AutoDetect line
    t = load_slurm(topo, gres_conf=gres)
    assert t.hosts == ("n1",) and len(t.notes) == 1
    assert t.notes[0].startswith(f"{gres} line 1: AutoDetect=nvml: slurmd finds the GPUs of 1 node (n2) at run time")
    # a node's own AutoDetect=off (or none at all) means no detection: no warning
    off = write(tmp_path, "off.conf", "AutoDetect=nvml\nNodeName=n2 AutoDetect=off\n"
                "NodeName=n1 Name=gpu Type=a100 Count=4\n")
    assert load_slurm(topo, gres_conf=off).notes == ()


# --------------------------------------------------------------------------- Include
def test_include_in_all_three_files(tmp_path, monkeypatch):
    conf = tmp_path / "etc"
    topo = write(conf, "topology.conf", "Include leaves.conf\nSwitchName=top Switches=leaf[1-2]\n")
    write(conf, "leaves.conf", "SwitchName=leaf1 Nodes=n[1-2]\ninclude   \"sub/leaf2.conf\"\n")
    write(conf, "sub/leaf2.conf", "SwitchName=leaf2 Nodes=n[3-4]\n")
    slurm = write(conf, "slurm.conf", "ClusterName=c\nINCLUDE nodes.d/*.conf\n")
    write(conf, "nodes.d/10-a.conf", "NodeName=n[1-2] Gres=gpu:a100:4\n")
    write(conf, "nodes.d/20-b.conf", "NodeName=n3 Gres=gpu:h100:8\n")
    write(conf, "nodes.d/empty.conf", "")
    gres = write(conf, "gres.conf", "Include gres.d/n4.conf\n")
    write(conf, "gres.d/n4.conf", "NodeName=n4 Name=gpu Type=h100 File=/dev/nvidia[0-1]\n")
    monkeypatch.chdir(tmp_path)  # relative names are taken from the including file, not the working directory
    t = load_slurm(topo, slurm_conf=slurm, gres_conf=gres)
    assert t.hosts == ("n1", "n2", "n3", "n4") and len(t.levels) == 2
    assert types_by_node(t) == {"n1": ["a100"] * 4, "n2": ["a100"] * 4, "n3": ["h100"] * 8, "n4": ["h100"] * 2}


@pytest.mark.parametrize("target", ["leaves.conf", "sub/leaf2.conf", "nodes.d/10-a.conf", "gres.d/n4.conf"])
def test_import_refuses_to_overwrite_a_file_the_configuration_includes(tmp_path, capsys, target):
    conf = tmp_path / "etc"
    topo = write(conf, "topology.conf", "Include leaves.conf\nSwitchName=top Switches=leaf[1-2]\n")
    write(conf, "leaves.conf", "SwitchName=leaf1 Nodes=n[1-2]\nInclude sub/leaf2.conf\n")
    write(conf, "sub/leaf2.conf", "SwitchName=leaf2 Nodes=n[3-4]\n")
    slurm = write(conf, "slurm.conf", "INCLUDE nodes.d/*.conf\n")
    write(conf, "nodes.d/10-a.conf", "NodeName=n[1-3] Gres=gpu:a100:4\n")
    gres = write(conf, "gres.conf", "Include gres.d/n4.conf\n")
    write(conf, "gres.d/n4.conf", "NodeName=n4 Name=gpu Type=a100 File=/dev/nvidia[0-1]\n")
    before = {p: p.read_bytes() for p in conf.rglob("*.conf")}
    rc, out, err = run(capsys, "import", "slurm", topo, "--slurm-conf", slurm, "--gres-conf", gres,
                       "--out", conf / target)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "which it would overwrite" in err and target.split("/")[-1] in err
    assert {p: p.read_bytes() for p in conf.rglob("*.conf")} == before
    rc, out, _ = run(capsys, "import", "slurm", topo, "--slurm-conf", slurm, "--gres-conf", gres,
                     "--out", tmp_path / "round.json")
    assert rc == 0 and load_instance(tmp_path / "round.json").cluster.num_gpus == 14


def test_errors_in_an_included_file_name_that_file(tmp_path):
    topo = write(tmp_path, "t.conf", "SwitchName=s0 Nodes=n1\nInclude more.conf\n")
    more = write(tmp_path, "more.conf", "\nSwitchName=s0 Nodes=n2\n")
    with pytest.raises(InstanceError) as exc:
        parse_topology_conf(topo.read_text(), str(topo))
    assert str(exc.value) == f"{more}: line 2: 's0' is defined twice (first on line 1 of {topo})"
    slurm = write(tmp_path, "s.conf", "Include nodes.conf\nNodeName=n1 Gres=gpu:2\n")
    nodes = write(tmp_path, "nodes.conf", "NodeName=n1 Gres=gpu:4\n")
    with pytest.raises(InstanceError, match=re.escape(f"{slurm}: line 2, NodeName: node 'n1' is defined twice "
                                                      f"(first on line 1 of {nodes})")):
        load_slurm(write(tmp_path, "good.conf", TWO_NODES), slurm_conf=slurm)


def _include_errors(d: Path) -> list[tuple[Path, str, str]]:
    write(d, "a.conf", "Include b.conf\n")
    write(d, "b.conf", "Include a.conf\n")
    for k in range(1, 12):
        write(d, f"deep{k}.conf", f"Include deep{k + 1}.conf\n")
    (d / "dir.d").mkdir()
    return [
        (d / "a.conf", "b.conf: line 1, Include", "Include cycle: a.conf -> b.conf -> a.conf"),
        (write(d, "self.conf", "SwitchName=s Nodes=n1\nInclude self.conf\n"), "self.conf: line 2, Include",
         "Include cycle: self.conf -> self.conf"),
        (d / "deep1.conf", "deep10.conf: line 1, Include", "Include nested more than 10 files deep"),
        (write(d, "miss.conf", "Include missing.conf\n"), "miss.conf: line 1, Include",
         "cannot read included file"),
        (write(d, "glob.conf", "Include none.d/*.conf\n"), "glob.conf: line 1, Include",
         "Include 'none.d/*.conf' matches no file"),
        (write(d, "mod.conf", "Include nodes-%c.conf\n"), "mod.conf: line 1, Include", "include modifiers"),
        (write(d, "bare.conf", "Include\n"), "bare.conf: line 1, Include", "Include names no file"),
        (write(d, "dir.conf", "Include dir.d\n"), "dir.conf: line 1, Include", "is a directory"),
        (write(d, "bin.conf", "Include bin.d/x.conf\n"), "bin.d/x.conf", "binary"),
    ]


@pytest.mark.parametrize("case", range(9))
def test_include_errors(tmp_path, case):
    write(tmp_path, "bin.d/x.conf", "SwitchName=a\x00")
    path, where, what = _include_errors(tmp_path)[case]
    with pytest.raises(InstanceError) as exc:
        load_slurm(path, gpus_per_node=1)
    assert str(exc.value).startswith(f"{tmp_path}/{where}") and what in exc.value.message, str(exc.value)


def test_include_size_and_file_limits_hold_for_the_files_together(tmp_path, monkeypatch):
    from pal_opt.io import textfile
    from pal_opt.topology import slurmconf

    top = write(tmp_path, "t.conf", "SwitchName=s0 Nodes=n1\nInclude part*.conf\n")
    for k in range(3):
        write(tmp_path, f"part{k}.conf", f"SwitchName=s{k + 1} Nodes=m{k}   {'#' * 300}\n")
    assert len(load_slurm(top, gpus_per_node=1).hosts) == 4
    monkeypatch.setattr(textfile, "DEFAULT_MAX_BYTES", 700)  # each file is within it, not the four together
    with pytest.raises(InstanceError, match=re.escape(f"{top}: line 2, Include: topology.conf and the files it "
                                                      "includes are larger than the limit of 700 bytes together")):
        load_slurm(top, gpus_per_node=1)
    monkeypatch.undo()
    monkeypatch.setattr(slurmconf, "MAX_INCLUDED_FILES", 2)
    with pytest.raises(InstanceError, match="line 2, Include: more than 2 included files"):
        load_slurm(top, gpus_per_node=1)


# --------------------------------------------------------------------------- CLI
def test_cli_imports_a_typed_round_that_solves(tmp_path, capsys):
    out = tmp_path / "typed.json"
    rc, stdout, err = run(capsys, "import", "slurm", TOPOLOGY_CONF, "--gres-conf", GRES_CONF, "--slurm-conf",
                          SLURM_CONF, "--jobs", DATA / "jobs.csv", "-o", out)
    assert rc == 0 and err == "", err
    assert stdout.rstrip().endswith("6 jobs; GPU types a100 (32), h100 (28); every GPU factor 1.0: no variability to "
                                    "place by (--measurements DIR draws it from PAL's measurements)")
    inst = load_instance(out)
    assert inst.cluster.type_names == ("a100", "h100")
    for method in ("pal", "ilp"):
        pl = tmp_path / f"{method}.json"
        rc, _, err = run(capsys, "solve", out, "--method", method, "--out", pl)
        assert rc == 0, err
        assert len(load_placement_file(pl)["placements"]) == 6
        assert run(capsys, "check", out, pl)[0] == 0
    rc, _, err = run(capsys, "solve", out, "--out", tmp_path / "default.json")  # the default method
    assert rc == 0, err


def test_cli_warns_of_disagreeing_files_after_writing(tmp_path, capsys):
    topo = write(tmp_path, "t.conf", TWO_NODES)
    slurm = write(tmp_path, "s.conf", "NodeName=n[1-2] Gres=gpu:a100:8\n")
    gres = write(tmp_path, "g.conf", "NodeName=n[1-2] Name=gpu Type=a100 File=/dev/nvidia[0-3]\n")
    out = tmp_path / "o.json"
    rc, stdout, err = run(capsys, "import", "slurm", topo, "--slurm-conf", slurm, "--gres-conf", gres, "-o", out)
    assert rc == 0 and stdout.startswith(f"wrote {out}: t.conf: 8 GPUs on 2 servers")
    assert err.startswith("pal-opt: warning: ") and err.count("\n") == 1
    assert "2 nodes with other GPUs in the gres.conf than in the slurm.conf" in err


def _cli_bad(d: Path) -> list[tuple[list[object], str]]:
    topo = write(d, "t.conf", TWO_NODES)
    return [
        (["--slurm-conf", write(d, "mix.conf", "NodeName=n1 Gres=gpu:a100:4\nNodeName=n2 Gres=gpu:4\n")],
         "mix.conf: line 2, Gres: node 'n2' has GPUs without a type"),
        (["--slurm-conf", write(d, "s.conf", "NodeName=n1 Gres=gpu:a100:4\n"), "--gpus-per-node", 4],
         "s.conf: line 1, Gres: node 'n2' has GPUs without a type (--gpus-per-node)"),
        (["--gres-conf", write(d, "g1.conf", "Name=gpu File=/dev/nvidia[0-1] Count=3\n")], "g1.conf: line 1, Count"),
        (["--gres-conf", write(d, "g2.conf", "AutoDetect=nvml\n")], "g2.conf: line 1, AutoDetect: AutoDetect=nvml"),
        (["--gres-conf", write(d, "g3.conf", "Name=gpu File=/dev/nvidia0\nName=gpu File=/dev/nvidia0\n")],
         "g3.conf: line 2, File: device /dev/nvidia0 of node 'n1' is given twice"),
        (["--gres-conf", write(d, "g4.conf", "Include g4.conf\n")], "g4.conf: line 1, Include: Include cycle"),
        (["--slurm-conf", write(d, "s2.conf", "Include nodes/*.conf\n")], "s2.conf: line 1, Include: Include "
         "'nodes/*.conf' matches no file"),
        (["--gpus-per-node", 2, "--gres-conf", write(d, "g5.conf", "Include missing.conf\n")],
         "g5.conf: line 1, Include: cannot read included file"),
        (["--gres-conf", d / "missing-gres.conf"], "missing-gres.conf: no such gres.conf"),
        ([], "--gres-conf"),  # no GPU source: the message names the new option
        ([str(topo).replace("t.conf", "ti.conf"), "--gpus-per-node", 1], "ti.conf: line 2, Include: Include cycle"),
    ]


@pytest.mark.parametrize("case", range(11))
def test_cli_bad_slurm_input_exits_2_with_one_line_and_no_output(tmp_path, capsys, case):
    write(tmp_path, "ti.conf", "SwitchName=s Nodes=n1\nInclude ti.conf\n")
    argv, what = _cli_bad(tmp_path)[case]
    topo = tmp_path / "t.conf"
    if argv and str(argv[0]).endswith("ti.conf"):
        topo, argv = Path(str(argv[0])), argv[1:]
    out = tmp_path / "out.json"
    rc, stdout, err = run(capsys, "import", "slurm", topo, *argv, "-o", out)
    assert rc == 2 and stdout == "", err
    assert err.count("\n") == 1 and err.startswith("pal-opt: error: ") and "Traceback" not in err
    assert what in err, err
    assert not out.exists() and not list(tmp_path.glob(".out.json*"))


def test_cli_refuses_to_write_over_the_gres_conf(tmp_path, capsys):
    topo = write(tmp_path, "t.conf", TWO_NODES)
    gres = write(tmp_path, "g.conf", "Name=gpu Count=2\n")
    before = gres.read_bytes()
    rc, _, err = run(capsys, "import", "slurm", topo, "--gres-conf", gres, "-o", gres)
    assert rc == 2 and "this is the input --gres-conf" in err and err.count("\n") == 1
    assert gres.read_bytes() == before


def test_cli_help_names_gres_conf(capsys):
    try:
        main(["import", "slurm", "--help"])
    except SystemExit:
        pass
    text = " ".join(capsys.readouterr().out.split())
    assert "--gres-conf FILE" in text and "they win over --slurm-conf's" in text and "Include" in text


# ---------------------------------------------------------------------------- review findings (2026-12-06)
def test_a_node_the_slurm_conf_gives_no_gpu_gres_has_no_gpus(tmp_path):
    """A gres.conf line without NodeName gave its GPUs to login and CPU nodes too (20 GPUs for
    8), as Slurm would not: it schedules only the GRES slurm.conf gives a node (review)."""
    topo = write(tmp_path, "t.conf", "SwitchName=sw1 Nodes=login1,cpu[1-2],gpu[1-2]\n")
    slurm = write(tmp_path, "slurm.conf", "GresTypes=gpu\nNodeName=login1,cpu[1-2] CPUs=64\n"
                                          "NodeName=gpu[1-2] CPUs=64 Gres=gpu:4\n")
    gres = write(tmp_path, "gres.conf", "Name=gpu File=/dev/nvidia[0-3]\n")
    t = load_slurm(topo, slurm_conf=slurm, gres_conf=gres)
    assert int(to_cluster(t).num_gpus) == 8
    assert len(t.notes) == 1 and "3 nodes with GPUs in the gres.conf but no Gres=gpu in the slurm.conf" in t.notes[0]
    assert int(to_cluster(load_slurm(topo, gres_conf=gres)).num_gpus) == 20  # no slurm.conf: every node


def test_an_autodetected_node_without_a_count_takes_the_slurm_conf_count(tmp_path):
    """``AutoDetect=nvml`` with ``Name=gpu Type=a100`` (no Count, no File) counted one GPU a node."""
    topo = write(tmp_path, "t.conf", "SwitchName=s1 Nodes=n[1-4]\n")
    slurm = write(tmp_path, "slurm.conf", "NodeName=n[1-4] Gres=gpu:a100:8\n")
    gres = write(tmp_path, "gres.conf", "AutoDetect=nvml\nNodeName=n[1-4] Name=gpu Type=a100\n")
    cl = to_cluster(load_slurm(topo, slurm_conf=slurm, gres_conf=gres))
    assert cl.num_gpus == 32 and cl.type_names == ("a100",)


def test_an_autodetected_node_without_a_count_and_no_slurm_conf(tmp_path):
    """Without a slurm.conf, ``Name=gpu Type=a100`` under ``AutoDetect=nvml`` was still one GPU a
    node, without a word: the count is --gpus-per-node's (of the type the lines name), else unknown."""
    topo = write(tmp_path, "t.conf", "SwitchName=s1 Nodes=n[1-4]\n")
    gres = write(tmp_path, "gres.conf", "AutoDetect=nvml\nNodeName=n[1-4] Name=gpu Type=a100\n")
    with pytest.raises(InstanceError, match=r"line 1, AutoDetect: AutoDetect=nvml: slurmd finds the GPUs of 4 nodes"):
        load_slurm(topo, gres_conf=gres)
    cl = to_cluster(load_slurm(topo, gres_conf=gres, gpus_per_node=8))
    assert cl.num_gpus == 32 and cl.type_names == ("a100",)
    some = write(tmp_path, "some.conf", "AutoDetect=nvml\nNodeName=n[1-3] Name=gpu Count=4\nNodeName=n4 Name=gpu\n")
    t = load_slurm(topo, gres_conf=some)
    assert to_cluster(t).num_gpus == 12 and t.hosts == ("n1", "n2", "n3")
    assert len(t.notes) == 1 and "slurmd finds the GPUs of 1 node (n4) at run time" in t.notes[0]


def test_gpu_nodes_outside_the_topology_are_named(tmp_path):
    """Nodes with GPUs in the slurm.conf that no switch connects were dropped without a word."""
    topo = write(tmp_path, "t.conf", "SwitchName=s1 Nodes=n[1-4]\n")
    slurm = write(tmp_path, "slurm.conf", "NodeName=n[1-6] Gres=gpu:a100:8\n")
    t = load_slurm(topo, slurm_conf=slurm)
    assert to_cluster(t).num_gpus == 32
    assert t.notes == ("2 nodes with GPUs in the slurm.conf or gres.conf are in no switch of the topology.conf, "
                       "their GPUs left out: n5, n6",)


@pytest.mark.parametrize(("name", "text", "message"), [
    # Slurm's parser reads "Type= Count=4" as the type "Count=4": 8 GPUs of a type named so, for 32
    ("gres.conf", "NodeName=gpu[01-08] Name=gpu Type= Count=4\n",
     "line 1: Type has no value (the next field, 'Count=4', would be read as it)"),
    ("topology.conf", "SwitchName=s1 Nodes= LinkSpeed=100\nSwitchName=s2 Nodes=n[1-2]\n",
     "line 1: Nodes has no value (the next field, 'LinkSpeed=100', would be read as it)"),
    # a negative count was taken as a GPU type named "-2"
    ("slurm.conf", "NodeName=gpu[01-08] Gres=gpu:-2\n", "line 1, Gres: bad GPU count '-2' in Gres='gpu:-2'"),
    ("slurm.conf", "NodeName=gpu[01-08] Gres=gpu:a100:1.5\n", "bad GPU count '1.5'"),
    ("slurm.conf", "NodeName=gpu[01-08] Gres=gpu:a100:9999999999999\n",
     "bad GPU count '9999999999999' in Gres='gpu:a100:9999999999999' (a count is a whole number >= 0 of at most "
     "12 digits, with an optional K, M, G, T or P)"),
    # a type per GPU was listed before the size check: out of memory
    ("slurm.conf", "NodeName=gpu[01-08] Gres=gpu:a100:99999999\n", "799,999,992 GPUs; pal-opt builds clusters of at most"),
])
def test_fields_that_read_as_something_else_are_errors(tmp_path, capsys, name, text, message):
    path = write(tmp_path, name, text)
    flag = {"gres.conf": ["--gres-conf", path], "slurm.conf": ["--slurm-conf", path]}.get(name, [])
    topology = path if name == "topology.conf" else TOPOLOGY_CONF
    out = tmp_path / "o.json"
    rc, _, err = run(capsys, "import", "slurm", topology, *flag, "--gpus-per-node", 4, "-o", out)
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1 and not out.exists()


def test_a_mig_type_without_a_count_is_one_gpu_of_that_type(tmp_path):
    topo = load_slurm(TOPOLOGY_CONF, slurm_conf=write(tmp_path, "slurm.conf", "NodeName=gpu[01-08] Gres=gpu:1g.5gb\n"))
    assert all(v == ["1g.5gb"] for v in types_by_node(topo).values()) and len(types_by_node(topo)) == 8


def test_an_empty_include_at_the_byte_limit_is_read_as_nothing(tmp_path):
    """An empty included file is allowed (Slurm reads nothing from it), also when the text before
    it has used the whole ``max_bytes``: the included file was read with a limit of 0 bytes left,
    which ``read_text`` now refuses as an argument (``max_bytes must be an integer >= 1``), an
    ``OptionError`` about an argument the caller never gave."""
    from pal_opt.topology.slurmconf import config_lines

    write(tmp_path, "empty.conf", "")
    text = "Include empty.conf\n"
    lines = config_lines(text, str(tmp_path / "slurm.conf"), max_bytes=len(text))
    assert [line.text for line in lines] == []
    write(tmp_path, "one.conf", "x")  # one byte over: refused as before
    with pytest.raises(InstanceError, match="larger than the limit of 17 bytes together"):
        config_lines("Include one.conf\n", str(tmp_path / "slurm.conf"), max_bytes=17)
