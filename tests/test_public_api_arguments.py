"""Wrong arguments to the public API (``pal_opt.__all__`` and the ``__all__`` of ``pal_opt.io``,
``.ilp``, ``.cost``, ``.simulate``, ``.pipeline``, ``.topology``, ``.hetero``) are pal-opt's own
errors naming the argument, never Python's raw ``TypeError``/``AttributeError`` from deep inside
nor a nonsense value taken without a word.

Found by a probe that called every public function with ``None``, a string for a number, negative
counts, NaN and inf, empty lists, a dict for a list, missing paths and directories: each case
here was a raw ``TypeError`` (``expected str, bytes or os.PathLike object, not NoneType``,
``unsupported operand type(s) for /: 'str' and 'int'``), an ``AttributeError`` (``'NoneType' object
has no attribute 'split'``) or was accepted (``pal_locality(nan)``, ``geomean_slowdown(1.0, -1)``,
``restart_cost_units(nan, 360)``, ``compress_hostlist("abc")`` as hosts a, b and c) before.
A wrong *type* is an :class:`~pal_opt.errors.InputTypeError`, which is also a ``TypeError``, so
code that caught the old ``TypeError`` keeps working.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pal_opt
import pal_opt.cost as pcost
import pal_opt.hetero as hetero
import pal_opt.ilp as pilp
import pal_opt.io as pio
import pal_opt.pipeline as pipeline
import pal_opt.simulate as psim
import pal_opt.topology as topology
from pal_opt.errors import InputTypeError, InstanceError, OptionError, PalOptError
from pal_opt.seeds import make_rng

NAN = math.nan


def _round() -> tuple[pal_opt.RoundInstance, pal_opt.PlacementResult]:
    inst = pal_opt.generate_instance(nodes=2, gpus_per_node=4, jobs=4, seed=0)
    return inst, pal_opt.solve(inst, "pal")


CASES: list[tuple[str, Any, type[Exception], str]] = [
    # the two known defects
    ("load_instance(None)", lambda i, r, d: pal_opt.load_instance(None), InputTypeError,
     "path: must be a file path (a str or os.PathLike), got NoneType None"),
    ("geomean_slowdown('x', 2)", lambda i, r, d: pal_opt.geomean_slowdown("x", 2), InputTypeError,
     "cost: must be a number (a round cost), got str 'x'"),
    # file paths that are not paths (an int or a bool was opened as a file descriptor)
    ("load_instance(True)", lambda i, r, d: pal_opt.load_instance(True), InputTypeError, "path: must be a file path"),
    ("load_instance(3.5)", lambda i, r, d: pal_opt.load_instance(3.5), InputTypeError, "got float 3.5"),
    ("load_instance(max_bytes='x')", lambda i, r, d: pal_opt.load_instance(d / "a.json", max_bytes="x"),
     OptionError, "max_bytes must be an integer >= 1, got 'x'"),
    ("load_instance(max_bytes=-1)", lambda i, r, d: pal_opt.load_instance(d / "a.json", max_bytes=-1),
     OptionError, "max_bytes must be an integer >= 1, got -1"),
    ("load_blox(None, None)", lambda i, r, d: pal_opt.load_blox(None, None), InputTypeError, "gpus_path: must be a file path"),
    ("io.load_jobs(None)", lambda i, r, d: pio.load_jobs(None), InputTypeError, "path: must be a file path"),
    ("io.load_measurements(1)", lambda i, r, d: pio.load_measurements(1), InputTypeError, "path: must be a file path"),
    ("save_instance(inst, None)", lambda i, r, d: pal_opt.save_instance(i, None), InputTypeError, "path: must be a file path"),
    ("plot_placement(inst, res, None)", lambda i, r, d: pal_opt.plot_placement(i, r, None), InputTypeError,
     "path: must be a file path"),
    ("io.read_text(1)", lambda i, r, d: pio.read_text(1), InputTypeError, "path: must be a file path (a str or os.PathLike), got int 1"),
    ("io.load_json(b'x')", lambda i, r, d: pio.load_json(b"x.json"), InputTypeError, "got bytes"),
    ("io.longhorn_paths(None)", lambda i, r, d: pio.longhorn_paths(None), InputTypeError, "directory: must be a file path"),
    ("io.atomic_write_text(p, None)", lambda i, r, d: pio.atomic_write_text(d / "out.txt", None), InputTypeError,
     "text: must be a str, got NoneType"),
    ("io.atomic_write_files(None)", lambda i, r, d: pio.atomic_write_files(None), InputTypeError, "outputs: must map file paths"),
    ("io.atomic_write_files({p: 1})", lambda i, r, d: pio.atomic_write_files({d / "out.txt": 1}), InputTypeError,
     "must be bytes or a function writing the file, got int"),
    ("io.atomic_write_json([], {})", lambda i, r, d: pio.atomic_write_json([], {}), InputTypeError, "path: must be a file path"),
    ("io.sample_factors(None, 4)", lambda i, r, d: pio.sample_factors(None, 4), InputTypeError, "paths_by_class: must map"),
    ("io.sample_factors({}, 'x')", lambda i, r, d: pio.sample_factors({}, "x"), OptionError, "n_gpus must be an integer >= 1"),
    ("ilp.write_lp(None, p)", lambda i, r, d: pilp.write_lp(None, d / "a.lp"), InputTypeError, "form: must be a Program"),
    ("ilp.write_lp(form, True)", lambda i, r, d: pilp.write_lp(pilp.build_formulation(i), True), InputTypeError,
     "path: must be a file path (a str or os.PathLike), got bool True"),
    ("pipeline.load_profile(None)", lambda i, r, d: pipeline.load_profile(None), InputTypeError, "path: must be a file path"),
    ("topology.load_graphml(None)", lambda i, r, d: topology.load_graphml(None), InputTypeError, "path: must be a file path"),
    ("topology.load_nodes(0)", lambda i, r, d: topology.load_nodes(0), InputTypeError, "path: must be a file path"),
    ("topology.measured_factors(4, None)", lambda i, r, d: topology.measured_factors(4, None), InputTypeError,
     "directory: must be a file path"),
    ("hetero.read_workload(None)", lambda i, r, d: hetero.read_workload(None), InputTypeError, "path: must be a file path"),
    ("hetero.load_applications(None)", lambda i, r, d: hetero.load_applications(None), InputTypeError,
     "profiles_dir: must be a file path"),
    ("hetero.load_application(d, None)", lambda i, r, d: hetero.load_application(d, None), InputTypeError,
     "app: must be an application name"),
    ("hetero.load_applications(d, 'cifar10')", lambda i, r, d: hetero.load_applications(d, "cifar10"), InputTypeError,
     "apps: must be a list of application names, got str 'cifar10'"),
    # numbers
    ("geomean_slowdown(None, 2)", lambda i, r, d: pal_opt.geomean_slowdown(None, 2), InputTypeError, "cost: must be a number"),
    ("geomean_slowdown(nan, 2)", lambda i, r, d: pal_opt.geomean_slowdown(NAN, 2), InstanceError, "cost: must be a number or inf"),
    ("geomean_slowdown(-inf, 2)", lambda i, r, d: pal_opt.geomean_slowdown(-math.inf, 2), InstanceError, "cost:"),
    ("geomean_slowdown(1.0, 'x')", lambda i, r, d: pal_opt.geomean_slowdown(1.0, "x"), OptionError,
     "gpus must be an integer >= 0, got 'x'"),
    ("geomean_slowdown(1.0, -1)", lambda i, r, d: pal_opt.geomean_slowdown(1.0, -1), OptionError, "gpus must be an integer >= 0"),
    ("geomean_slowdown(1.0, 2.5)", lambda i, r, d: pal_opt.geomean_slowdown(1.0, 2.5), OptionError, "gpus must be an integer"),
    ("geomean_slowdown(1.0, True)", lambda i, r, d: pal_opt.geomean_slowdown(1.0, True), OptionError, "gpus must be an integer"),
    ("cost.relative_gap('x', 1, 2)", lambda i, r, d: pcost.relative_gap("x", 1.0, 2), InputTypeError, "objective: must be a number"),
    ("cost.relative_gap(1, 'x', 2)", lambda i, r, d: pcost.relative_gap(1.0, "x", 2), InputTypeError, "bound: must be None or a number"),
    ("cost.relative_gap(1, 1, -1)", lambda i, r, d: pcost.relative_gap(1.0, 1.0, -1), OptionError, "gpus must be an integer >= 0"),
    ("pal_locality(nan)", lambda i, r, d: pal_opt.pal_locality(NAN), InstanceError, "locality_penalty: must be a finite number >= 1"),
    ("pal_locality(0.5)", lambda i, r, d: pal_opt.pal_locality(0.5), InstanceError, "locality_penalty: must be a finite number >= 1"),
    ("pal_locality(inf)", lambda i, r, d: pal_opt.pal_locality(math.inf), InstanceError, "locality_penalty:"),
    ("simulate.restart_cost_units(nan, 360)", lambda i, r, d: psim.restart_cost_units(NAN, 360.0), OptionError,
     "seconds must be a number of seconds, got nan"),
    ("simulate.restart_cost_units(36, 0)", lambda i, r, d: psim.restart_cost_units(36.0, 0.0), OptionError,
     "round_length must be a finite number > 0"),
    ("simulate.restart_cost_units(36, nan)", lambda i, r, d: psim.restart_cost_units(36.0, NAN), OptionError, "round_length must be"),
    ("simulate.restart_cost_units(36, -1)", lambda i, r, d: psim.restart_cost_units(36.0, -1.0), OptionError,
     "round_length must be a finite number > 0, got -1.0"),  # (said '>= 0', which 0 is not)
    ("topology.uniform_factors(-1)", lambda i, r, d: topology.uniform_factors(-1), OptionError, "n_gpus must be an integer >= 0"),
    ("topology.uniform_factors(None)", lambda i, r, d: topology.uniform_factors(None), OptionError, "n_gpus must be an integer"),
    ("generate_instance(seed='x')", lambda i, r, d: pal_opt.generate_instance(2, 4, 4, seed="x"), OptionError,
     "seed must be an integer >= 0, a numpy.random.Generator or None, got 'x'"),
    ("seeds.make_rng(1.5)", lambda i, r, d: make_rng(1.5), OptionError, "seed must be an integer >= 0"),
    # the pipeline's cost model and the simulator's synthetic draw (review of the twelfth session)
    ("pipeline.stage_time('a', ...)", lambda i, r, d: pipeline.stage_time("a", 2e8, 2, 25e9), InputTypeError,
     "compute: must be a number, got str 'a'"),
    ("pipeline.stage_time(nan, ...)", lambda i, r, d: pipeline.stage_time(NAN, 2e8, 2, 25e9), OptionError,
     "compute must be a finite number >= 0, got nan"),
    ("pipeline.stage_time(.., replicas=0)", lambda i, r, d: pipeline.stage_time(0.01, 2e8, 0, 25e9), OptionError,
     "replicas must be an integer >= 1, got 0"),
    ("pipeline.stage_time(.., replicas='2')", lambda i, r, d: pipeline.stage_time(0.01, 2e8, "2", 25e9), InputTypeError,
     "replicas: must be an integer, got str '2'"),
    ("pipeline.stage_time(.., bandwidth=0)", lambda i, r, d: pipeline.stage_time(0.01, 2e8, 2, 0), OptionError,
     "bandwidth must be a finite number > 0, got 0"),
    ("pipeline.stage_time(.., bandwidth=-1)", lambda i, r, d: pipeline.stage_time(0.01, 2e8, 2, -1.0), OptionError,
     "bandwidth must be a finite number > 0, got -1.0"),  # (said '>= 0', which 0 is not)
    ("pipeline.stage_time(.., divisor=0)", lambda i, r, d: pipeline.stage_time(0.01, 2e8, 2, 25e9, 0), OptionError,
     "divisor must be a finite number > 0, got 0"),
    ("pipeline.stage_time(.., divisor=-2)", lambda i, r, d: pipeline.stage_time(0.01, 2e8, 2, 25e9, -2), OptionError,
     "divisor must be a finite number > 0, got -2"),
    ("pipeline.allreduce_time(None, ...)", lambda i, r, d: pipeline.allreduce_time(None, 2, 25e9), InputTypeError,
     "parameters: must be a number, got NoneType None"),
    ("pipeline.allreduce_time(.., replicas=None)", lambda i, r, d: pipeline.allreduce_time(2e8, None, 25e9),
     InputTypeError, "replicas: must be an integer, got NoneType None"),
    ("pipeline.allreduce_time(array of str)", lambda i, r, d: pipeline.allreduce_time(np.array(["a"]), 2, 25e9),
     InputTypeError, "parameters: must be numbers, got an array of <U1"),
    ("simulate.synthetic_draw(classes, -1)", lambda i, r, d: psim.synthetic_draw(("classA",), -1, 0), OptionError,
     "num_gpus must be an integer >= 0, got -1"),
    ("simulate.synthetic_draw(classes, None)", lambda i, r, d: psim.synthetic_draw(("classA",), None, 0), OptionError,
     "num_gpus must be an integer >= 0, got None"),
    ("simulate.synthetic_draw('classA', 4)", lambda i, r, d: psim.synthetic_draw("classA", 4, 0), InputTypeError,
     "classes: must be a sequence of class names, got str 'classA'"),
    # texts that are not text
    ("pipeline.parse_profile(None)", lambda i, r, d: pipeline.parse_profile(None), InputTypeError, "text: must be a str, got NoneType"),
    ("topology.parse_topology_conf(None)", lambda i, r, d: topology.parse_topology_conf(None), InputTypeError, "text: must be a str"),
    ("topology.parse_slurm_conf_gres(3)", lambda i, r, d: topology.parse_slurm_conf_gres(3), InputTypeError, "text: must be a str"),
    ("topology.parse_gres_conf(b'')", lambda i, r, d: topology.parse_gres_conf(b"Name=gpu"), InputTypeError, "text: must be a str"),
    ("topology.expand_hostlist(None)", lambda i, r, d: topology.expand_hostlist(None), InputTypeError, "expr: must be a str"),
    ("topology.compress_hostlist('abc')", lambda i, r, d: topology.compress_hostlist("abc"), InputTypeError,
     "names: must be a list of host names, got str 'abc'"),
    ("topology.compress_hostlist(None)", lambda i, r, d: topology.compress_hostlist(None), InputTypeError, "names:"),
    ("hetero.parse_cluster(None)", lambda i, r, d: hetero.parse_cluster(None), OptionError, "expected TYPE:SERVERSxGPUS"),
    ("simulate.parse_cluster(-1)", lambda i, r, d: psim.parse_cluster(-1), OptionError, "--cluster must look like 16x4"),
    # objects of the wrong kind
    ("solve(None)", lambda i, r, d: pal_opt.solve(None, "pal"), InputTypeError, "instance: expected a RoundInstance"),
    ("RoundPolicy.place('x')", lambda i, r, d: pal_opt.RoundPolicy("pal").place("x"), InputTypeError,
     "instance: expected a RoundInstance"),
    ("binned_factors(inst)", lambda i, r, d: pal_opt.binned_factors(i), InputTypeError,
     "cluster: binned_factors takes a Cluster, got RoundInstance (a round's is instance.cluster)"),
    ("ilp.build_formulation(None)", lambda i, r, d: pilp.build_formulation(None), InputTypeError, "instance: expected a RoundInstance"),
    ("ilp.solve_ilp(None)", lambda i, r, d: pilp.solve_ilp(None), InputTypeError, "instance: expected a RoundInstance"),
    ("ilp.solve_partitioned(None, 2)", lambda i, r, d: pilp.solve_partitioned(None, 2), InputTypeError, "instance:"),
    ("cost.validate_cost_params(None)", lambda i, r, d: pcost.validate_cost_params(None), InputTypeError, "instance:"),
    ("ilp.decode(None, [])", lambda i, r, d: pilp.decode(None, []), InputTypeError, "form: must be a Formulation"),
    ("ilp.encode(form, None)", lambda i, r, d: pilp.encode(pilp.build_formulation(i), None), InputTypeError,
     "placements: must map job ids to GPU ids, got NoneType"),
    ("ilp.encode(form, {'x': [0]})", lambda i, r, d: pilp.encode(pilp.build_formulation(i), {"x": [0]}), InstanceError,
     "placements: does not cover exactly the admitted jobs"),
    ("simulate.simulate('x', cluster)", lambda i, r, d: psim.simulate("x", i.cluster), InputTypeError,
     "trace: must be a list of trace jobs"),
    ("simulate.simulate([], cluster, 'x')", lambda i, r, d: psim.simulate([], i.cluster, "x"), InputTypeError,
     "config: must be a SimConfig or None, got str"),
    ("simulate.simulate([], None)", lambda i, r, d: psim.simulate([], None), InputTypeError, "cluster: must be a pal_opt Cluster"),
    ("simulate.build_cluster('16x4')", lambda i, r, d: psim.build_cluster("16x4"), InputTypeError,
     "spec: must be a ClusterSpec (parse_cluster('16x4')), got str"),
    ("topology.slurm_rows(None, {})", lambda i, r, d: topology.slurm_rows(None, {}), InputTypeError, "instance: expected a RoundInstance"),
    ("topology.to_cluster('t.conf')", lambda i, r, d: topology.to_cluster("t.conf"), InputTypeError,
     "topology: must be a Topology (load_slurm, load_nodes, load_graphml), got str"),
    ("topology.topology_round(None)", lambda i, r, d: topology.topology_round(None), InputTypeError, "topology: must be a Topology"),
    ("topology.graphml_text(inst)", lambda i, r, d: topology.graphml_text(i), InputTypeError,
     "cluster: must be a pal_opt Cluster, got RoundInstance"),
    ("cost.left_out_charge(None, [])", lambda i, r, d: pcost.left_out_charge(None, []), InputTypeError, "instance:"),
    ("cost.stages_mapped_best(None, {}, {})", lambda i, r, d: pcost.stages_mapped_best(None, {}, {}), InputTypeError, "instance:"),
    ("cost.unregister_cost_term([])", lambda i, r, d: pcost.unregister_cost_term([]), OptionError,
     "a cost term name must be a string, got []"),
]


@pytest.mark.parametrize(("name", "call", "error", "text"), CASES, ids=[c[0] for c in CASES])
def test_a_wrong_argument_is_a_pal_opt_error_naming_it(name: str, call: Any, error: type[Exception], text: str,
                                                        tmp_path: Path) -> None:
    inst, result = _round()
    (tmp_path / "a.json").write_text("{}")
    with pytest.raises(error) as err:
        call(inst, result, tmp_path)
    assert type(err.value) is error, (name, type(err.value))
    assert isinstance(err.value, PalOptError)
    message = str(err.value)
    assert text in message and "\n" not in message, (name, message)
    if error is InputTypeError:  # what such a call raised before, for code that caught it
        assert isinstance(err.value, TypeError)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]  # nothing written


def test_a_path_given_as_true_no_longer_closes_standard_output(tmp_path: Path) -> None:
    """``write_lp(form, True)`` was ``open(True, "w")``: file descriptor 1, closed on return."""
    inst, _ = _round()
    form = pilp.build_formulation(inst)
    with pytest.raises(InputTypeError):
        pilp.write_lp(form, True)
    sys.stdout.flush()  # would raise OSError: [Errno 9] Bad file descriptor
    pilp.write_lp(form, tmp_path / "a.lp")
    assert (tmp_path / "a.lp").read_text().startswith("\\")


def test_valid_arguments_are_taken_as_before(tmp_path: Path) -> None:
    inst, result = _round()
    assert pal_opt.geomean_slowdown(math.inf, 1) == math.inf
    assert pal_opt.geomean_slowdown(5.0, 0) == 1.0
    assert pal_opt.geomean_slowdown(np.float64(2.0), np.int64(2)) == pytest.approx(math.e)
    assert pcost.relative_gap(1.0, None, 4) is None
    assert pcost.relative_gap(1.0, math.nan, 4) is None
    assert pcost.relative_gap(2.0, 1.0, 0) == 0.0
    assert pal_opt.pal_locality(1) == (1.0, 1.0, 1.0)
    assert pal_opt.pal_locality(np.float64(1.7)) == (1.0, 1.7, 1.7)
    assert psim.restart_cost_units(-5.0, 360.0) == 0.0
    assert psim.restart_cost_units(math.inf, 360.0) > 0
    assert topology.compress_hostlist(iter(["n1", "n2"])) == "n[1-2]"
    assert topology.uniform_factors(0, ["classA"])["classA"].shape == (0,)
    pal_opt.save_instance(inst, tmp_path / "r.json")
    assert pal_opt.load_instance(tmp_path / "r.json").jobs == inst.jobs
    assert pal_opt.load_instance(str(tmp_path / "r.json"), max_bytes=np.int64(1 << 20)).jobs == inst.jobs
    assert int(make_rng(np.int64(3)).integers(100)) == int(make_rng(3).integers(100))
    assert pipeline.stage_time(0.010, 2e8, 1, 25e9) == 0.01
    assert pipeline.stage_time(math.inf, 2e8, np.int64(2), math.inf) == math.inf  # a segment without a pipeline
    times = pipeline.stage_time(np.array([0.01, math.inf]), np.array([2e8, 0.0]), 2, 25e9, np.array([1.0, 2.0]))
    assert times[0] == pytest.approx(0.013) and times[1] == math.inf
    # a 0-d array is a number too (it was refused as "got ndarray")
    assert pipeline.stage_time(np.asarray(0.01), np.asarray(2e8), np.asarray(2), np.asarray(25e9)) == pytest.approx(
        pipeline.stage_time(0.01, 2e8, 2, 25e9))
    assert psim.synthetic_draw(("classA",), 0, 0)["classA"].shape == (0,)
    assert psim.synthetic_draw((), 4, None) == {}


def test_missing_files_and_directories_stay_the_documented_os_errors(tmp_path: Path) -> None:
    """A missing input file is still the ``FileNotFoundError`` the readers documented, now also a
    pal-opt error (:class:`~pal_opt.errors.MissingFileError`, an ``InstanceError``; every reader:
    ``test_public_api_sweep.py``); a directory given for a file is an ``InstanceError`` on reading
    and an ``IsADirectoryError`` on writing, each naming the path."""
    with pytest.raises(FileNotFoundError, match="nope.json: no such instance file") as err:
        pal_opt.load_instance(tmp_path / "nope.json")
    assert isinstance(err.value, InstanceError) and err.value.filename == str(tmp_path / "nope.json")
    with pytest.raises(InstanceError, match="is a directory, expected an instance file"):
        pal_opt.load_instance(tmp_path)
    inst, _ = _round()
    with pytest.raises(IsADirectoryError, match="is a directory"):
        pal_opt.save_instance(inst, tmp_path)


def test_make_rng_seeds_as_numpy_does_none_being_seed_0() -> None:
    gen = np.random.default_rng(9)
    assert make_rng(gen) is gen
    assert make_rng(None).integers(1 << 30, size=4).tolist() == np.random.default_rng(0).integers(1 << 30, size=4).tolist()
    assert make_rng(5).integers(1 << 30, size=4).tolist() == np.random.default_rng(5).integers(1 << 30, size=4).tolist()
