"""The one cost model.  Every policy, the integer programs, the checker, the benchmarks and
the simulator price a placement here.

* **Slowdown** of job *j* on GPU set *S* = max over *S* of *j*'s class factor × *j*'s locality
  penalty for the topology level *S* spans (:func:`job_slowdown_pos`).  A pipeline job
  (:class:`~pal_opt.model.Pipeline`) runs at its slowest stage's pace instead of its slowest
  GPU's (:func:`pace_factor`).
* **Round cost** = the sum of the registered cost terms (:mod:`pal_opt.cost.registry`):
  variability ``Σ_j d_j ln max factor``, locality ``Σ_j d_j ln penalty`` (together
  ``Σ_j d_j ln slowdown_j``), restart ``d_j · −ln(1 − S/R)`` per running job moved (``S`` the restart cost in seconds
  per GPU, ``R`` the round length; :mod:`pal_opt.cost.restart`), migration per running job
  moved (:mod:`pal_opt.cost.migration`), preemption ``(1 + priority) × GPU-hours of the round``
  per running job left unplaced (:mod:`pal_opt.cost.preemption`), and any term registered since.
* **Geometric-mean slowdown** = exp(cost of the placed jobs / Σ_j d_j), a GPU-weighted
  geometric mean (preemption charges left out).
"""

from __future__ import annotations

from .base import CostTerm
from .evaluate import (
    CostSummary,
    best_stage_order,
    evaluate,
    geomean_slowdown,
    job_slowdown,
    job_slowdown_pos,
    left_out_charge,
    pace_factor,
    relative_gap,
    stages_mapped_best,
)
from .registry import (
    COST_TERMS,
    cost_terms,
    register_cost_term,
    unregister_cost_term,
    unseen_terms,
    validate_cost_params,
)

__all__ = [
    "CostTerm",
    "COST_TERMS",
    "CostSummary",
    "validate_cost_params",
    "cost_terms",
    "unseen_terms",
    "evaluate",
    "geomean_slowdown",
    "job_slowdown",
    "pace_factor",
    "best_stage_order",
    "stages_mapped_best",
    "job_slowdown_pos",
    "left_out_charge",
    "register_cost_term",
    "relative_gap",
    "unregister_cost_term",
]
