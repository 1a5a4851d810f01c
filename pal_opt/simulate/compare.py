"""Simulation runs compared: the result files of several ``pal-opt simulate`` runs side by side.

``pal-opt simulate --policy a,b`` compares policies within one run; the runs a researcher wants
to set against each other are often separate ones (other seeds, another λ, a code change, a
Sia trace with and without variability).  :func:`load_runs` reads their result files (a run of
one policy, or ``{"policies", "results"}`` of several) into ``{label: result}``,
:func:`comparison_report` gives the table ``pal-opt compare`` prints (the figures both
simulators share, :data:`~pal_opt.simulate.fields.SHARED_FIELDS`, each run's average JCT against
the first's, the settings in which the runs differ, and per job the JCT against the first run's
over the jobs both finished), and :func:`summary_csv_text` the same table as CSV.  The figure is
:func:`~pal_opt.simulate.metrics.result_figure` (or, when a file has no per-round log, as a Sia
result of an earlier version has not, :func:`~pal_opt.simulate.metrics.jct_figure`).
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InputTypeError, InstanceError, MissingFileError, OptionError
from ..io.jsonfile import field_path
from ..io.messages import explain
from ..io.validation import SchemaChecker
from ..options import file_path, require_items, require_mapping
from .fields import with_shared_names
from .metrics import job_key, job_ratios

__all__ = ["RUN_FIELDS", "RESULT_SCHEMA", "load_runs", "run_settings", "differing_settings", "comparison_report", "summary_csv_text",
           "job_jcts_csv_text"]

#: The columns of :func:`summary_csv_text` after ``run`` and ``file``: figures of both simulators
#: (seconds where they are times, :data:`~pal_opt.simulate.fields.SHARED_FIELDS`).
RUN_FIELDS: tuple[str, ...] = (
    "n_jobs", "n_completed", "avg_jct", "p50_jct", "p99_jct", "max_jct", "makespan", "utilisation",
    "avg_queueing_delay", "p99_queueing_delay", "rounds", "restarts", "avg_restarts_per_job", "solve_seconds_total",
)
#: What a result must hold to be compared.
_NEEDED = ("n_jobs", "n_completed", "avg_jct", "job_results")
#: The settings of a Sia run (kept at the top of its result), as :func:`run_settings` reads them.
_SIA_SETTINGS = ("trace", "policy", "ilp_mode", "cluster", "round_length", "policy_parameters", "category",
                 "variability", "seed")
#: A PAL run's ``config`` entries that describe the cluster the settings already name.
_DERIVED = ("num_gpus", "num_servers")

_COUNT = {"type": "integer", "minimum": 0}
_FIGURE = {"type": ["number", "null"], "minimum": 0}
_NUMBERS = {"type": "array", "items": {"type": "number", "minimum": 0}}
#: The shape of the fields a comparison reads (the table, the settings, the per-job JCTs, the
#: figure's round log and the cluster size it divides by); the rest of a result is free-form.
RESULT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "a result of pal-opt simulate, as pal-opt compare reads it",
    "type": "object",
    "required": list(_NEEDED),
    "properties": {
        **{k: _FIGURE for k in RUN_FIELDS},
        "n_jobs": _COUNT, "n_completed": _COUNT,
        "config": {"type": "object", "properties": {"round_length": {"type": "number", "exclusiveMinimum": 0}}},
        "num_gpus": {"type": "integer", "minimum": 1},
        "round_length": {"type": "number", "exclusiveMinimum": 0},
        "cluster": {"type": ["object", "string"]},
        "job_results": {"type": "array", "items": {
            "type": "object",
            "required": ["jct"],
            "anyOf": [{"required": ["job_id"]}, {"required": ["name"]}],
            "properties": {"jct": _FIGURE, "job_id": {"type": ["integer", "string"]}, "name": {"type": "string"},
                           "submit_time": _FIGURE},
        }},
        "round_log": {"type": "object", "required": ["time"],
                      "properties": {"time": _NUMBERS, "busy_gpu_seconds": _NUMBERS, "gpus_in_use": _NUMBERS}},
    },
}


@functools.cache
def _checker() -> SchemaChecker:
    return SchemaChecker(RESULT_SCHEMA)


def _result_problem(result: Any) -> tuple[str, str] | None:
    """``(field path, what is wrong)`` of the first field of ``result`` that a comparison reads
    and cannot (:data:`RESULT_SCHEMA`; a job's id given twice, more jobs finished than run), or
    None; the path is ``""`` for the whole result."""
    missing = [k for k in _NEEDED if k not in result] if isinstance(result, dict) else []
    if missing:
        return "", f"not a result of pal-opt simulate: no {', '.join(missing)} (a result file of simulate --out is needed)"
    problem = _checker().first_problem(result)
    if problem is not None:
        path, message = explain(problem, _MESSAGES)
        return field_path(path), message
    if result["n_completed"] > result["n_jobs"]:
        return "n_completed", f"{result['n_completed']} jobs finished of {result['n_jobs']}"
    seen: dict[Any, int] = {}
    for i, job in enumerate(result["job_results"]):
        k = job_key(job)[0]
        if k in seen:
            key = "job_id" if "job_id" in job else "name"
            return f"job_results[{i}].{key}", f"{k!r} again (job_results[{seen[k]}] is that job)"
        seen[k] = i
    return _log_problem(result)


def _log_problem(result: Mapping[str, Any]) -> tuple[str, str] | None:
    """What the figure's utilisation panel needs and a result with a round log lacks: a column per
    round time, the round length and the GPUs it divides by."""
    log = result.get("round_log")
    if log is None:
        return None
    column = "busy_gpu_seconds" if "busy_gpu_seconds" in log else "gpus_in_use"
    if column not in log:
        return "round_log", "needs busy_gpu_seconds (PAL traces) or gpus_in_use (Sia traces)"
    if len(log[column]) != len(log["time"]):
        return f"round_log.{column}", f"{len(log[column])} rounds, but round_log.time has {len(log['time'])}"
    if column == "busy_gpu_seconds":
        needed = [k for k, v in (("config.round_length", _mapping(result.get("config")).get("round_length")),
                                 ("num_gpus", result.get("num_gpus"))) if v is None]
    else:
        cluster = result.get("cluster")
        ok = isinstance(cluster, Mapping) and all(
            isinstance(t, Mapping) and all(type(t.get(k)) is int and t[k] >= 0 for k in ("nodes", "gpus_per_node"))
            for t in cluster.values())
        needed = [k for k, bad in (("round_length", "round_length" not in result),  # read by the shared names
                                   ("cluster (its types' nodes and gpus_per_node)", not ok)) if bad]
    if needed:
        return "round_log", f"its utilisation needs {' and '.join(needed)}"
    return None


_MESSAGES = {
    ("", "type"): "not a result of pal-opt simulate (a JSON object), got {got}",
    ("job_results[]", "anyOf"): "a job's record needs its job_id (PAL traces) or name (Sia traces)",
}


def _results_of(doc: Any, source: str) -> dict[str, Mapping[str, Any]]:
    """``{policy: result}`` of one result file (``{"policies", "results"}``, or one result)."""
    if isinstance(doc, dict) and isinstance(doc.get("format"), str) and doc["format"].startswith("pal-opt/"):
        raise InstanceError(f"is a {doc['format'].replace('/', ' ')} file, not a result of pal-opt simulate "
                            "(a result file of simulate --out is needed)", source=source)
    if not isinstance(doc, dict):
        raise InstanceError("not a result of pal-opt simulate (a JSON object)", source=source)
    if "results" in doc and "policies" in doc:
        results = doc["results"]
        if not isinstance(results, dict) or not results:
            raise InstanceError("must map each policy to its result", source=source, path="results")
        found = {str(p): with_shared_names(r) if isinstance(r, dict) else r for p, r in results.items()}
    else:
        found = {str(doc.get("policy") or _mapping(doc.get("config")).get("policy") or "run"): with_shared_names(doc)}
    for policy, res in found.items():
        where = f"results.{policy}" if "results" in doc else ""
        bad = _result_problem(res)
        if bad is not None:
            path = ".".join(p for p in (where, bad[0]) if p)
            raise InstanceError(bad[1], source=source, path=path or None)
    return found


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _check_runs(runs: Any) -> dict[str, dict[str, Any]]:
    """``runs`` read by the shared names (:func:`~pal_opt.simulate.fields.with_shared_names`: a
    result saved under the earlier names too); an :class:`~pal_opt.errors.InputTypeError` naming
    the argument unless it maps labels to results of ``pal-opt simulate`` (:func:`load_runs`); an
    ``OptionError`` for fewer than two."""
    require_mapping(runs, "runs", "a mapping of labels to results (load_runs)")
    out: dict[str, dict[str, Any]] = {}
    for label, res in runs.items():
        if not isinstance(label, str):
            raise InputTypeError(f"a run's label must be a str, got {type(label).__name__} {label!r}", path="runs")
        require_mapping(res, f"runs[{label!r}]", "a result of pal-opt simulate (load_runs)")
        out[label] = with_shared_names(res)
        bad = _result_problem(dict(out[label]))
        if bad is not None:
            raise InputTypeError(bad[1], path=".".join(p for p in (f"runs[{label!r}]", bad[0]) if p))
    if len(runs) < 2:
        raise OptionError(f"compare needs at least two runs, got {len(runs)}")
    return out


def _labels(paths: Sequence[str], stems: bool) -> list[str]:
    """A name per file: its stem (``r1`` for ``out/r1.json``), or the path as given where two
    files share a stem."""
    names = [os.path.splitext(os.path.basename(p))[0] for p in paths]
    return names if stems and len(set(names)) == len(names) else list(paths)


def load_runs(paths: Sequence[str | os.PathLike[str]]) -> dict[str, dict[str, Any]]:
    """``{label: result}`` of the result files of ``pal-opt simulate --out``, in order.

    A file of one policy is labelled by its name (``r1`` for ``r1.json``); a file of several
    policies gives one run per policy, ``r1:pal``, ``r1:ilp`` (just ``pal``, ``ilp`` when it is
    the only file).  Files that share a name are labelled by their paths.

    Raises
    ------
    InstanceError
        A file that cannot be read, is not JSON, or is not a result of ``pal-opt simulate``
        (naming the file and the field).
    OptionError
        Fewer than two runs in all.
    """
    from ..io.jsonfile import load_json

    names = [os.fspath(file_path(p, "paths")) for p in require_items(paths, "paths", "a list of result files")]
    _refuse_labels(names)
    _refuse_twice(names)
    files = {p: _results_of(load_json(p, what="result file"), p) for p in names}
    for stems in (True, False):  # by paths where a file's name and policy would read as another's
        runs: dict[str, dict[str, Any]] = {}
        for name, (path, results) in zip(_labels(names, stems), files.items(), strict=True):
            for policy, res in results.items():
                label = policy if len(files) == 1 else name if len(results) == 1 else f"{name}:{policy}"
                runs[label] = dict(res, _file=path)
        if len(runs) == sum(map(len, files.values())):
            break
    if len(runs) < 2:
        held = f"{', '.join(names)} hold{'s' * (len(names) == 1)} {len(runs)}" if names else "no file given"
        raise OptionError(f"compare needs at least two runs: {held} (give more files, or a file of several policies)")
    return runs


def _refuse_labels(names: Sequence[str]) -> None:
    """A :class:`~pal_opt.errors.MissingFileError` that says so for a run's label given as a file
    (``r1.json:pal``, as the table names a run of a file of several policies)."""
    for name in names:
        file, sep, policy = name.rpartition(":")
        if sep and file and policy and not os.path.exists(name) and os.path.isfile(file):
            raise MissingFileError(f"no such result file (FILE:POLICY is how compare labels a run of a file of "
                                   f"several policies, not a file to give: give {file}, each of whose policies is "
                                   "a run)", source=name)


def _refuse_twice(names: Sequence[str]) -> None:
    """An :class:`~pal_opt.errors.OptionError` for a result file given twice (by one path or two:
    :func:`~pal_opt.cliargs.same_file`)."""
    from ..cliargs import same_file

    for k, name in enumerate(names):
        first = next((seen for seen in names[:k] if same_file(seen, name)), None)
        if first is not None:
            again = "" if first == name else f" (as {first})"
            raise OptionError(f"{name}: given twice{again}; compare each result file once (a file of several "
                              "policies gives a run per policy)")


def run_settings(result: Mapping[str, Any]) -> dict[str, Any]:
    """What a run was asked to do: a PAL run's ``config`` (without what it derives from the
    cluster), a Sia run's settings (trace, policy, cluster, round, variability, seed, ...)."""
    require_mapping(result, "result", "a result of pal-opt simulate (a mapping)")
    result = with_shared_names(result)  # a Sia result saved before: round_seconds
    config = result.get("config")
    if isinstance(config, Mapping):
        return {k: v for k, v in config.items() if k not in _DERIVED}
    return {k: result[k] for k in _SIA_SETTINGS if k in result}


def differing_settings(runs: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{setting: {label: value}}`` of the settings (:func:`run_settings`) whose values are not
    the same in every run (a setting one run lacks counts as None there)."""
    runs = _check_runs(runs)
    settings = {label: run_settings(r) for label, r in runs.items()}
    keys = list(dict.fromkeys(k for s in settings.values() for k in s))
    out: dict[str, dict[str, Any]] = {}
    for key in keys:
        values = {label: s.get(key) for label, s in settings.items()}
        if len({json.dumps(v, sort_keys=True, default=str) for v in values.values()}) > 1:
            out[key] = values
    return out


def _hours(seconds: Any) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f}"


def _table(runs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per run: jobs finished, JCT figures and makespan in hours, utilisation, average
    queueing delay, restarts per job, and the average JCT against the first run's."""
    width = max(len("run"), *(len(label) for label in runs))
    head = (f"{'run':<{width}}  {'jobs':>9}  {'avg JCT':>7}  {'p50 JCT':>7}  {'p99 JCT':>7}  {'makespan':>8}  "
            f"{'util':>5}  {'queueing':>8}  {'restarts':>8}  vs first")
    lines = [head, f"{'':<{width}}  {'':>9}  {'h':>7}  {'h':>7}  {'h':>7}  {'h':>8}  {'':>5}  {'h avg':>8}  {'per job':>8}"]
    ref = next(iter(runs.values())).get("avg_jct")
    for k, (label, r) in enumerate(runs.items()):
        vs = "" if k == 0 else "-" if not ref or r.get("avg_jct") is None else f"{r['avg_jct'] / ref - 1:+.1%}"
        util = r.get("utilisation")
        restarts = r.get("avg_restarts_per_job")
        lines.append(
            f"{label:<{width}}  {str(r['n_completed']) + '/' + str(r['n_jobs']):>9}  {_hours(r['avg_jct']):>7}  "
            f"{_hours(r.get('p50_jct')):>7}  {_hours(r.get('p99_jct')):>7}  {_hours(r.get('makespan')):>8}  "
            f"{'-' if util is None else f'{util:.3f}':>5}  {_hours(r.get('avg_queueing_delay')):>8}  "
            f"{'-' if restarts is None else f'{restarts:.2f}':>8}  {vs}".rstrip())
    return lines


def _per_job_lines(first: str, runs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Per job, each later run's JCT against the first's over the jobs both finished."""
    ref = runs[first]
    width = max(len(label) for label in runs)
    lines = [f"per-job JCT against {first}'s (over the jobs both finished):"]
    for label, r in list(runs.items())[1:]:
        ratio = job_ratios(ref, r)
        other = _other_jobs(first, ref, label, r)
        note = "" if other is None else f" ({other}: another trace? a job is compared only with itself)"
        if not ratio.size:
            lines.append(f"  {label:<{width}}  no job finished under both{note}")
            continue
        faster, slower = int(np.sum(ratio < 1 - 1e-9)), int(np.sum(ratio > 1 + 1e-9))
        lines.append(f"  {label:<{width}}  median {float(np.median(ratio)):.3f}x, {faster} faster, {slower} slower, "
                     f"{ratio.size - faster - slower} the same (of {ratio.size}){note}")
    return lines


def _other_jobs(first: str, ref: Mapping[str, Any], label: str, r: Mapping[str, Any]) -> str | None:
    """Where run ``label`` holds another job than the first run under the same id (submitted at
    another time): the first such job, in words; None if every shared id is the same job."""
    submitted = {job_key(j)[0]: j.get("submit_time") for j in ref["job_results"]}
    for j in r["job_results"]:
        key, when = job_key(j)
        if key in submitted and when != submitted[key]:
            return f"job {key} was submitted at {_seconds(submitted[key])} in {first}, at {_seconds(when)} in {label}"
    return None


def _seconds(t: Any) -> str:
    return "an unknown time" if t is None else f"{t:g} s"


def _finished(result: Mapping[str, Any]) -> frozenset[Any]:
    """The jobs (:func:`~pal_opt.simulate.metrics.job_key`) a run finished: those of a JCT."""
    return frozenset(job_key(j) for j in result["job_results"] if isinstance(j, Mapping) and j.get("jct") is not None)


def comparison_report(runs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The lines ``pal-opt compare`` prints for ``{label: result}`` (:func:`load_runs`): the
    table, a note when the averages are over different jobs (other counts finished, or as
    many but not the same), the settings that differ, and the per-job comparison against the
    first run."""
    runs = _check_runs(runs)
    lines = _table(runs)
    done = {label: (r["n_completed"], r["n_jobs"]) for label, r in runs.items()}
    if len(set(done.values())) > 1 or len({_finished(r) for r in runs.values()}) > 1:
        # a run stopped early (--max-hours), or another trace; or as many jobs but not the same
        lines.append("the averages are over different jobs: " + ", ".join(
            f"{label} {c} of {n}" for label, (c, n) in done.items()) + " finished")
    differ = differing_settings(runs)
    lines.append("settings that differ:" + ("" if differ else " none (the same settings in every run)"))
    for key, values in differ.items():
        groups: dict[str, list[str]] = {}
        for label, v in values.items():
            groups.setdefault(json.dumps(v, sort_keys=True, default=str), []).append(label)
        lines.append(f"  {key}: " + "; ".join(f"{v} ({', '.join(labels)})" for v, labels in groups.items()))
    lines.extend(_per_job_lines(next(iter(runs)), runs))
    return lines


def summary_csv_text(runs: Mapping[str, Mapping[str, Any]]) -> str:
    """One CSV row per run: ``run``, ``file``, ``policy`` and :data:`RUN_FIELDS` (empty where a
    run lacks a figure)."""
    runs = _check_runs(runs)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(("run", "file", "policy", *RUN_FIELDS))
    for label, r in runs.items():
        policy = run_settings(r).get("policy")
        w.writerow((label, r.get("_file", ""), "" if policy is None else policy,
                    *("" if r.get(k) is None else r[k] for k in RUN_FIELDS)))
    return out.getvalue()


def job_jcts_csv_text(runs: Mapping[str, Mapping[str, Any]]) -> str:
    """One CSV row per job (its id, or name on a Sia trace, in the first run's order, then the
    jobs only later runs have; a job of another trace that shares an id, submitted at another
    time, is a row of its own): ``job``, ``submit_time`` (seconds; empty if the file lacks it), then per run ``jct:LABEL`` (seconds; empty where the run
    did not finish it or has no such job) and, for every run after the first, ``ratio:LABEL``,
    its JCT over the first run's (empty unless both finished it)."""
    runs = _check_runs(runs)
    labels = list(runs)
    jct = {label: {job_key(j): j.get("jct") for j in r["job_results"]} for label, r in runs.items()}
    keys = list(dict.fromkeys(k for label in labels for k in jct[label]))
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(("job", "submit_time", *(f"jct:{label}" for label in labels),
                *(f"ratio:{label}" for label in labels[1:])))
    for key, submitted in keys:
        values = [jct[label].get((key, submitted)) for label in labels]
        first = values[0]
        ratios = ["" if not first or v is None else v / first for v in values[1:]]
        w.writerow((key, "" if submitted is None else submitted, *("" if v is None else v for v in values), *ratios))
    return out.getvalue()
