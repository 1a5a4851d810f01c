"""The trace-driven round simulator.

>>> from pal_opt.simulate import SimConfig, parse_cluster  # doctest: +SKIP
>>> res = simulate(read_trace("workload-6.csv"), build_cluster(parse_cluster("16x4")),
...                SimConfig(policy="pal"))  # doctest: +SKIP
>>> res.summary["avg_jct"]  # doctest: +SKIP

See :mod:`.engine` for the round semantics, :mod:`.queue` for the queue policies,
:mod:`.variability` for how GPUs draw their factors, :mod:`.records` for what a run records,
:mod:`.summary` for the headline figures, :mod:`.metrics` for tables, files and plots and
:mod:`.compare` for the result files of several runs side by side (``pal-opt compare``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_attributes

# loaded on first use (PEP 562): ``pal-opt --help`` imports this package for its sub-command
_EXPORTS: dict[str, str] = {
    "ClusterSpec": ".engine",
    "SimConfig": ".engine",
    "build_cluster": ".engine",
    "parse_cluster": ".engine",
    "restart_cost_units": ".engine",
    "simulate": ".engine",
    "comparison_report": ".compare",
    "job_jcts_csv_text": ".compare",
    "load_runs": ".compare",
    "summary_csv_text": ".compare",
    "JOB_COLUMNS": ".metrics",
    "jobs_csv_text": ".metrics",
    "jobs_table": ".metrics",
    "plot_jct_cdf": ".metrics",
    "plot_result": ".metrics",
    "plot_utilization": ".metrics",
    "result_to_dict": ".metrics",
    "write_json_atomic": ".metrics",
    "write_text_atomic": ".metrics",
    "QUEUE_POLICIES": ".queue",
    "QueueEntry": ".queue",
    "order_queue": ".queue",
    "JobRecord": ".records",
    "RoundRecord": ".records",
    "SimulationResult": ".records",
    "summarize": ".summary",
    "class_files": ".variability",
    "draw_cluster_factors": ".variability",
    "shared_longhorn_dir": ".variability",
    "synthetic_draw": ".variability",
}

if TYPE_CHECKING:
    from .compare import comparison_report, job_jcts_csv_text, load_runs, summary_csv_text
    from .engine import (
        ClusterSpec,
        SimConfig,
        build_cluster,
        parse_cluster,
        restart_cost_units,
        simulate,
    )
    from .metrics import (
        JOB_COLUMNS,
        jobs_csv_text,
        jobs_table,
        plot_jct_cdf,
        plot_result,
        plot_utilization,
        result_to_dict,
        write_json_atomic,
        write_text_atomic,
    )
    from .queue import QUEUE_POLICIES, QueueEntry, order_queue
    from .records import JobRecord, RoundRecord, SimulationResult
    from .summary import summarize
    from .variability import class_files, draw_cluster_factors, shared_longhorn_dir, synthetic_draw

__all__ = [
    "ClusterSpec",
    "JobRecord",
    "RoundRecord",
    "SimConfig",
    "SimulationResult",
    "build_cluster",
    "parse_cluster",
    "restart_cost_units",
    "simulate",
    "comparison_report",
    "job_jcts_csv_text",
    "load_runs",
    "summary_csv_text",
    "JOB_COLUMNS",
    "jobs_csv_text",
    "jobs_table",
    "plot_jct_cdf",
    "plot_result",
    "plot_utilization",
    "result_to_dict",
    "summarize",
    "write_json_atomic",
    "write_text_atomic",
    "QUEUE_POLICIES",
    "QueueEntry",
    "order_queue",
    "class_files",
    "draw_cluster_factors",
    "shared_longhorn_dir",
    "synthetic_draw",
]


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
