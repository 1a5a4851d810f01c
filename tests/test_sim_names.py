"""The two simulators' public names alike (the fifteenth session's review): the Sia simulator's
``SimConfig`` takes the policy's name as ``policy=`` (the PAL simulator's name) and Sia's
parameters as ``sia_params=``; its summary function is ``summarize``; its result file gives the
round length as ``round_length``.  The former names still work, each with a
``DeprecationWarning`` naming the new one, and result files saved under them still load."""

from __future__ import annotations

import json
import pickle
import re
import runpy
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pal_opt.hetero.configs import GpuType
from pal_opt.hetero.ilptypes import IlpTypesPolicy
from pal_opt.hetero.policy import SiaParams, SiaPolicy
from pal_opt.hetero.scheduler import TypedScheduler
from pal_opt.hetero.simulate import JobRecord, SiaResult, SimConfig, summarise, summarize
from pal_opt.io.jsonfile import load_json
from pal_opt.io.traces import read_trace
from pal_opt.model import Cluster
from pal_opt.simulate import SimConfig as PalSimConfig
from pal_opt.simulate import comparison_report, load_runs, result_to_dict, simulate
from pal_opt.simulate.compare import run_settings
from pal_opt.simulate.fields import (
    PAL_ALIASES,
    PAL_FILE_ALIASES,
    SHARED_FIELDS,
    SIA_ALIASES,
    SIA_FILE_ALIASES,
    with_shared_names,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
P = SiaParams(p=-1.0, time_limit=5.0)


def _no_warning(make: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        return make()


# -- the configuration ----------------------------------------------------------------------------
def test_the_sia_config_takes_the_pal_configs_names_without_a_warning() -> None:
    cfg = _no_warning(lambda: SimConfig(policy="ilp", sia_params=P, round_length=30.0, max_time=3600.0))
    assert (cfg.policy, cfg.sia_params, cfg.round_length, cfg.max_time) == ("ilp", P, 30.0, 3600.0)
    pal = PalSimConfig(policy="pal", round_length=30.0, max_time=3600.0)
    shared = ("policy", "round_length", "max_time", "failures")
    assert all(hasattr(pal, n) and hasattr(cfg, n) for n in shared)
    assert _no_warning(lambda: SimConfig()).policy == "sia" and SimConfig().sia_params == SiaParams()
    assert _no_warning(lambda: replace(cfg, round_length=60.0)) == SimConfig(policy="ilp", sia_params=P, max_time=3600.0)
    assert _no_warning(lambda: pickle.loads(pickle.dumps(cfg))) == cfg  # no __init__ on the way back


def test_method_still_names_the_policy_with_a_warning_naming_policy() -> None:
    with pytest.warns(DeprecationWarning, match=r"method= is deprecated, use policy=") as rec:
        cfg = SimConfig(method="gavel")
    assert cfg.policy == "gavel" and cfg == SimConfig(policy="gavel")
    assert [Path(w.filename).name for w in rec] == ["test_sim_names.py"]  # points at the caller
    with pytest.warns(DeprecationWarning, match=r"SimConfig\.method is deprecated, use SimConfig\.policy") as rec:
        assert cfg.method == "gavel"
    assert Path(rec[0].filename).name == "test_sim_names.py"


def test_policy_given_sia_params_still_sets_them_with_a_warning_naming_sia_params() -> None:
    with pytest.warns(DeprecationWarning, match=r"policy= given Sia's parameters \(a SiaParams\) is deprecated, "
                                                r"use sia_params=") as rec:
        cfg = SimConfig(policy=P)
    assert (cfg.policy, cfg.sia_params) == ("sia", P) and len(rec) == 1
    assert Path(rec[0].filename).name == "test_sim_names.py"


def test_an_earlier_call_in_full_and_positional_still_works() -> None:
    """The earlier positional order (round_length, policy, max_time, method) and both old names."""
    with pytest.warns(DeprecationWarning) as rec:
        a = SimConfig(60.0, P, 7200.0, "ilp")
        b = SimConfig(round_length=60.0, policy=P, max_time=7200.0, method="ilp")
    assert a == b == SimConfig(policy="ilp", sia_params=P, max_time=7200.0)
    assert sorted(str(w.message).split(": ", 1)[1].split(" is ")[0] for w in rec) == [
        "method=", "method=", "policy= given Sia's parameters (a SiaParams)", "policy= given Sia's parameters (a SiaParams)"]


def test_replace_with_an_old_name_uses_it() -> None:
    """``dataclasses.replace`` passes every field, so an old name given to it meets its new one:
    the old one given is the one used."""
    cfg = SimConfig(policy="ilp", sia_params=P)
    with pytest.warns(DeprecationWarning, match="method="):
        assert replace(cfg, method="pal").policy == "pal"  # type: ignore[call-arg]
    with pytest.warns(DeprecationWarning, match="sia_params="):
        assert replace(cfg, policy=SiaParams()).sia_params == SiaParams()  # type: ignore[arg-type]


def test_bad_values_under_either_name_are_one_line() -> None:
    from pal_opt.errors import OptionError

    with pytest.raises(OptionError, match=r"^unknown policy 'gavle' for a cluster of GPU types \(choose from sia, "):
        SimConfig(policy="gavle")
    with pytest.raises(OptionError, match=r"^unknown policy 'gavle'"), pytest.warns(DeprecationWarning):
        SimConfig(method="gavle")
    with pytest.raises(OptionError, match=r"^sia_params must be a SiaParams \(the Sia policy's parameters\), got 3$"):
        SimConfig(sia_params=3)  # type: ignore[arg-type]


# -- the scheduler and the policies: sia_params, as SimConfig -------------------------------------
def test_the_typed_scheduler_takes_sia_params_without_a_warning(profiles: Path) -> None:
    sched = _no_warning(lambda: TypedScheduler("aws:1x4", profiles, "ilp", sia_params=P, applications=["cifar10"]))
    assert sched.config == SimConfig(policy="ilp", sia_params=P)
    with_backend = _no_warning(lambda: TypedScheduler("aws:1x4", profiles, sia_params=P, backend="cpsat",
                                                      applications=["cifar10"]))
    assert with_backend.config.sia_params == replace(P, backend="cpsat")


def test_the_typed_schedulers_params_still_work_with_a_warning_naming_sia_params(profiles: Path) -> None:
    with pytest.warns(DeprecationWarning, match=r"^pal_opt\.hetero\.TypedScheduler: params= is deprecated, use "
                                                r"sia_params= \(the name of Sia's parameters throughout") as rec:
        sched = TypedScheduler("aws:1x4", profiles, "ilp", params=P, applications=["cifar10"])
    assert sched.config == SimConfig(policy="ilp", sia_params=P) and len(rec) == 1
    assert Path(rec[0].filename).name == "test_sim_names.py"  # points at the caller
    from pal_opt.errors import OptionError

    with pytest.raises(OptionError, match=r"^pal_opt\.hetero\.TypedScheduler: give sia_params= only \(params= is "
                                          r"its deprecated name\), not both$"):
        TypedScheduler("aws:1x4", profiles, params=P, sia_params=P)
    with pytest.raises(OptionError, match=r"^params must be a SiaParams, got 3$"), pytest.warns(DeprecationWarning):
        TypedScheduler("aws:1x4", profiles, params=3)  # type: ignore[arg-type]
    with pytest.raises(OptionError, match=r"^sia_params must be a SiaParams, got 3$"):
        TypedScheduler("aws:1x4", profiles, sia_params=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("cls", [SiaPolicy, IlpTypesPolicy], ids=lambda c: c.__name__)
def test_the_policies_take_sia_params_and_params_warns(cls: type[SiaPolicy]) -> None:
    cluster = (GpuType("aws", 1, 4),)
    assert _no_warning(lambda: cls(cluster, sia_params=P)).sia_params == P
    assert _no_warning(lambda: cls(cluster, P)).sia_params == P  # positional: unchanged
    assert _no_warning(lambda: cls(cluster)).sia_params == SiaParams()
    name = cls.__name__
    with pytest.warns(DeprecationWarning, match=rf"^pal_opt\.hetero\.{name}: params= is deprecated, use sia_params=") as rec:
        policy = cls(cluster, params=P)
    assert policy.sia_params == P and len(rec) == 1 and Path(rec[0].filename).name == "test_sim_names.py"
    with pytest.warns(DeprecationWarning, match=rf"{name}\.params is deprecated, use {name}\.sia_params") as rec:
        assert policy.params == P
    assert Path(rec[0].filename).name == "test_sim_names.py"
    from pal_opt.errors import InputTypeError, OptionError

    with pytest.raises(OptionError, match=r"give sia_params= only"):
        cls(cluster, P, params=P)
    with pytest.raises(InputTypeError, match=r"^params: must be a SiaParams, got int 3$"), pytest.warns(DeprecationWarning):
        cls(cluster, params=3)  # type: ignore[arg-type]


def test_gavels_round_is_round_length_and_round_seconds_warns() -> None:
    """``GavelPolicy``'s round was the last ``round_seconds`` of the package's API."""
    from pal_opt.errors import OptionError
    from pal_opt.hetero.gavel import GAVEL_ROUND, GavelPolicy

    cluster = (GpuType("aws", 1, 4),)
    assert _no_warning(lambda: GavelPolicy(cluster, round_length=60.0)).round_length == 60.0
    assert _no_warning(lambda: GavelPolicy(cluster, 90.0)).round_length == 90.0  # positional: unchanged
    assert _no_warning(lambda: GavelPolicy(cluster)).round_length == GAVEL_ROUND == 360.0
    with pytest.warns(DeprecationWarning, match=r"^pal_opt\.hetero\.GavelPolicy: round_seconds= is deprecated, use "
                                                r"round_length=") as rec:
        policy = GavelPolicy(cluster, round_seconds=60.0)
    assert policy.round_length == 60.0 and len(rec) == 1 and Path(rec[0].filename).name == "test_sim_names.py"
    with pytest.warns(DeprecationWarning, match=r"GavelPolicy\.round_seconds is deprecated, use "
                                                r"GavelPolicy\.round_length") as rec:
        assert policy.round_seconds == 60.0
    assert len(rec) == 1 and Path(rec[0].filename).name == "test_sim_names.py"
    with pytest.raises(OptionError, match=r"^pal_opt\.hetero\.GavelPolicy: give round_length= only \(round_seconds= "
                                          r"is its deprecated name\), not both$"):
        GavelPolicy(cluster, 60.0, round_seconds=60.0)
    with (pytest.raises(OptionError, match=r"^round_seconds must be a number of seconds > 0 and at most 1e\+15, got 0$"),
          pytest.warns(DeprecationWarning)):
        GavelPolicy(cluster, round_seconds=0)


# -- the summary ----------------------------------------------------------------------------------
def _sia_result() -> SiaResult:
    jobs = tuple(JobRecord(f"j{i}", "a", "adaptive", 10.0 * i, 10.0 * i + 60, 10.0 * i + 100 + i, i % 3, 1)
                 for i in range(4))
    return SiaResult(jobs, np.array([[2], [1]]), (GpuType("x", 1, 2),), 60.0, 1.5, 0.75, 0, 3.0)


def test_summarize_is_the_pal_simulators_name_and_summarise_warns() -> None:
    import pal_opt.hetero
    import pal_opt.simulate

    res = _sia_result()
    new = _no_warning(lambda: summarize(res))
    assert new == res.summary() and pal_opt.hetero.summarize is summarize
    assert pal_opt.simulate.summarize.__name__ == summarize.__name__ == "summarize"
    with pytest.warns(DeprecationWarning, match=r"summarise is deprecated, use summarize") as rec:
        assert summarise(res) == new
    assert Path(rec[0].filename).name == "test_sim_names.py"


# -- result files ---------------------------------------------------------------------------------
def _pal_doc(tmp_path: Path) -> dict[str, Any]:
    trace = tmp_path / "pal.csv"
    trace.write_text("job_id,num_gpus,submit_time,duration,model\n0,1,0,600,resnet50\n1,2,0,900,resnet50\n")
    cluster = Cluster.uniform(1, 4, {c: [1.0] * 4 for c in ("classA", "classB", "classC", "classD")})
    return result_to_dict(simulate(read_trace(trace), cluster, PalSimConfig(policy="pal")))


def _as_written_before(doc: dict[str, Any], aliases: dict[str, str]) -> dict[str, Any]:
    """``doc`` as a file written before the shared names: each new name only under its old one."""
    old = {k: v for k, v in doc.items() if k not in aliases.values() and k not in aliases}
    old.update({o: doc[n] for o, n in aliases.items()})
    return old


def test_a_pal_file_saved_under_the_old_names_compares_as_a_new_one(tmp_path: Path) -> None:
    doc = _pal_doc(tmp_path)
    assert doc["queueing_delay"] == doc["avg_queueing_delay"]  # the file's own alias, still written
    old = _as_written_before(doc, {**PAL_ALIASES, **PAL_FILE_ALIASES})
    assert "n_jobs" not in old and "avg_queueing_delay" not in old
    read = with_shared_names(old)
    assert {k: read[k] for k in SHARED_FIELDS} == {k: doc[k] for k in SHARED_FIELDS}
    (tmp_path / "new.json").write_text(json.dumps(doc))
    (tmp_path / "old.json").write_text(json.dumps(old))
    runs = load_runs([tmp_path / "new.json", tmp_path / "old.json"])
    lines = comparison_report(runs)
    assert lines[2].split()[1:] == lines[3].split()[1:9] and lines[3].endswith("+0.0%")  # the same figures
    assert "settings that differ: none (the same settings in every run)" in lines


def _sia_doc(round_key: str) -> dict[str, Any]:
    res = _sia_result()
    doc = {"trace": "t.csv", "trace_format": "sia", "policy": "sia", "ilp_mode": None,
           "cluster": {"x": {"nodes": 1, "gpus_per_node": 2, "node_limit": 1}}, round_key: 60.0,
           "policy_parameters": {"p": -0.5}, "category": None, "variability": {}, "seed": None, **summarize(res),
           "job_results": [{"name": r.name, "jct": r.jct} for r in res.jobs]}
    return doc


def test_a_sia_file_saved_with_round_seconds_and_jobs_compares_as_a_new_one(tmp_path: Path) -> None:
    new = _sia_doc("round_length")
    old = _as_written_before(_sia_doc("round_seconds"), {**SIA_ALIASES, "jobs": "job_results"})
    assert "round_length" not in old and "job_results" not in old and "solve_seconds_total" not in old
    assert run_settings(old) == run_settings(new) and run_settings(new)["round_length"] == 60.0
    (tmp_path / "new.json").write_text(json.dumps(new))
    (tmp_path / "old.json").write_text(json.dumps(old))
    runs = load_runs([tmp_path / "new.json", tmp_path / "old.json"])
    assert runs["old"]["solve_seconds_total"] == 1.5 and runs["old"]["job_results"] == new["job_results"]
    assert "settings that differ: none (the same settings in every run)" in comparison_report(runs)


def test_the_new_names_of_the_sia_file_are_its_old_ones_renamed() -> None:
    assert SIA_FILE_ALIASES == {"jobs": "job_results", "round_seconds": "round_length"}
    assert PAL_FILE_ALIASES == {"queueing_delay": "avg_queueing_delay"}


@pytest.mark.parametrize("path", sorted(RESULTS.glob("*.json")), ids=lambda p: p.name)
def test_every_committed_result_file_still_loads(path: Path) -> None:
    """The committed ``benchmarks/results/*.json`` load with the guarded reader, and the
    simulator results in them read by the shared names (``with_shared_names``) without a value
    changed."""
    doc = load_json(path, what="result file", max_bytes=16 << 20)
    if path.name == "sia_fidelity.json":  # whole Sia result files, written with round_seconds
        for variant in doc["variants"].values():
            read = with_shared_names(variant["ours"])
            assert read["round_length"] == variant["ours"]["round_seconds"] == 60.0
            assert set(SHARED_FIELDS) <= set(read) and run_settings(variant["ours"])["round_length"] == 60.0
    elif re.fullmatch(r"sia_\w+_runs\.json|pal_a1_w6_summary\.json", path.name):
        runs = doc if isinstance(doc, list) else list(doc.values())
        for run in runs:
            read = with_shared_names(run)
            assert {k: read[k] for k in run} == run and set(read) & set(SHARED_FIELDS) == set(run) & set(SHARED_FIELDS)


# -- nothing in the repository uses an old name ---------------------------------------------------
@pytest.mark.filterwarnings("error:pal_opt:DeprecationWarning")
def test_the_gpu_types_example_runs_on_the_new_names_without_a_deprecation() -> None:
    mod = runpy.run_path(str(ROOT / "examples" / "gpu_types.py"))
    if not mod["PROFILES"].is_dir() or not mod["LONGHORN"].is_dir():
        pytest.skip(f"Sia profiles or Longhorn measurements not available under {mod['SHARED']}")
    out = mod["main"]()
    assert out is not None and out["sia"]["n_completed"] == 6


@pytest.mark.filterwarnings("error:pal_opt:DeprecationWarning")
def test_the_sia_round_loop_example_runs_on_the_new_names_without_a_deprecation() -> None:
    """The TypedScheduler example (``sia_round_loop.py``), with pal-opt's DeprecationWarnings as errors."""
    mod = runpy.run_path(str(ROOT / "examples" / "sia_round_loop.py"))
    if not mod["PROFILES"].is_dir():
        pytest.skip(f"Sia profiles not available under {mod['SHARED']}")
    jct = mod["main"]()
    assert jct is not None and len(jct) == 6


#: the deprecated names as a caller writes them: the Sia SimConfig's method= and policy=SiaParams(...),
#: summarise, params= of TypedScheduler and the policies, reading a policy's params or a config's
#: method, reading a Sia result's round_seconds, and GavelPolicy's round_seconds= and .round_seconds
OLD_NAMES = re.compile(
    r"SimConfig\([^)]*\bmethod=|hetero\.summarise\b|\bsummarise\(|\bpolicy=(?:params\b|SiaParams\()"
    r"|\b(?:TypedScheduler|SiaPolicy|IlpTypesPolicy)\([^)]*\bparams="
    r"|\b(?:self|policy|_policy)\.params\.(?:p|lambda_n|lambda_a|backend|time_limit|project_throughputs"
    r"|share_max_replicas)\b|\b(?:config|cfg)\.method\b|\[[\"']round_seconds[\"']\]|get\([\"']round_seconds[\"']"
    r"|\bGavelPolicy\([^)]*\bround_seconds=|\.round_seconds\b")


def test_the_old_names_pattern_finds_each_old_name() -> None:
    """The pattern below finds each deprecated spelling, and none of the new ones."""
    for text in ('SimConfig(60.0, method="ilp")', "hetero.summarise(r)", "SimConfig(policy=SiaParams(p=-1))",
                 'TypedScheduler(c, d, "ilp", params=P)', "SiaPolicy(c, params=P)", "IlpTypesPolicy(c, params=P)",
                 "self.params.time_limit", "cfg.method", 'doc["round_seconds"]', "r.get('round_seconds')",
                 "GavelPolicy(c, round_seconds=60)", "policy.round_seconds"):
        assert OLD_NAMES.search(text), text
    for text in ('SimConfig(policy="ilp", sia_params=P)', "TypedScheduler(c, d, sia_params=P)", "self.sia_params.p",
                 "job.params[t]", "instance.params.round_length", 'doc["round_length"]', "summarize(r)",
                 "GavelPolicy(c, round_length=60)", "policy.round_length", "cfg.gavel_round"):
        assert not OLD_NAMES.search(text), text


def test_no_script_or_page_of_the_repository_uses_an_old_name() -> None:
    """The examples, benchmarks, tests and the package's code, and the code blocks of README and
    docs, give the new names (the prose naming the old ones as deprecated, the modules that define
    them, this file and the CHANGELOG name them on purpose)."""
    old = OLD_NAMES
    defining = {ROOT / "pal_opt" / "hetero" / "simulate.py", ROOT / "pal_opt" / "simulate" / "fields.py",
                ROOT / "pal_opt" / "hetero" / "gavel.py",
                ROOT / "tests" / "test_sim_names.py",
                ROOT / "tests" / "test_public_api_sweep.py"}  # it calls every public callable, summarise too
    code = [p for p in (*ROOT.glob("examples/*.py"), *ROOT.glob("pal_opt/**/*.py"), *ROOT.glob("benchmarks/*.py"),
                        *ROOT.glob("tests/*.py"))
            if p not in defining and p.name != "suite.py"]  # suite.py: a summarise() of its own
    texts = {p: p.read_text() for p in code}
    for page in (ROOT / "README.md", ROOT / "ARCHITECTURE.md", *ROOT.glob("docs/**/*.md"), *ROOT.glob("formulations/*.md")):
        texts[page] = "\n".join(re.findall(r"```[^\n]*\n(.*?)```", page.read_text(), flags=re.S))
    hits = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p, text in texts.items() for m in old.finditer(text)]
    assert hits == []
    assert sum("SimConfig(" in t for t in texts.values()) > 5  # it looked at the callers
