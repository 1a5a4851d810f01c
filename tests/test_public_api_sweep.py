"""Every public callable, given ``None`` (and a str) for each argument it requires, raises a
pal-opt error, never Python's raw ``AttributeError``, ``KeyError``, ``IndexError``,
``ZeroDivisionError`` or ``TypeError`` from deep inside; a call that takes the value is listed in
:data:`TAKES_BAD`, with why (a call that took it passed unchecked until 2026-12-07).

The callables are the functions and classes of ``__all__`` of ``pal_opt`` and of its subpackages
(:data:`PACKAGES`).  For each, every required parameter in turn gets the bad value while the
others get valid values: from :data:`BY_NAME` (by parameter name), :data:`BY_CALLABLE` (where a
name means something else) or, for a record class, the fields of a real object of it
(:data:`EXAMPLES`).  :data:`SKIPPED` lists the callables left out, each with the reason.
``test_the_valid_values_are_valid`` checks that the valid values are (a sweep whose other
arguments were already wrong would prove nothing).

Its first run, on 204 of the 240 public callables (1,210 calls), found 257 calls in 74 callables
that raised Python's own errors (122 ``AttributeError``, 85 ``TypeError``, 41 ``ValueError``, 6
``IndexError``, 3 ``FileNotFoundError``), mostly helpers that take pal-opt's own objects
(``summarize(None)``: ``'NoneType' object has no attribute 'jobs'``; ``pace_factor(None, ...)``:
``... 'pipeline'``; the Sia model's ``app``, ``cs``, ``curves``, ``cluster``...); each is now an
:class:`~pal_opt.errors.InputTypeError` naming the argument (or an ``OptionError`` for a count).

Every optional argument given a junk object (``test_a_junk_optional_argument_is_a_pal_opt_error``),
those of callables with no required argument too (:data:`JUNK_SWEPT`), is refused with a pal-opt
error too, unless :data:`TAKES_ANY` lists it (records pal-opt builds, labels used only in
messages), each with the reason.

A missing file (``test_a_missing_file_is_a_pal_opt_error``) is a
:class:`~pal_opt.errors.MissingFileError`: a pal-opt error and a ``FileNotFoundError``, naming it.
"""

from __future__ import annotations

import enum
import errno
import functools
import importlib
import inspect
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pal_opt
from pal_opt.errors import PalOptError
from pal_opt.methods import get_method

#: the sweep calls the deprecated ``pal_opt.hetero.summarise``, ``params=`` of ``TypedScheduler`` and
#: the policies and ``round_seconds=`` of ``GavelPolicy`` too (tests/test_sim_names.py checks their warnings)
pytestmark = [pytest.mark.filterwarnings("ignore:pal_opt.hetero.simulate. summarise is deprecated:DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:pal_opt.hetero.[A-Za-z]+. params= is deprecated:DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:pal_opt.hetero.GavelPolicy. round_seconds= is deprecated:"
                                         "DeprecationWarning")]

PACKAGES = ("pal_opt", "pal_opt.io", "pal_opt.ilp", "pal_opt.cost", "pal_opt.simulate", "pal_opt.pipeline",
            "pal_opt.topology", "pal_opt.hetero", "pal_opt.policies")
SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SIA = SHARED / "data" / "sia-artifact"
PROFILE_TEXT = ("node1 -- Linear -- forward_compute_time=1.0, backward_compute_time=1.0, activation_size=4.0, "
                "parameter_size=8.0\nnode2 -- Linear -- forward_compute_time=2.0, backward_compute_time=1.0, "
                "activation_size=4.0, parameter_size=8.0\n\tnode1 -- node2\n")


def public_callables() -> dict[str, Any]:
    """``{"package.name": callable}`` of every package's ``__all__``, each object once (under the
    first package that exports it)."""
    out: dict[str, Any] = {}
    seen: set[int] = set()
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            if callable(obj) and id(obj) not in seen:
                seen.add(id(obj))
                out[f"{package}.{name}"] = obj
    return out


class Env:
    """The valid objects the sweep passes, each made once (the session's)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.examples: dict[str, Any] = {}

    @functools.cached_property
    def inst(self) -> pal_opt.RoundInstance:
        return pal_opt.generate_instance(nodes=2, gpus_per_node=4, jobs=4, seed=0)

    @functools.cached_property
    def result(self) -> pal_opt.PlacementResult:
        return pal_opt.solve(self.inst, "pal")

    @functools.cached_property
    def factors(self) -> Any:
        return pal_opt.binned_factors(self.inst.cluster)

    @functools.cached_property
    def form(self) -> Any:
        from pal_opt.ilp import build_formulation

        return build_formulation(self.inst)

    @functools.cached_property
    def topology(self) -> Any:
        from pal_opt.topology import graphml_text, parse_graphml

        return parse_graphml(graphml_text(self.inst.cluster))

    @functools.cached_property
    def profile(self) -> Any:
        from pal_opt.pipeline import parse_profile

        return parse_profile(PROFILE_TEXT)

    @functools.cached_property
    def trace(self) -> Any:
        from pal_opt.io.traces import TraceJob

        return [TraceJob(0, 2, 0.0, 100.0, "resnet50", "classA", 1.0)]

    @functools.cached_property
    def sim_result(self) -> Any:
        from pal_opt.simulate import simulate

        return simulate(self.trace, self.inst.cluster)

    def file(self, name: str, text: str) -> Path:
        path = self.tmp / name
        if not path.exists():
            path.write_text(text)
        return path

    # the Sia model (the artifact's profiles, beside the repository)
    @functools.cached_property
    def apps(self) -> Any:
        from pal_opt.hetero import load_applications

        if not SIA.is_dir():
            pytest.skip(f"shared data not available at {SIA}")
        return load_applications(SIA / "profiles", ["cifar10"])

    @functools.cached_property
    def app(self) -> Any:
        return self.apps["cifar10"]

    @functools.cached_property
    def gpu_types(self) -> Any:
        from pal_opt.hetero import GpuType

        return (GpuType("aws", 2, 4),)

    @functools.cached_property
    def configs(self) -> Any:
        from pal_opt.hetero import enumerate_configs

        return enumerate_configs(self.gpu_types)

    @functools.cached_property
    def layout(self) -> Any:
        from pal_opt.hetero import Layout

        return Layout(self.gpu_types)

    @functools.cached_property
    def type_profile(self) -> Any:
        return self.app.types["aws"]

    @functools.cached_property
    def workload_job(self) -> Any:
        from pal_opt.hetero import JobKind, WorkloadJob

        return WorkloadJob("cifar10-0", 0.0, "cifar10", 2, 128, JobKind.RIGID)

    @functools.cached_property
    def workload(self) -> Any:
        from pal_opt.hetero import Workload

        return Workload("<memory>", (self.workload_job,))

    @functools.cached_property
    def sim_job(self) -> Any:
        from pal_opt.hetero import SimJob

        return SimJob(0, self.workload_job, self.app, ("aws",))

    @functools.cached_property
    def round_input(self) -> Any:
        from pal_opt.hetero import RoundInput, fairness_costs

        goodput = np.linspace(1.0, 2.0, len(self.configs))[None, :]
        return RoundInput(self.configs, fairness_costs(goodput))

    @functools.cached_property
    def joint_round(self) -> Any:
        from pal_opt.hetero import JointRound, LevelRound
        from pal_opt.hetero.jointprogram import make_cells

        cs, layout = self.configs, self.layout
        factors = np.ones((1, layout.num_gpus))
        levels = [[np.unique(factors[0])]]
        counts = [[np.array([layout.num_gpus])]]
        goodput = np.linspace(1.0, 2.0, len(cs))[None, :]
        r = LevelRound(cs, goodput, np.zeros(1, dtype=np.int64), levels, counts, np.full((1, 2), -1, dtype=np.int64),
                       np.zeros((0, 1)), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        cells = make_cells(layout.type_of, layout.server_of(), factors, np.ones(layout.num_gpus, dtype=bool))
        return JointRound(r, cells, np.zeros((1, len(cells)), dtype=np.int64))

    @functools.cached_property
    def partition(self) -> Any:
        from pal_opt.pipeline.partition import partition

        return partition(self.profile, [2], [25e9])

    @functools.cached_property
    def sia_result(self) -> Any:
        from pal_opt.hetero import SimConfig, simulate_sia

        return simulate_sia(self.workload, self.apps, self.gpu_types, SimConfig(max_time=600.0))


V = Callable[[Env], Any]


def _instance_file(e: Env) -> Path:
    path = e.tmp / "round.json"
    if not path.exists():
        pal_opt.save_instance(e.inst, path)
    return path


#: Valid values by parameter name.
BY_NAME: dict[str, V] = {
    "instance": lambda e: e.inst,
    "result": lambda e: e.result,
    "cluster": lambda e: e.inst.cluster,
    "factors": lambda e: e.factors,
    "job": lambda e: e.inst.jobs[0],
    "placements": lambda e: e.result.placements,
    "placement": lambda e: e.result,
    "failed": lambda e: [0],
    "topology": lambda e: e.topology,
    "profile": lambda e: e.profile,
    "form": lambda e: e.form,
    "name": lambda e: "x",
    "method": lambda e: "pal",
    "app": lambda e: e.app,
    "apps": lambda e: e.apps,
    "applications": lambda e: e.apps,
    "gpu_type": lambda e: "aws",
    "cs": lambda e: e.configs,
    "layout": lambda e: e.layout,
    "workload": lambda e: e.workload,
    "inp": lambda e: e.round_input,
    "curves": lambda e: e.app.validation,
    "epoch": lambda e: 1,
    "kind": lambda e: e.workload_job.kind,
    "num_nodes": lambda e: 1,
    "num_replicas": lambda e: 2,
    "gpus_per_node": lambda e: 4,
    "n_gpus": lambda e: 4,
    "num_gpus": lambda e: 4,
    "seed": lambda e: 0,
    "variability": lambda e: pal_opt.hetero.Variability(),
    "step_model": lambda e: pal_opt.hetero.ProfileStepModel(e.type_profile),
    "grad": lambda e: (0.1, 0.01),
    "choice": lambda e: pal_opt.hetero.BatchChoice(64, 1),
    "types": lambda e: e.gpu_types,
    "results": lambda e: {"pal": e.sim_result},
    "spec": lambda e: pal_opt.simulate.ClusterSpec(2, 4),
    "text": lambda e: "x",
    "path": lambda e: _instance_file(e),
    "batch_size": lambda e: np.array([128.0]),
    "init_batch_size": lambda e: np.array([128.0]),
    "grad_sqr": lambda e: np.array([0.1]),
    "grad_var": lambda e: np.array([0.01]),
}


def _out(name: str) -> V:
    return lambda e: e.tmp / "out" / name


GPUS_CSV = "GPU_ID,Node_ID,IN_USE,JOB_IDS,PerfVar_classA\n0,0,False,,1.0\n1,0,False,,1.1\n2,1,False,,1.2\n3,1,False,,1.3\n"
BLOCK = "cloud.google.com/gce-topology-block"
NODES = {"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1", BLOCK: "b", BLOCK.replace("block", "subblock"): "s"}},
                                   "status": {"capacity": {"nvidia.com/gpu": "4"}}}]}
JOBS_CSV = "job_id,num_gpus,model,perfclass\n1,2,resnet50,classA\n"
MEASURED_CSV = "x,uuid,perf\n0,a,10\n1,a,14\n2,b,12\n"


def _csv(name: str, text: str) -> V:
    return lambda e: e.file(name, text)


def _sim(field: str) -> V:
    return lambda e: getattr(e.sim_result, field)


def _two_runs(e: Env) -> dict[str, Any]:
    """Two runs for pal_opt.simulate.compare: the simulation's result file twice."""
    doc = pal_opt.simulate.result_to_dict(e.sim_result)
    return {"a": doc, "b": doc}


def _sia_dir(e: Env) -> Path:
    e.apps  # noqa: B018 - skips without the artifact
    return SIA / "profiles"


#: Valid values where a parameter's name means something else.
BY_CALLABLE: dict[str, dict[str, V]] = {
    "pal_opt.TypedScheduler": {"cluster": lambda e: e.gpu_types, "profiles": lambda e: e.apps},
    "pal_opt.cost.best_stage_order": {"gpu_ids": lambda e: (0, 1), "position": lambda e: {0: 0, 1: 1},
                                      "factors": lambda e: e.factors["classA"]},
    "pal_opt.cost.job_slowdown_pos": {"pos": lambda e: np.array([0, 1]), "factors": lambda e: e.factors["classA"]},
    "pal_opt.cost.left_out_charge": {"placed": lambda e: list(e.result.placements)},
    "pal_opt.cost.pace_factor": {"values": lambda e: np.array([1.0, 1.2])},
    "pal_opt.cost.relative_gap": {"objective": lambda e: 2.0, "bound": lambda e: 1.0, "gpus": lambda e: 4},
    "pal_opt.generate_instance": {"nodes": lambda e: 2, "jobs": lambda e: 2},
    "pal_opt.geomean_slowdown": {"cost": lambda e: 1.0, "gpus": lambda e: 2},
    "pal_opt.greedy_method": {"place": lambda e: pal_opt.policies.get_policy("pal"), "summary": lambda e: "x"},
    "pal_opt.policies.get_policy": {"name": lambda e: "pal"},
    "pal_opt.register_method": {"method": lambda e: get_method("pal"), "replace": lambda e: True},
    "pal_opt.register_cost_term": {"term": lambda e: pal_opt.cost.cost_terms()[0], "replace": lambda e: True},
    "pal_opt.ilp.decode": {"values": lambda e: pal_opt.ilp.encode(e.form, e.result.placements)},
    "pal_opt.ilp.solve_partitioned": {"k": lambda e: 1, "executor": lambda e: "serial"},
    "pal_opt.ilp.write_lp": {"path": _out("a.lp")},
    "pal_opt.instance_from_frames": {"gpu_df": lambda e: pd_frame(GPUS_CSV), "jobs_df": lambda e: pd_frame(JOBS_CSV)},
    "pal_opt.io.atomic_write_files": {"outputs": lambda e: {e.tmp / "out" / "b.txt": b"x"}},
    "pal_opt.io.atomic_write_json": {"path": _out("a.json"), "obj": lambda e: {}},
    "pal_opt.io.atomic_write_text": {"path": _out("a.txt")},
    "pal_opt.io.instance_from_dict": {"d": lambda e: pal_opt.io.instance_to_dict(e.inst)},
    "pal_opt.io.longhorn_paths": {"directory": lambda e: e.tmp},
    "pal_opt.io.register_param_schema": {"name": lambda e: "sweep", "subschema": lambda e: {"type": "object"}},
    "pal_opt.io.sample_factors": {"paths_by_class": lambda e: {"classA": e.file("m.csv", MEASURED_CSV)}},
    "pal_opt.io.load_jobs": {"path": _csv("jobs.csv", JOBS_CSV)},
    "pal_opt.io.load_measurements": {"path": _csv("m.csv", MEASURED_CSV)},
    "pal_opt.io.read_gpu_table": {"path": _csv("gpus.csv", GPUS_CSV)},
    "pal_opt.io.load_placement_file": {"path": _csv("p.json", '{"placements": {}}')},
    "pal_opt.job_slowdown": {"gpu_ids": lambda e: (0, 1)},
    "pal_opt.load_blox": {"gpus_path": _csv("gpus.csv", GPUS_CSV), "jobs_path": _csv("jobs.csv", JOBS_CSV)},
    "pal_opt.make_instance": {"jobs": lambda e: [{"id": 1, "demand": 1, "class": "classA"}]},
    "pal_opt.pal_locality": {"lam": lambda e: 1.7},
    "pal_opt.plot_placement": {"path": _out("a.png")},
    "pal_opt.save_instance": {"path": _out("r.json")},
    "pal_opt.register_backend": {"cls": lambda e: pal_opt.ilp.get_backend("highs")},
    "pal_opt.pipeline.allreduce_time": {"parameters": lambda e: 2e8, "replicas": lambda e: 2, "bandwidth": lambda e: 25e9},
    "pal_opt.pipeline.stage_time": {"compute": lambda e: 0.01, "parameters": lambda e: 2e8, "replicas": lambda e: 2,
                                    "bandwidth": lambda e: 25e9},
    "pal_opt.pipeline.load_profile": {"path": _csv("profile.txt", PROFILE_TEXT)},
    "pal_opt.pipeline.parse_profile": {"text": lambda e: PROFILE_TEXT},
    "pal_opt.simulate.order_queue": {"entries": lambda e: [pal_opt.simulate.QueueEntry(0, 0.0, 0.0, 1.0)]},
    "pal_opt.simulate.restart_cost_units": {"seconds": lambda e: 36.0, "round_length": lambda e: 360.0},
    "pal_opt.simulate.simulate": {"trace": lambda e: e.trace},
    "pal_opt.simulate.synthetic_draw": {"classes": lambda e: ("classA",)},
    "pal_opt.simulate.write_json_atomic": {"path": _out("s.json"), "obj": lambda e: {}},
    "pal_opt.simulate.write_text_atomic": {"path": _out("s.txt")},
    "pal_opt.simulate.jobs_csv_text": {"result": lambda e: e.sim_result},
    "pal_opt.simulate.jobs_table": {"result": lambda e: e.sim_result},
    "pal_opt.simulate.result_to_dict": {"result": lambda e: e.sim_result},
    "pal_opt.simulate.summarize": {"result": lambda e: e.sim_result},
    "pal_opt.simulate.plot_jct_cdf": {"path": _out("c.png")},
    "pal_opt.simulate.plot_result": {"path": _out("r.png")},
    "pal_opt.simulate.plot_utilization": {"path": _out("u.png")},
    "pal_opt.simulate.parse_cluster": {"text": lambda e: "2x4"},
    "pal_opt.simulate.comparison_report": {"runs": lambda e: _two_runs(e)},
    "pal_opt.simulate.summary_csv_text": {"runs": lambda e: _two_runs(e)},
    "pal_opt.simulate.job_jcts_csv_text": {"runs": lambda e: _two_runs(e)},
    "pal_opt.simulate.load_runs": {"paths": lambda e: [e.file(f"{n}.json", json.dumps(_two_runs(e)["a"]))
                                                       for n in ("a", "b")]},
    "pal_opt.topology.compress_hostlist": {"names": lambda e: ["n1", "n2"]},
    "pal_opt.topology.expand_hostlist": {"expr": lambda e: "n[1-2]"},
    "pal_opt.topology.measured_factors": {"directory": lambda e: pal_opt.simulate.shared_longhorn_dir() or e.tmp},
    "pal_opt.topology.parse_nodes": {"doc": lambda e: NODES},
    "pal_opt.topology.load_nodes": {"path": _csv("nodes.json", json.dumps(NODES))},
    "pal_opt.topology.load_graphml": {"path": lambda e: e.file("c.graphml", pal_opt.topology.graphml_text(e.inst.cluster))},
    "pal_opt.topology.parse_graphml": {"text": lambda e: pal_opt.topology.graphml_text(e.inst.cluster)},
    "pal_opt.topology.load_slurm": {"topology": _csv("topology.conf", "SwitchName=s Nodes=n[1-2]\n"),
                                   "gpus_per_node": lambda e: 4},
    "pal_opt.topology.parse_topology_conf": {"text": lambda e: "SwitchName=s Nodes=n[1-2]\n"},
    "pal_opt.topology.parse_gres_conf": {"text": lambda e: "NodeName=n1 Name=gpu Count=4\n"},
    "pal_opt.topology.parse_slurm_conf_gres": {"text": lambda e: "NodeName=n1 Gres=gpu:4\n"},
    "pal_opt.topology.parse_slurm_conf_gpus": {"text": lambda e: "NodeName=n1 Gres=gpu:4\n"},
    "pal_opt.hetero.summarise": {"result": lambda e: e.sia_result},
    "pal_opt.hetero.summarize": {"result": lambda e: e.sia_result},
    "pal_opt.hetero.application_names": {"profiles_dir": _sia_dir},
    "pal_opt.hetero.load_application": {"profiles_dir": _sia_dir, "app": lambda e: "cifar10"},
    "pal_opt.hetero.load_applications": {"profiles_dir": _sia_dir},
    "pal_opt.hetero.read_workload": {"path": lambda e: SIA / "workloads" / "newtrace-1.csv"},
    "pal_opt.hetero.read_philly": {"path": lambda e: SIA / "philly.csv"},
    "pal_opt.hetero.workload_from_frame": {"frame": lambda e: pd_frame(
        "name,time,application,num_replicas,batch_size\ncifar10-0,0,cifar10,2,128\n")},
    "pal_opt.hetero.parse_cluster": {"text": lambda e: "aws:2x4"},
    "pal_opt.hetero.build_cluster": {"spec": lambda e: [("aws", 2, 4)]},
    "pal_opt.hetero.canonical_placement": {"placement": lambda e: (2, 1)},
    "pal_opt.hetero.placement_id": {"placement": lambda e: (2, 1)},
    "pal_opt.hetero.choose_batch": {"placement": lambda e: (2,)},
    "pal_opt.hetero.initial_batch": {"placement": lambda e: (2,), "profile": lambda e: e.type_profile},
    "pal_opt.hetero.progress_rate": {"placement": lambda e: (2,)},
    "pal_opt.hetero.clamp_batch": {"profile": lambda e: e.type_profile},
    "pal_opt.hetero.ProfileStepModel": {"profile": lambda e: e.type_profile},
    "pal_opt.hetero.apply_reallocation": {"row": lambda e: np.ones(3), "factor": lambda e: 0.5, "previous": lambda e: 1},
    "pal_opt.hetero.draw_variability": {"files": lambda e: {}},
    "pal_opt.hetero.effective_type": {"touched": lambda e: [0]},
    "pal_opt.hetero.epoch_of": {"progress": lambda e: 0.5},
    "pal_opt.hetero.fairness_costs": {"goodput": lambda e: np.ones((1, 3))},
    "pal_opt.hetero.fit_perf_params": {"num_nodes": lambda e: np.array([1, 1, 2]),
                                       "num_replicas": lambda e: np.array([1, 2, 4]),
                                       "atomic_bsz": lambda e: np.array([32, 32, 32]),
                                       "accum_time": lambda e: np.array([0.1, 0.1, 0.1]),
                                       "step_time": lambda e: np.array([0.12, 0.15, 0.2])},
    "pal_opt.hetero.fit_shape": {"shape": lambda e: (2,), "max_nodes": lambda e: 1},
    "pal_opt.hetero.gang_state": {"gpus": lambda e: [0, 1]},
    "pal_opt.hetero.gavel_allocation": {"throughput": lambda e: np.ones((1, 1)), "scale": lambda e: [1],
                                        "workers": lambda e: [4]},
    "pal_opt.hetero.goodput_rows": {"requests": lambda e: [row_request(e)]},
    "pal_opt.hetero.make_policy": {"cluster": lambda e: e.gpu_types, "cfg": lambda e: pal_opt.hetero.SimConfig()},
    "pal_opt.hetero.max_replicas": {"requested": lambda e: 2, "profiled": lambda e: {"aws": 2},
                                    "gpu_types": lambda e: ["aws"]},
    "pal_opt.hetero.normalise_row": {"row": lambda e: np.ones(len(e.configs)),
                                     "known": lambda e: np.ones(len(e.configs), dtype=bool)},
    "pal_opt.hetero.optimize_goodput": {"grad": lambda e: (np.array([0.1]), np.array([0.01])),
                                        "num_nodes": lambda e: np.array([1]), "num_replicas": lambda e: np.array([2]),
                                        "max_batch_size": lambda e: np.array([1024]),
                                        "atomic_range": lambda e: (np.array([32]), np.array([256]))},
    "pal_opt.hetero.parse_variability": {"items": lambda e: []},
    "pal_opt.hetero.place_type": {"num_nodes": lambda e: 2, "demands": lambda e: [2]},
    "pal_opt.hetero.placement_shape": {"node_ids": lambda e: [0, 0]},
    "pal_opt.hetero.raw_goodput_row": {"valid": lambda e: np.ones(len(e.configs), dtype=bool),
                                       "goodput_fns": lambda e: {"aws": None}},
    "pal_opt.hetero.reallocation_factor": {"age": lambda e: 100.0, "restarts": lambda e: 1, "penalty": lambda e: 30.0},
    "pal_opt.hetero.round_step": {"policy": lambda e: pal_opt.hetero.SiaPolicy(e.gpu_types), "active": lambda e: [],
                                  "now": lambda e: 0.0},
    "pal_opt.hetero.throughput_ratio": {"to_type": lambda e: "aws", "from_type": lambda e: "aws"},
    "pal_opt.hetero.throughput_table": {"types": lambda e: ["aws"]},
    "pal_opt.hetero.valid_configs": {"caps": lambda e: {"aws": 8}},
    "pal_opt.hetero.check_workload": {"applications": lambda e: e.apps},
    "pal_opt.hetero.simulate_sia": {"cluster": lambda e: e.gpu_types},
    "pal_opt.hetero.SiaPolicy": {"cluster": lambda e: e.gpu_types},
    "pal_opt.hetero.IlpTypesPolicy": {"cluster": lambda e: e.gpu_types},
    "pal_opt.hetero.GavelPolicy": {"cluster": lambda e: e.gpu_types},
    "pal_opt.hetero.TypeBlindPolicy": {"method": lambda e: "pal"},
    "pal_opt.hetero.build_joint_program": {"jr": lambda e: e.joint_round},
    "pal_opt.hetero.build_level_program": {"r": lambda e: e.joint_round.level},
    "pal_opt.hetero.solve_joint": {"prog": lambda e: pal_opt.hetero.build_joint_program(e.joint_round),
                                   "backend": lambda e: "highs", "time_limit": lambda e: None},
    "pal_opt.hetero.SimJob": {"index": lambda e: 0, "spec": lambda e: e.workload_job, "type_names": lambda e: ("aws",)},
}


def pd_frame(text: str) -> Any:
    import io

    import pandas as pd

    return pd.read_csv(io.StringIO(text))


def row_request(e: Env) -> Any:
    from pal_opt.hetero import RowRequest

    return RowRequest(e.app, e.workload_job.kind, 2, 128, (None,), None, (2,))


def _fields(obj: Any) -> V:
    return lambda e: obj


#: A real object of a record class: its fields are the valid values of its constructor.
EXAMPLES: dict[str, V] = {
    "pal_opt.Cluster": lambda e: e.inst.cluster,
    "pal_opt.Job": lambda e: e.inst.jobs[0],
    "pal_opt.Pipeline": lambda e: pal_opt.Pipeline((0.1, 0.2), (1, 1)),
    "pal_opt.Method": lambda e: get_method("pal"),
    "pal_opt.PlacementResult": lambda e: e.result,
    "pal_opt.RoundInstance": lambda e: e.inst,
    "pal_opt.cost.CostSummary": lambda e: pal_opt.evaluate(e.inst, e.result.placements, e.factors),
    "pal_opt.ilp.Formulation": lambda e: e.form,
    "pal_opt.ilp.Program": lambda e: e.form,
    "pal_opt.simulate.SimulationResult": lambda e: e.sim_result,
    "pal_opt.simulate.JobRecord": lambda e: e.sim_result.jobs[0],
    "pal_opt.simulate.RoundRecord": lambda e: e.sim_result.rounds[0],
    "pal_opt.simulate.ClusterSpec": lambda e: pal_opt.simulate.ClusterSpec(2, 4),
    "pal_opt.simulate.QueueEntry": lambda e: pal_opt.simulate.QueueEntry(0, 0.0, 0.0, 1.0),
    "pal_opt.pipeline.Profile": lambda e: e.profile,
    "pal_opt.pipeline.Layer": lambda e: e.profile.layers[0],
    "pal_opt.pipeline.StateGraph": lambda e: pal_opt.pipeline.build_states(e.profile),
    "pal_opt.pipeline.PartitionResult": lambda e: e.partition,
    "pal_opt.pipeline.PipelineStage": lambda e: e.partition.stages[0],
    "pal_opt.pipeline.LevelStage": lambda e: e.partition.levels[0][0],
    "pal_opt.topology.Topology": lambda e: e.topology,
    "pal_opt.topology.TopologyLevel": lambda e: pal_opt.topology.load_slurm(e.file("topology.conf", "SwitchName=s Nodes=n[1-2]\n"), gpus_per_node=4).levels[0],
    "pal_opt.topology.Hierarchy": lambda e: pal_opt.topology.parse_topology_conf("SwitchName=s Nodes=n[1-2]\n"),
    "pal_opt.policies.GreedyPlacement": lambda e: pal_opt.policies.GreedyPlacement({}, (), "prefix"),
    "pal_opt.hetero.Application": lambda e: e.app,
    "pal_opt.hetero.ValidationCurves": lambda e: e.app.validation,
    "pal_opt.hetero.TypeProfile": lambda e: e.type_profile,
    "pal_opt.hetero.StepTable": lambda e: e.type_profile.placements,
    "pal_opt.hetero.BatchChoice": lambda e: pal_opt.hetero.BatchChoice(64, 1),
    "pal_opt.hetero.StepTime": lambda e: pal_opt.hetero.StepTime(64, 0.1, 0.01),
    "pal_opt.hetero.TrainingTarget": lambda e: pal_opt.hetero.training_target(e.app),
    "pal_opt.hetero.PerfParams": lambda e: pal_opt.hetero.PerfParams(0.1, 0.01, 0.1, 0.01, 0.1, 0.01, 1.5),
    "pal_opt.hetero.Config": lambda e: e.configs.configs[0],
    "pal_opt.hetero.ConfigSet": lambda e: e.configs,
    "pal_opt.hetero.GpuType": lambda e: e.gpu_types[0],
    "pal_opt.hetero.Workload": lambda e: e.workload,
    "pal_opt.hetero.WorkloadJob": lambda e: e.workload_job,
    "pal_opt.hetero.PhillyTrace": lambda e: pal_opt.hetero.read_philly(SIA / "philly.csv"),
    "pal_opt.hetero.RoundInput": lambda e: e.round_input,
    "pal_opt.hetero.RoundDecision": lambda e: pal_opt.hetero.solve_round_dp(e.round_input),
    "pal_opt.hetero.RoundProgram": lambda e: pal_opt.hetero.build_round_program(e.round_input),
    "pal_opt.hetero.RowRequest": row_request,
    "pal_opt.hetero.SiaResult": lambda e: e.sia_result,
    "pal_opt.hetero.JobRecord": lambda e: e.sia_result.jobs[0],
    "pal_opt.hetero.HeteroPolicy": lambda e: pal_opt.hetero.HETERO_POLICIES.get_item("sia"),
    "pal_opt.hetero.GavelAllocation": lambda e: pal_opt.hetero.gavel_allocation(np.ones((1, 1)), [1], [4]),
    "pal_opt.hetero.JobAllocation": lambda e: pal_opt.hetero.JobAllocation("a", "queued"),
    "pal_opt.hetero.RoundPlan": lambda e: pal_opt.hetero.RoundPlan(0.0, (pal_opt.hetero.JobAllocation("a", "queued"),)),
    "pal_opt.hetero.LevelRound": lambda e: e.joint_round.level,
    "pal_opt.hetero.JointRound": lambda e: e.joint_round,
    "pal_opt.hetero.LevelProgram": lambda e: pal_opt.hetero.build_level_program(e.joint_round.level),
    "pal_opt.hetero.JointProgram": lambda e: pal_opt.hetero.build_joint_program(e.joint_round),
}

#: Callables left out, and why.
SKIPPED: dict[str, str] = {
    "pal_opt.policies.PolicyFn": "a type alias (Callable[..., GreedyPlacement]), not a function",
    "pal_opt.hetero.StepModel": "a type alias (a Callable), not a function",
}


def _required(fn: Any) -> list[inspect.Parameter]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [p for p in sig.parameters.values()
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _valid(key: str, fn: Any, env: Env) -> dict[str, Any]:
    params = _required(fn)
    if key in EXAMPLES:
        obj = env.examples[key] if key in env.examples else env.examples.setdefault(key, EXAMPLES[key](env))
        return {p.name: getattr(obj, p.name) for p in params}
    own = BY_CALLABLE.get(key, {})
    missing = [p.name for p in params if p.name not in own and p.name not in BY_NAME]
    if missing:
        raise LookupError(f"{key}: no valid value for {missing}")
    return {p.name: BY_NAME[p.name](env) for p in params if p.name not in own} | {k: v(env) for k, v in own.items()}


def _call(fn: Any, kwargs: dict[str, Any]) -> Any:
    params = _required(fn)
    args = [kwargs.pop(p.name) for p in params if p.kind is p.POSITIONAL_ONLY]
    return fn(*args, **kwargs)


def _skip_reason(key: str, fn: Any) -> str | None:
    if key in SKIPPED:
        return SKIPPED[key]
    if inspect.isclass(fn) and issubclass(fn, BaseException):
        return "an exception class (takes any message)"
    if inspect.isclass(fn) and issubclass(fn, enum.Enum):
        return "an Enum (a value it does not have is the Enum's own ValueError)"
    if not _required(fn):
        return "no required argument"
    return None


CALLABLES = public_callables()
SWEPT = {k: f for k, f in CALLABLES.items() if _skip_reason(k, f) is None}
#: The callables whose optional arguments the junk sweep calls: those of :data:`SWEPT` and those
#: with no required argument (``SolveOptions``, ``RoundPolicy``, ``get_backend``, the
#: simulators' configurations...), which the sweep of required arguments leaves out.
JUNK_SWEPT = SWEPT | {k: f for k, f in CALLABLES.items() if _skip_reason(k, f) == "no required argument"}


def _takes_text(param: inspect.Parameter) -> bool:
    """Whether ``param``'s annotation admits a string or a path (then ``"x"`` is a valid value:
    a missing file, swept by ``test_a_missing_file_is_a_pal_opt_error``, or a name)."""
    ann = param.annotation if isinstance(param.annotation, str) else getattr(param.annotation, "__name__", "")
    return any(word in str(ann) for word in ("str", "Path", "PathLike"))


CASES = [(key, p.name, bad) for key, fn in SWEPT.items() for p in _required(fn)
         for bad in ((None,) if _takes_text(p) else (None, "x"))]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("sweep")
    (tmp / "out").mkdir()
    yield Env(tmp)


@pytest.mark.parametrize("key", sorted(SWEPT))
def test_the_valid_values_are_valid(key: str, env: Env) -> None:
    fn = SWEPT[key]
    _call(fn, _valid(key, fn, env))


@pytest.mark.parametrize(("key", "param", "bad"), CASES, ids=[f"{k}-{p}-{b!r}" for k, p, b in CASES])
def test_a_bad_argument_is_a_pal_opt_error(key: str, param: str, bad: Any, env: Env) -> None:
    fn = SWEPT[key]
    kwargs = _valid(key, fn, env)
    if bad == "x" and isinstance(kwargs[param], str | os.PathLike):
        pytest.skip("a str is a valid value here (a missing file: test_a_missing_file_is_a_pal_opt_error)")
    kwargs[param] = bad
    listed = TAKES_BAD.get((key, param, bad))
    try:
        _call(fn, kwargs)
    except PalOptError as exc:
        assert "\n" not in str(exc), (key, param, str(exc))
        assert listed is None, f"{key}({param}={bad!r}) is refused now ({exc}): take it off TAKES_BAD"
    except Exception as exc:  # noqa: BLE001 - the point: which exception it is
        pytest.fail(f"{key}({param}={bad!r}) raised {type(exc).__name__}: {exc}")
    else:
        assert listed is not None, f"{key}({param}={bad!r}) took the value without a word"


def test_the_taken_list_names_real_calls() -> None:
    """Every :data:`TAKES_BAD` entry is a call the sweep makes (no stale entry)."""
    made = {(k, p, b) for k, p, b in CASES}
    assert set(TAKES_BAD) <= made, sorted(set(TAKES_BAD) - made, key=repr)


# --------------------------------------------------------------------------- junk optional arguments
class Junk:
    """An object no argument takes: not a number, str, path, mapping, sequence, callable or bool
    (it is truthy, as any object is: a flag that tested only its truth took it)."""

    def __repr__(self) -> str:
        return "<junk>"


def _optional(fn: Any) -> list[inspect.Parameter]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [p for p in sig.parameters.values()
            if p.default is not p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _each(key: str, params: str, why: str) -> dict[tuple[str, str], str]:
    return {(key, p): why for p in params.split()}


_OUTPUT = "a record pal-opt builds and returns (a result, a program, a measured profile); its fields are not checked"
_LABEL = "a name used only in messages (the file or input a value came from, what was read)"

#: Optional arguments that take any object, and why.  A junk object given to any other optional
#: argument must be refused with a pal-opt error; one listed here must be taken (a listed
#: argument that starts refusing fails too: take it off the list).
TAKES_ANY: dict[tuple[str, str], str] = {
    # records pal-opt builds for its callers: made by priced_result, the programs' builders, the
    # simulators and the profile readers, not by users; checking their fields would cost every round
    **_each("pal_opt.PlacementResult", "bound gap build_seconds backend backend_version jobs_to_terminate spanning "
            "unplaceable message seed info stages", _OUTPUT),
    **_each("pal_opt.cost.CostSummary", "by_term", _OUTPUT),
    **_each("pal_opt.ilp.Program", "col_group group_limit", _OUTPUT),
    **_each("pal_opt.ilp.Formulation", "col_group group_limit var_profile optional _cache", _OUTPUT),
    **_each("pal_opt.hetero.JointProgram", "col_group group_limit", _OUTPUT),
    **_each("pal_opt.hetero.LevelProgram", "col_group group_limit", _OUTPUT),
    **_each("pal_opt.hetero.RoundProgram", "col_group group_limit scale", _OUTPUT),
    **_each("pal_opt.hetero.LevelRound", "p lambda_n capacity",
            _OUTPUT + " (IlpTypesPolicy's stage 2 round, built from a checked RoundInput)"),
    **_each("pal_opt.hetero.JobAllocation", "gpu_type gpus servers shape batch_size atomic_bsz accum_steps change "
            "restarts reason", _OUTPUT),
    **_each("pal_opt.hetero.JobRecord", "failures lost_gpu_seconds", _OUTPUT),
    **_each("pal_opt.hetero.SiaResult", "slowdown_sum floor_sum job_rounds unplaceable stopped_at failures "
            "failure_log", _OUTPUT),
    **_each("pal_opt.hetero.StepTable", "placement", _OUTPUT),
    **_each("pal_opt.hetero.TypeProfile", "source _cache", _OUTPUT),
    **_each("pal_opt.pipeline.Layer", "line", _OUTPUT),
    **_each("pal_opt.pipeline.PartitionResult", "method backend", _OUTPUT),
    **_each("pal_opt.simulate.JobRecord", "first_start finish_time run_seconds attained preemptions moves restarts "
            "rounds_run rounds_spanning slowdown_seconds priority preempted_gpu_hours stages failures "
            "lost_gpu_seconds", _OUTPUT),
    **_each("pal_opt.simulate.RoundRecord", "note", _OUTPUT),
    **_each("pal_opt.simulate.SimulationResult", "summary unplaceable failures stopped_at solver_crashes", _OUTPUT),
    **_each("pal_opt.topology.Hierarchy", "notes", _OUTPUT),
    **_each("pal_opt.hetero.Variability", "raw binned files", _OUTPUT + " (draw_variability's draw)"),
    # checked where it is used: options.py is below the ilp layer, which defines WarmStart
    ("pal_opt.SolveOptions", "warm"): "checked by check_warm where a solve or a RoundPolicy takes it (pal_opt.ilp.warm "
                                      "is above options.py, which cannot import it)",
    # labels, shown only in messages
    **_each("pal_opt.hetero.build_cluster", "source", _LABEL),
    **_each("pal_opt.hetero.parse_cluster", "what", _LABEL),
    **_each("pal_opt.io.instance_from_dict", "source", _LABEL),
    **_each("pal_opt.io.load_json", "what arg", _LABEL),
    **_each("pal_opt.io.read_text", "what arg", _LABEL),
    **_each("pal_opt.simulate.simulate", "source", _LABEL),
    **_each("pal_opt.topology.placement_by_host", "source", _LABEL),
    **_each("pal_opt.topology.pod_placements", "source", _LABEL),
    **_each("pal_opt.topology.slurm_placement_text", "source instance_source", _LABEL),
    **_each("pal_opt.topology.slurm_rows", "source instance_source", _LABEL),
}

_NONE: tuple[Any, ...] = (None,)
_TEXT: tuple[Any, ...] = ("x",)
_BOTH: tuple[Any, ...] = (None, "x")
_RECORD = "a record pal-opt builds and returns (a result, a program, a configuration set); its fields are not checked"
_VALID = "a valid value (a job id may be a string)"
_JSON = "any JSON value is written, null and a string too"
_DEFAULT = "None is documented (the default backend, no time limit, a fresh seed, no bound proven)"


def _taken(key: str, params: str, bads: tuple[Any, ...], why: str) -> dict[tuple[str, str, Any], str]:
    return {(key, p, b): why for p in params.split() for b in bads}


#: Required arguments that take the sweep's bad value (``None``, or the str ``"x"``) without a
#: pal-opt error, and why.  Any other call must raise one; a listed call that starts refusing
#: fails too (take it off the list).  Until 2026-12-07 a call that took its bad value passed
#: unchecked: 561 of the 1,086 calls did, in 59 callables.
TAKES_BAD: dict[tuple[str, str, Any], str] = {
    **_taken("pal_opt.Job", "id", _TEXT, _VALID),
    **_taken("pal_opt.PlacementResult", "placements objective geomean_slowdown gpus_used "
                                        "solve_seconds", _BOTH, _RECORD),
    **_taken("pal_opt.PlacementResult", "method status admission", _NONE, _RECORD),
    **_taken("pal_opt.cost.CostSummary", "cost gpus geomean slowdown level moved", _BOTH, _RECORD),
    **_taken("pal_opt.cost.relative_gap", "bound", _NONE, _DEFAULT),
    **_taken("pal_opt.hetero.BatchChoice", "atomic_bsz accum_steps", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.Config", "type_index num_nodes num_gpus", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.Config", "gpu_type", _NONE, _RECORD),
    **_taken("pal_opt.hetero.ConfigSet", "types configs type_index num_nodes num_gpus", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.GavelAllocation", "x level normalised", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.HeteroPolicy", "summary factory", _NONE, _RECORD),
    **_taken("pal_opt.hetero.JobAllocation", "name state", _NONE, _RECORD),
    **_taken("pal_opt.hetero.JobRecord", "name application kind", _NONE, _RECORD),
    **_taken("pal_opt.hetero.JobRecord", "submit_time start_time completion_time restarts epochs", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.JointProgram", "c obj_offset A row_lo row_hi col_lo col_hi integrality "
                                            "col_job col_choice col_level num_adaptive num_rigid "
                                            "col_cost w_job w_cell scale lambda_n aggregate", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.JointProgram", "var_names row_names", _NONE, _RECORD),
    **_taken("pal_opt.hetero.JointRound", "level cells held", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.LevelProgram", "c obj_offset A row_lo row_hi col_lo col_hi integrality "
                                            "col_job col_choice col_level num_adaptive num_rigid", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.LevelProgram", "var_names row_names", _NONE, _RECORD),
    **_taken("pal_opt.hetero.LevelRound", "configs goodput job_class levels counts pinned rigid_costs "
                                          "rigid_gpus pinned_rigid", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.PerfParams", "alpha_c beta_c alpha_n beta_n alpha_r beta_r gamma", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.PhillyTrace", "source", _NONE, _RECORD),
    **_taken("pal_opt.hetero.PhillyTrace", "timestamp duration num_gpus gpu_time cluster", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.ProfileStepModel", "profile", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.RoundDecision", "adaptive rigid objective seconds", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.RoundDecision", "status backend", _NONE, _RECORD),
    **_taken("pal_opt.hetero.RoundPlan", "now jobs", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.RoundProgram", "c obj_offset A row_lo row_hi col_lo col_hi integrality "
                                            "col_job col_choice col_gpus col_type num_adaptive "
                                            "num_rigid", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.RoundProgram", "var_names row_names", _NONE, _RECORD),
    **_taken("pal_opt.hetero.RowRequest", "app kind requested_replicas requested_batch params grad "
                                          "profiled", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.SiaResult", "jobs gpus_in_use cluster round_length solve_seconds "
                                         "max_solve_seconds rounds_not_optimal wall_seconds", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.StepTable", "num_nodes num_replicas local_bsz step_time sync_time", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.TrainingTarget", "epochs progress", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.TypeProfile", "app gpu_type", _NONE, _RECORD),
    **_taken("pal_opt.hetero.TypeProfile", "placements scalability min_local_bsz max_local_bsz", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.ValidationCurves", "batch_sizes progress iteration metric grad_sqr "
                                                "grad_var", _BOTH, _RECORD),
    **_taken("pal_opt.hetero.Workload", "source", _NONE, _LABEL),
    **_taken("pal_opt.hetero.apply_reallocation", "previous", _NONE,
             "None is documented: the job had no configuration (the row is returned as it is; factor still checked)"),
    **_taken("pal_opt.hetero.solve_joint", "backend time_limit", _NONE, _DEFAULT),
    **_taken("pal_opt.ilp.Formulation", "c obj_offset A row_lo row_hi col_lo col_hi integrality "
                                        "instance admitted total_demand types profiles gpu_type "
                                        "type_levels var_kind var_type var_level var_span var_node "
                                        "var_job var_pool var_gtype pool_kind pool_profile pool_level "
                                        "pool_node", _BOTH, _RECORD),
    **_taken("pal_opt.ilp.Formulation", "var_names row_names factors", _NONE, _RECORD),
    **_taken("pal_opt.ilp.Program", "c obj_offset A row_lo row_hi col_lo col_hi integrality", _BOTH, _RECORD),
    **_taken("pal_opt.ilp.Program", "var_names row_names", _NONE, _RECORD),
    **_taken("pal_opt.io.atomic_write_json", "obj", _BOTH, _JSON),
    **_taken("pal_opt.load_blox", "jobs_path", _NONE, "None is documented: no job CSV, an empty queue (the cluster alone)"),
    **_taken("pal_opt.pipeline.Layer", "id description", _NONE, _RECORD),
    **_taken("pal_opt.pipeline.Layer", "forward_ms backward_ms activation_bytes parameter_bytes", _BOTH, _RECORD),
    **_taken("pal_opt.pipeline.LevelStage", "start end replicas compute_time level_time "
                                            "communication_time time", _BOTH, _RECORD),
    **_taken("pal_opt.pipeline.PartitionResult", "time_per_sample stages levels machines bandwidths "
                                                 "straight num_states single_stage_time "
                                                 "data_parallel_time layer_order", _BOTH, _RECORD),
    **_taken("pal_opt.pipeline.PipelineStage", "start end layers layer_ids replicas "
                                               "replicas_per_level compute_time", _BOTH, _RECORD),
    **_taken("pal_opt.pipeline.StateGraph", "profile antichains downsets ancestors cum_time "
                                            "cum_parameter cum_activation", _BOTH, _RECORD),
    **_taken("pal_opt.policies.GreedyPlacement", "placements jobs_to_terminate", _BOTH, _RECORD),
    **_taken("pal_opt.policies.GreedyPlacement", "admission", _NONE, _RECORD),
    **_taken("pal_opt.simulate.JobRecord", "job_id demand submit_time iterations ideal_seconds", _BOTH, _RECORD),
    **_taken("pal_opt.simulate.JobRecord", "model perfclass", _NONE, _RECORD),
    **_taken("pal_opt.simulate.QueueEntry", "index submit_time attained remaining_seconds", _BOTH, _RECORD),
    **_taken("pal_opt.simulate.RoundRecord", "time active running gpus_placed busy_gpu_seconds "
                                             "spanning preempted moved solve_seconds", _BOTH, _RECORD),
    **_taken("pal_opt.simulate.RoundRecord", "status", _NONE, _RECORD),
    **_taken("pal_opt.simulate.SimulationResult", "config", _NONE, _RECORD),
    **_taken("pal_opt.simulate.SimulationResult", "num_gpus jobs rounds fallbacks wall_seconds", _BOTH, _RECORD),
    **_taken("pal_opt.simulate.synthetic_draw", "seed", _NONE, _DEFAULT),
    **_taken("pal_opt.simulate.write_json_atomic", "obj", _BOTH, _JSON),
    **_taken("pal_opt.topology.Hierarchy", "hosts levels", _BOTH, _RECORD),
    **_taken("pal_opt.topology.Topology", "hosts", _BOTH, _RECORD),
    **_taken("pal_opt.topology.TopologyLevel", "name", _NONE, _RECORD),
    **_taken("pal_opt.topology.TopologyLevel", "group_of", _BOTH, _RECORD),
}

OPTIONAL_CASES = [(key, p.name) for key, fn in JUNK_SWEPT.items() for p in _optional(fn)]


@pytest.mark.parametrize(("key", "param"), OPTIONAL_CASES, ids=[f"{k}-{p}" for k, p in OPTIONAL_CASES])
@pytest.mark.filterwarnings("ignore:.* is deprecated, use:DeprecationWarning")  # a renamed argument, still taken
def test_a_junk_optional_argument_is_a_pal_opt_error(key: str, param: str, env: Env) -> None:
    """Every optional argument given a junk object (the others valid) raises a pal-opt error in one
    line, never Python's own from deep inside (its first run: 73 calls raised ``TypeError``,
    ``AttributeError`` or ``ValueError``, such as ``generate_instance(busy_fraction=...)``: ``'<='
    not supported``, ``write_lp(comment=...)``: ``no attribute 'splitlines'``; 148 took it, among
    them flags such as ``register_method(replace=...)`` that any object made true), unless
    :data:`TAKES_ANY` lists it.  Callables with no required argument were left out until a
    scheduler author's review found ``RoundPolicy("ilp", warm=5)`` built, ``get_backend(probe=...)``
    and ``class_files(shared=...)`` taking any object as a flag, ``AppSettings`` any field and
    ``simulate.SimConfig(ilp_options=[...]).validate()`` raising Python's ``TypeError``."""
    fn = JUNK_SWEPT[key]
    kwargs = _valid(key, fn, env)
    kwargs[param] = Junk()
    listed = TAKES_ANY.get((key, param))
    try:
        _call(fn, kwargs)  # a record checks its fields when built (simulate.SimConfig too)
    except PalOptError as exc:
        assert "\n" not in str(exc), (key, param, str(exc))
        assert listed is None, f"{key}({param}=<junk>) is refused now ({exc}): take it off TAKES_ANY"
    except Exception as exc:  # noqa: BLE001 - the point: which exception it is
        pytest.fail(f"{key}({param}=<junk>) raised {type(exc).__name__}: {exc}")
    else:
        assert listed is not None, f"{key}({param}=<junk>) took a junk object"


def test_the_junk_list_names_real_arguments() -> None:
    """Every :data:`TAKES_ANY` entry is an optional argument the sweep calls (no stale entry)."""
    assert set(TAKES_ANY) <= set(OPTIONAL_CASES), sorted(set(TAKES_ANY) - set(OPTIONAL_CASES))


def test_the_sweep_covers_the_public_api() -> None:
    skipped = {k: _skip_reason(k, f) for k, f in CALLABLES.items() if k not in SWEPT}
    assert len(CALLABLES) == len(SWEPT) + len(skipped)
    assert len(SWEPT) >= 150, len(SWEPT)


# --------------------------------------------------------------------------- missing files
def _readers(env: Env, missing: Path) -> dict[str, Callable[[], Any]]:
    """Every public function that reads a file or folder, given one that does not exist."""
    import pal_opt.hetero as he
    import pal_opt.io as pio
    import pal_opt.pipeline as pl
    import pal_opt.simulate as ps
    import pal_opt.topology as tp
    from pal_opt.io.traces import read_trace

    def conf() -> Path:
        return _csv("topology.conf", "SwitchName=s Nodes=n[1-2]\n")(env)

    def gpus() -> Path:
        return _csv("gpus.csv", GPUS_CSV)(env)

    return {
        "load_instance": lambda: pal_opt.load_instance(missing),
        "load_blox(gpus_path)": lambda: pal_opt.load_blox(missing, None),
        "load_blox(jobs_path)": lambda: pal_opt.load_blox(gpus(), missing),
        "generate_instance(measurements)": lambda: pal_opt.generate_instance(2, 4, 2, measurements={"classA": missing}),
        "io.load_jobs": lambda: pio.load_jobs(missing),
        "io.load_json": lambda: pio.load_json(missing),
        "io.load_measurements": lambda: pio.load_measurements(missing),
        "io.load_placement_file": lambda: pio.load_placement_file(missing),
        "io.read_gpu_table": lambda: pio.read_gpu_table(missing),
        "io.read_text": lambda: pio.read_text(missing),
        "io.sample_factors": lambda: pio.sample_factors({"classA": missing}, 4),
        "pipeline.load_profile": lambda: pl.load_profile(missing),
        "topology.load_graphml": lambda: tp.load_graphml(missing),
        "topology.load_nodes": lambda: tp.load_nodes(missing),
        "topology.load_slurm": lambda: tp.load_slurm(missing, gpus_per_node=4),
        "topology.load_slurm(slurm_conf)": lambda: tp.load_slurm(conf(), slurm_conf=missing),
        "topology.load_slurm(gres_conf)": lambda: tp.load_slurm(conf(), gres_conf=missing),
        "topology.measured_factors": lambda: tp.measured_factors(4, missing),
        "topology.topology_round(jobs)": lambda: tp.topology_round(env.topology, missing),
        "simulate.build_cluster(variability)": lambda: ps.build_cluster(ps.ClusterSpec(2, 4), {"classA": missing}),
        "simulate.draw_cluster_factors": lambda: ps.draw_cluster_factors(4, {"classA": missing}),
        "io.traces.read_trace": lambda: read_trace(missing),
        "hetero.read_workload": lambda: he.read_workload(missing),
        "hetero.read_philly": lambda: he.read_philly(missing),
        "hetero.load_applications": lambda: he.load_applications(missing),
        "hetero.load_application": lambda: he.load_application(missing, "cifar10"),
        "hetero.application_names": lambda: he.application_names(missing),
        "hetero.parse_variability": lambda: he.parse_variability([f"aws:classA={missing}"], (he.GpuType("aws", 2, 4),)),
        "TypedScheduler(profiles)": lambda: pal_opt.TypedScheduler("aws:2x4", missing),
    }


READERS = sorted(_readers(Env(Path()), Path()))  # the names; the calls are made with the test's paths


@pytest.mark.parametrize("name", READERS)
def test_a_missing_file_is_a_pal_opt_error(name: str, env: Env) -> None:
    """Also a ``FileNotFoundError`` (what these readers raised before, from deep inside), naming the file."""
    from pal_opt.errors import MissingFileError

    missing = env.tmp / "absent" / "nope.csv"
    with pytest.raises(MissingFileError) as err:
        _readers(env, missing)[name]()
    assert isinstance(err.value, FileNotFoundError) and isinstance(err.value, PalOptError)
    assert err.value.errno == errno.ENOENT and str(missing) in (err.value.filename or "")
    message = str(err.value)
    assert str(missing) in message and "\n" not in message, message


@pytest.mark.parametrize("argv", [
    ["solve", "{m}"], ["check", "{m}", "{m}"], ["repair", "{m}", "{m}", "--failed", "0"],
    ["export", "slurm", "{m}", "{m}", "-o", "{out}"], ["import", "blox", "--gpus", "{m}", "-o", "{out}"],
    ["import", "slurm", "{m}", "--gpus-per-node", "4", "-o", "{out}"], ["import", "k8s", "{m}", "-o", "{out}"],
    ["simulate", "{m}", "-o", "{out}"], ["simulate-sia", "{m}", "-o", "{out}"],
    ["partition", "{m}", "--machines", "4", "--bandwidth", "1e9"],
], ids=lambda a: " ".join(a[:2]))
def test_the_cli_reports_a_missing_file_in_one_line(argv: list[str], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from pal_opt.cli import main

    missing, out = tmp_path / "nope.json", tmp_path / "out.txt"
    rc = main([a.format(m=missing, out=out) for a in argv])
    captured = capsys.readouterr()
    assert rc == 2 and captured.out == ""
    assert captured.err.count("\n") == 1 and f"{missing}: " in captured.err, captured.err
    assert "no such" in captured.err.lower() and "Traceback" not in captured.err
    assert not out.exists()
