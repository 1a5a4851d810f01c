"""Every script in examples/ runs, and says what it should."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = sorted(EXAMPLES.glob("*.py"))


def test_there_are_examples() -> None:
    assert len(SCRIPTS) >= 3


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_example_runs_as_a_script(script: Path) -> None:
    # pal-opt's own deprecations (their messages begin "pal_opt.") as errors: every example uses the new names
    proc = subprocess.run([sys.executable, "-W", "error:pal_opt.:DeprecationWarning", str(script)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()
    assert "Traceback" not in proc.stderr


def test_scheduler_loop_finishes_every_job_and_ilp_is_no_worse_than_pal() -> None:
    mod = runpy.run_path(str(EXAMPLES / "scheduler_loop.py"))
    jct_ilp = mod["main"]("ilp")
    jct_pal = mod["main"]("pal")
    assert set(jct_ilp) == set(jct_pal) == {"a", "b", "c", "d", "e", "f"}
    assert all(v > 0 for v in jct_ilp.values())


def test_heuristic_vs_optimal_gaps_are_non_negative() -> None:
    mod = runpy.run_path(str(EXAMPLES / "heuristic_vs_optimal.py"))
    rows = mod["main"](rounds=2)
    assert rows and all(r["gap"] >= -1e-9 for r in rows)
    assert all(r["status"] != "optimal" or r["proven"] == pytest.approx(r["gap"], abs=1e-6) for r in rows)


def test_heuristic_vs_optimal_takes_its_rounds_from_the_command_line(tmp_path: Path) -> None:
    """Seeds, sizes and a CSV of the rows, as a researcher running it for a table would ask."""
    out = tmp_path / "gaps.csv"
    proc = subprocess.run([sys.executable, str(EXAMPLES / "heuristic_vs_optimal.py"), "--rounds", "2", "--first-seed",
                           "7", "--nodes", "4", "--gpus-per-node", "4", "--jobs", "10", "--csv", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == "seed,method,greedy,optimal,status,gap,proven"
    assert [ln.split(",")[:2] for ln in lines[1:]] == [[s, m] for s in ("7", "8") for m in ("pal", "pmfirst", "packed")]
    mod = runpy.run_path(str(EXAMPLES / "heuristic_vs_optimal.py"))
    again = mod["main"](2, 4, 4, 10, first_seed=7)
    assert [f"{r['greedy']!r}" for r in again] == [ln.split(",")[2] for ln in lines[1:]]


def test_gpu_types_ilp_runs_no_slower_than_sia_and_never_below_the_floor() -> None:
    mod = runpy.run_path(str(EXAMPLES / "gpu_types.py"))
    if not mod["PROFILES"].is_dir() or not mod["LONGHORN"].is_dir():
        pytest.skip(f"Sia profiles or Longhorn measurements not available under {mod['SHARED']}")
    out = mod["main"]()
    assert out is not None and out["sia"]["n_completed"] == out["ilp"]["n_completed"] == 6
    sia, ilp = out["sia"]["variability_slowdown"], out["ilp"]["variability_slowdown"]
    assert ilp["mean"] <= sia["mean"]  # ilp sees the factors, sia does not
    assert sia["placement_floor"] <= sia["mean"] and ilp["placement_floor"] <= ilp["mean"]


def test_sia_round_loop_finishes_every_job() -> None:
    mod = runpy.run_path(str(EXAMPLES / "sia_round_loop.py"))
    if not mod["PROFILES"].is_dir():
        pytest.skip(f"Sia profiles not available under {mod['SHARED']}")
    jct = mod["main"]()
    assert jct is not None and len(jct) == 6 and all(v > 0 for v in jct.values())


def test_failures_and_priorities_repairs_in_place_preempts_by_priority_and_keeps_when_moving_is_dear() -> None:
    mod = runpy.run_path(str(EXAMPLES / "failures_and_priorities.py"))
    out = mod["main"]()
    first, fixed, pre = out["first"], out["repaired"], out["preempted"]
    assert out["broken"] in first.placements["pipe"] and out["broken"] not in fixed.placements["pipe"]
    assert sorted(out["kept"]) == ["gang-2", "gang-8", "one"]  # repair moved only the job that lost a GPU
    assert "urgent" in pre.placements and pre.jobs_to_terminate  # the priority-1 job runs, someone stops
    assert not set(pre.jobs_to_terminate) & set(pre.placements)  # the stopped ones are preempted, not moved
    assert out["moved"][120.0] == [] and out["moved"][0.0]  # a dear restart keeps everyone in place


def test_slurm_launch_lines_name_each_job_s_devices() -> None:
    mod = runpy.run_path(str(EXAMPLES / "slurm_launch.py"))
    assert mod["cuda_visible_devices"]("0-2,5,7") == "0,1,2,5,7"
    round_, rows = mod["main"]()
    assert len(rows) == 6  # every job of examples/data/jobs.csv placed
    assert round_.cluster.devices is not None  # from examples/data/gres.conf's File=/dev/nvidia[...]
    for row in rows:
        lines = mod["launch_lines"](round_.cluster, row, set())
        assert lines[0].startswith("sbatch --exclusive") and len(lines) == 1 + len(str(row["gpu_indices"]).split())
        n_devices = sum(len(line.rsplit("=", 1)[1].split(",")) for line in lines[1:])
        assert n_devices == row["gpus"]


@pytest.mark.parametrize(("script", "says"), [
    ("slurm_launch", "factors from the synthetic Longhorn-like model"),
    ("gpu_types", "gpu_types: skipped: needs the Sia artifact's profiles"),
    ("sia_round_loop", "sia_round_loop: skipped: needs the Sia artifact's profiles"),
])
def test_examples_read_measured_data_only_where_pal_opt_shared_points(script: str, says: str, tmp_path: Path) -> None:
    """``PAL_OPT_SHARED`` names the shared folder for every example that reads measured data (the
    README says so); slurm_launch.py read ``../shared`` beside the checkout whatever it named."""
    env = {**os.environ, "PAL_OPT_SHARED": str(tmp_path)}  # an empty folder: no measurements there
    proc = subprocess.run([sys.executable, str(EXAMPLES / f"{script}.py")], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert says in proc.stdout.splitlines()[0]
    assert str(tmp_path) in proc.stdout or script == "slurm_launch"


@pytest.mark.parametrize(("script", "args", "says"), [
    ("scheduler_loop", ["bogus"], "unknown method 'bogus'"),
    ("sia_round_loop", [str(EXAMPLES / "data" / "newtrace-mini.csv"), "bogus"], "unknown policy 'bogus'"),
    ("gpu_types", ["absent.csv"], "absent.csv: cannot read workload file"),
])
def test_an_example_given_a_bad_argument_says_so_in_one_line(script: str, args: list[str], says: str,
                                                              tmp_path: Path) -> None:
    """The examples that take arguments ended with a traceback on a bad one (pal-opt's own error
    under it); they now print that error in one line naming the script, exit status 1."""
    if script != "scheduler_loop":  # without the measured data these say so and stop before reading arguments
        mod = runpy.run_path(str(EXAMPLES / f"{script}.py"))
        if not mod["PROFILES"].is_dir() or not mod.get("LONGHORN", mod["PROFILES"]).is_dir():
            pytest.skip(f"the measured data are not available under {mod['SHARED']}")
    proc = subprocess.run([sys.executable, str(EXAMPLES / f"{script}.py"), *args], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{script}: ") and says in lines[0], proc.stderr


@pytest.mark.parametrize("script", ["pipeline_partition.py", "blox_adapter.py"])
def test_an_example_piped_into_a_reader_that_left_ends_quietly(script: str) -> None:
    """``python examples/blox_adapter.py | head -1`` ended with a ``BrokenPipeError`` traceback;
    the examples run in :class:`pal_opt.streams.PipeSafe`, as ``pal-opt`` does.  (The reader is
    gone before the first line: every write finds the pipe closed.)"""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, str(EXAMPLES / script)], stdout=write_end, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True, timeout=300, check=False)
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (0, "")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux): every write to it fails, ENOSPC")
@pytest.mark.parametrize("args", [["pipeline_partition.py"], ["heuristic_vs_optimal.py", "--help"]])
def test_an_example_whose_standard_output_cannot_be_written_fails(args: list[str]) -> None:
    """:class:`pal_opt.streams.PipeSafe` keeps a failed write to standard output (a full disk,
    here ``/dev/full``) and raises it, naming standard output, as the block ends; a block that
    ended in ``sys.exit(0)`` (argparse's ``--help``) was taken for one that failed, and the
    script exited 0 with its output lost."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}  # buffered, as in real use
    env["PYTHONPATH"] = str(EXAMPLES.parent)
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, str(EXAMPLES / args[0]), *args[1:]], stdout=full,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env, timeout=300,
                              check=False)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.rstrip().endswith("OSError: [Errno 28] cannot write: No space left on device; the rest of "
                                         "the output was dropped: 'standard output'"), proc.stderr


def test_every_example_runs_its_main_in_pipe_safe() -> None:
    for script in SCRIPTS:
        main_block = script.read_text().split('if __name__ == "__main__":\n', 1)[1]
        assert main_block.startswith("    with PipeSafe():"), script.name



def test_failures_and_priorities_shows_an_unplaceable_job_with_its_reason(capsys: pytest.CaptureFixture[str]) -> None:
    # result.unplaceable is {job id: reason}: show() once read it as a list of {"job", "reason"} dicts
    # (the to_dict() shape) and failed with a TypeError on the first round that had one
    import pal_opt

    mod = runpy.run_path(str(EXAMPLES / "failures_and_priorities.py"))
    queue = [*mod["QUEUE"], {"id": "huge", "demand": 40, "class": "classB"}]
    result = pal_opt.solve(pal_opt.make_instance(mod["cluster_graph"](), queue), method="pal", admission="backfill")
    assert "huge" in result.unplaceable
    mod["show"]("a round", result)
    assert "unplaceable: huge (needs 40 GPUs; the cluster has 16)" in capsys.readouterr().out
