"""What every method returns: the normalised :class:`PlacementResult`."""

from __future__ import annotations

import enum
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from .model import JobId

__all__ = ["Status", "PlacementResult"]


class Status(enum.StrEnum):
    """Outcome of a solve.

    ``FEASIBLE`` is never reported as ``OPTIMAL``: a greedy policy's placement, or an integer
    program stopped with a gap, is ``FEASIBLE``.  ``FALLBACK`` means an exact solve found no
    solution in time and the result is the greedy placement, flagged as such.
    """

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    FALLBACK = "fallback"


@dataclass
class PlacementResult:
    """A placement and how it was obtained.  Identical in shape for every method and backend.

    Attributes
    ----------
    placements
        ``{job id: (GPU id, ...)}`` for every job placed this round (input ids).
    method
        ``"pal"``, ``"pmfirst"``, ``"packed"``, ``"packed-sticky"``, ``"random"`` or ``"ilp"``.
    status
        A :class:`Status`.
    objective
        Round cost of ``placements`` under the round's (binned) factors, from :mod:`pal_opt.cost`.
    bound
        Best proven lower bound on the round cost for the admitted jobs (exact methods), else None.
    gap
        Relative gap of the geometric-mean slowdown, gm(objective)/gm(bound) − 1, else None.
    geomean_slowdown
        exp(objective / gpus_used).
    gpus_used
        Σ demand over placed jobs.
    solve_seconds, build_seconds
        Time inside the policy or solver, and time building the formulation (no file I/O).
    backend, backend_version
        Solver used (None for greedy policies).
    admission
        The queue rule the placed set follows: ``"pal-order"``, ``"queue-order"``, ``"sticky"``,
        ``"prefix"``, ``"backfill"`` or ``"given"``.
    jobs_to_terminate
        Running jobs that lose or change their GPUs this round.
    spanning
        Jobs whose GPUs lie on more than one server.
    message
        Free-text detail: infeasibility reason, fallback cause.
    info
        Extra, method-specific figures (e.g. model size).
    """

    placements: dict[JobId, tuple[int, ...]]
    method: str
    status: Status
    objective: float
    geomean_slowdown: float
    gpus_used: int
    solve_seconds: float
    admission: str
    bound: float | None = None
    gap: float | None = None
    build_seconds: float = 0.0
    backend: str | None = None
    backend_version: str | None = None
    jobs_to_terminate: tuple[JobId, ...] = ()
    spanning: int = 0
    message: str = ""
    seed: int | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def jobs_placed(self) -> int:
        return len(self.placements)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; job ids become strings in ``placements``."""
        d = asdict(self)
        d["status"] = self.status.value
        d["placements"] = {str(k): [int(g) for g in v] for k, v in self.placements.items()}
        d["jobs_to_terminate"] = list(self.jobs_to_terminate)
        d["jobs_placed"] = self.jobs_placed
        for k in ("objective", "bound", "gap", "geomean_slowdown"):
            v = d[k]
            if isinstance(v, float) and not math.isfinite(v):
                d[k] = None
        return d

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    def to_dataframe(self) -> Any:
        """One row per placed job: job id, GPU ids, GPU count (pandas DataFrame)."""
        import pandas as pd

        rows = [
            {"job_id": k, "gpus": list(v), "num_gpus": len(v)} for k, v in self.placements.items()
        ]
        return pd.DataFrame(rows, columns=["job_id", "gpus", "num_gpus"])
