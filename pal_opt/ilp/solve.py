"""``solve_ilp``: admit, build, warm-start, solve, decode, price, report.

Admission
---------
``"prefix"``
    The longest queue prefix whose total demand fits the free GPUs; all must be placed.
``"backfill"``
    The lexicographically first maximal set in queue order.  Any set of jobs whose total
    demand fits the free GPUs can be placed (a gang may span the cluster), so the lexicographic
    maximisation "place job 1 if possible, then job 2 if still possible, ..." needs no solver:
    a job can be added exactly when its demand fits the GPUs left, which is the greedy walk of
    :func:`pal_opt.admission.admit`.  The program then minimises cost over that fixed set.
``jobs=[ids]``
    An explicit set (admission ``"given"``); INFEASIBLE when it needs more GPUs than are free
    or, with GPU types, when its jobs cannot all get GPUs of their types at once (each may fit
    alone: the solver decides, :func:`_infeasible`).

Prefix and backfill are therefore always feasible.

Start placements
----------------
PAL's greedy placement of the admitted jobs (its class-sorted order) and pal-opt's packing
greedy (:mod:`pal_opt.ilp.heuristic`), and the caller's ``start`` when given (a repair's
answer that keeps the unaffected jobs, :mod:`pal_opt.repair`), are priced with
:mod:`pal_opt.cost`; the cheapest is the warm start (``info["start_source"]``) and the
fallback.  With a gap target and a backend that solves LP relaxations (all three: HiGHS's
simplex, GLOP for CP-SAT, CLP in the CBC binary for CBC), the LP bound is computed first and the
MIP is skipped when the start placement is already within the target (``info["solver_status"]``
says so).  Rounds with GPU types and programs above :data:`PROGRAM_LP_OWN_MAX_ENTRIES` have
their LP solved by HiGHS whatever the backend (GLOP and CLP are 3-5 times slower on them), and
its solution gives the LP-lane start; ``info["program_relaxation"]`` names the LP solver.

Time limit
----------
``time_limit`` (and ``deadline``, a ``time.monotonic()`` value) bound the whole call, not only
the solver (:mod:`pal_opt.deadline`).  With one, PAL's greedy placement of the admitted jobs is
computed and priced first, so an answer always exists.  The program is not built when its
estimated build time (:func:`~pal_opt.ilp.formulation.estimated_build_seconds`) exceeds the time
left, and the build gives up between steps once the deadline has passed.  The LP bound
is computed first, whether or not a gap is asked for, so that a bound survives a MIP stopped
early.  Every solver stage gets what is left less a reserve for what must follow: decoding
(estimated from the build time) and pricing and writing the answer (measured on the greedy
one); a solver that cannot be translated and started in what is left is skipped, and one that
overruns is stopped, then abandoned.  A solution found too late to decode is not decoded.
Whenever time runs out the answer is the best placement known (usually the start placement,
``FALLBACK``) with the best bound known, and ``message`` and ``info["time_limit_reached"]`` say
which stage did not fit.

Ctrl-C
------
A ``KeyboardInterrupt`` while a backend translates or solves the program stops the solver
cleanly (see each backend) and is re-raised as :class:`~pal_opt.errors.SolveInterrupted`, whose
``result`` is the best placement found so far, never worse than the start placement, with
``info["interrupted"]`` set: the solver's incumbent or the start placement when cheaper
(``FEASIBLE``, with the gap when the solver had a bound; ``OPTIMAL`` if the solve ended as the
interrupt arrived), or the start placement when the solver had none (``FALLBACK``).  An interrupt before that (building the program, pricing the
starts), or a second one while a stopped solver winds down, is a plain ``KeyboardInterrupt``.

Progress
--------
Stages and the solver's incumbent and bound go to :mod:`pal_opt.progress` (nowhere unless a
caller listens), with the start placement as the incumbent until the solver finds a better one
and the gap in pal-opt's terms (:meth:`_Attempt.progress_fields`).

Statuses
--------
OPTIMAL when the solver proved optimality and the relative geometric-mean gap between the
repriced objective and the bound is at most :data:`OPTIMALITY_TOL`; FEASIBLE with the gap
otherwise; INFEASIBLE for an explicit set that does not fit; FALLBACK when the solver stopped
without a solution, with the start placement (for an explicit set on GPU types of which no start
placement holds every job, nothing placed and the message naming the jobs, :func:`_no_start`).  When the solver's incumbent costs more than the
start placement (CP-SAT may ignore a hint), the start placement is returned (FEASIBLE,
``info["incumbent"]`` names it), so the result is never worse than PAL on the admitted set.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .. import progress
from ..admission import ADMISSION_MODES, admit, claim_placement, unplaceable
from ..binning import BINNING_MODES, binned_factors
from ..check import checked_start
from ..cost import CostSummary, evaluate, relative_gap, stages_mapped_best
from ..deadline import FINISH_SECONDS, Deadline
from ..errors import BackendError, OptionError, SolveInterrupted, TimeLimitReached, counted
from ..gputypes import claim_all, fits_types, free_per_type, has_types, type_groups
from ..model import GpuState, JobId, RoundInstance, non_integer_at, require_instance
from ..options import (
    check_flag,
    check_time_limit,
    is_finite_number,
    require_items,
    require_mapping,
    shown_number,
)
from ..result import OPTIMALITY_TOL, PlacementResult, Status, priced_result
from .backends import SolveOptions, SolverStatus, get_backend
from .backends.base import Backend, BackendAbandoned, BackendInterrupted, BackendSolution
from .canonical import CHANGED, canonicalise
from .decode import decode, encode
from .formulation import Formulation, build_formulation, estimated_build_seconds
from .heuristic import pal_greedy, start_placements
from .improve import applies as exchanges_apply
from .improve import exchange_bottlenecks
from .lanelp import applies as lanelp_applies
from .lanelp import estimated_seconds as lanelp_seconds
from .lanelp import lp_lane_start
from .packing import fast_packing
from .scale import BackgroundPacking, flow_free_bound, is_large_round, relaxation_solver
from .stageround import (
    alone_bound_in_time,
    has_pipelines,
    solve_stage_round,
    start_meets_bound,
    start_placement,
)
from .stagesearch import search_applies, solve_stage_search
from .warm import WarmStart, check_warm, warm_info

__all__ = ["solve_ilp", "round_program", "resolve_admission", "prepare_round", "program_build_estimate", "run_info", "RoundSetup",
           "OPTIMALITY_TOL", "PROGRAM_LP_OWN_MAX_ENTRIES"]

log = logging.getLogger(__name__)

#: Under a deadline: decoding a solution takes at most this many times the build (measured
#: 0.55–0.65 on generated rounds), encoding the warm start at most this many.
DECODE_PER_BUILD = 0.8
ENCODE_PER_BUILD = 0.5
#: Under a deadline, a round with pipeline jobs first gives the round program, with every
#: pipeline seen as a gang, this share of the time left for a start (:func:`_gang_view_start`).
GANG_VIEW_SHARE = 1 / 3
#: The round program's LP relaxation is solved by HiGHS (when installed), whatever the backend,
#: when the round has GPU types or the program has more matrix entries and columns than this;
#: else by the backend's own LP solver (GLOP for CP-SAT, CLP for CBC).  Measured at load 0 on
#: ``benchmarks/types_scale.py`` (2,048 GPUs of three types, fill cuts: 229,000-248,000 entries
#: and columns): HiGHS 0.4-0.6 s, GLOP 1.5-1.9 s, CLP 2.2-2.8 s, which at a load of 1-5 left CLP
#: no bound within 5 s; HiGHS's LP solution also gives the LP-lane start
#: (:mod:`pal_opt.ilp.lanelp`) without a second LP solve, the same start for every backend.  On
#: untyped 2,048-GPU rounds (``benchmarks/scale.py``, about 120,000) the three take 0.15, 0.48 and
#: 0.35 s and each backend keeps its own; on an untyped 4,096-GPU round (``scale.py``'s
#: ``make_round(512, 1188, 0)``, 437,000) 0.44, 4.1 and 2.1 s (load about 1).
PROGRAM_LP_OWN_MAX_ENTRIES = 150_000


def resolve_admission(
    instance: RoundInstance, admission: str | None, jobs: Sequence[JobId] | None
) -> tuple[list[int], str]:
    """Job indices (queue order) to place and the admission label.

    Raises
    ------
    OptionError
        For an unknown mode, both ``admission`` and ``jobs``, or bad job ids.
    """
    if jobs is not None:
        if admission is not None:
            raise OptionError("give either admission= or jobs=, not both")
        if isinstance(jobs, (str, bytes, Mapping)) or not isinstance(jobs, Iterable):
            raise OptionError(f"jobs must be a sequence of job ids, got {type(jobs).__name__}")
        index = {j.id: i for i, j in enumerate(instance.jobs)}
        by_str = {str(j.id): i for i, j in enumerate(instance.jobs)}
        out: list[int] = []
        seen: set[int] = set()
        for jid in jobs:
            if isinstance(jid, np.integer):
                jid = int(jid)
            if not isinstance(jid, (int, str)) or isinstance(jid, bool):
                raise OptionError(f"job id {jid!r} is not an int or str")
            i = index.get(jid)
            if i is None:
                i = by_str.get(str(jid))
            if i is None:
                raise OptionError(f"job {jid!r} is not in the queue")
            if i in seen:
                raise OptionError(f"job {jid!r} is listed twice in jobs=")
            seen.add(i)
            out.append(i)
        return sorted(out), "given"
    mode = "prefix" if admission is None else admission
    if mode not in ADMISSION_MODES:
        raise OptionError(f"unknown admission {mode!r}; choose one of {', '.join(ADMISSION_MODES)} (or pass jobs=)")
    return admit(instance, mode), mode


def round_program(instance: RoundInstance, *, binning: str | None = None, admission: str | None = None,
                  jobs: Sequence[JobId] | None = None) -> tuple[Formulation, str]:
    """The round program :func:`solve_ilp` builds for ``instance`` with these options, and the
    admission label (``prefix``, ``backfill``, ``given``): the jobs admitted as the solve admits
    them and the factors binned as it bins them (``pal-opt solve --method ilp --write-lp``).

    The solve may answer without it: a round whose start placements meet the gap target, or, at
    more than 4,096 free GPUs, the flow-free relaxation's bound (``formulations/round_ilp.md``
    §11), builds no program; at such sizes building it takes tens of seconds.

    Raises
    ------
    OptionError
        Bad options (:func:`resolve_admission`), or an admitted pipeline job: its round is the
        stage program (:mod:`pal_opt.ilp.stageround`), which this does not build.
    InfeasibleRoundError
        Jobs given (``jobs=``) that need more GPUs than are free.
    """
    require_instance(instance)
    mode = binning or instance.params.binning
    if mode not in BINNING_MODES:
        raise OptionError(f"unknown binning mode {mode!r}; choose one of {', '.join(BINNING_MODES)}")
    admitted, label = resolve_admission(instance, admission, jobs)
    piped = [instance.jobs[i].id for i in admitted if instance.jobs[i].pipeline is not None]
    if piped:
        raise OptionError(f"job {piped[0]!r} is a pipeline job: its round is the stage program "
                          "(formulations/pipeline_round.md), which is not exported")
    return build_formulation(instance, admitted, factors=binned_factors(instance.cluster, mode)), label


def check_ilp_options(time_limit: Any, gap: Any, threads: Any, warm_start: Any, deterministic: Any,
                      canonical: Any = False, backend_params: Any = None, deadline: Any = None) -> None:
    """The solver options of :func:`solve_ilp` and :func:`~pal_opt.ilp.partition.solve_partitioned`,
    checked before anything runs: an :class:`~pal_opt.errors.OptionError` (an
    :class:`~pal_opt.errors.InputTypeError` for ``backend_params``) naming the argument."""
    check_time_limit(time_limit)
    if gap is not None and (
        not isinstance(gap, (int, float)) or not is_finite_number(gap) or gap < 0  # 10**400: OverflowError was raised
    ):
        raise OptionError(f"gap must be a finite number >= 0, got {shown_number(gap)}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1):
        raise OptionError(f"threads must be a positive integer, got {threads!r}")
    for label, v in (("warm_start", warm_start), ("deterministic", deterministic), ("canonical", canonical)):
        check_flag(v, label)
    if backend_params is not None:
        names = list(require_mapping(backend_params, "backend_params", "a mapping of solver option names to values"))
        require_items(names, "backend_params", "a mapping of solver option names (str) to values", of=str)
    if deadline is not None and not (isinstance(deadline, (int, float)) and is_finite_number(deadline)):
        raise OptionError(f"deadline must be a time.monotonic() value, got {shown_number(deadline)}")


@dataclass(frozen=True)
class RoundSetup:
    """What :func:`solve_ilp` and :func:`~pal_opt.ilp.partition.solve_partitioned` settle before
    any program is built (:func:`prepare_round`).

    Attributes
    ----------
    binning
        The binning mode.
    backend
        The backend class.
    admitted, admission
        Admitted job indices (queue order) and the admission label.
    factors
        The binned factors.
    demand
        Σ demand of the admitted jobs.
    """

    binning: str
    backend: type[Backend]
    admitted: list[int]
    admission: str
    factors: Mapping[str, np.ndarray]
    demand: int


def prepare_round(
    instance: RoundInstance,
    binning: str | None,
    backend: str | None,
    admission: str | None,
    jobs: Sequence[JobId] | None,
    *,
    probe: bool = True,
) -> RoundSetup:
    """Check the binning mode, find the backend (imported only with ``probe``, see
    :func:`~pal_opt.ilp.backends.get_backend`), admit the jobs and bin the factors.

    Raises
    ------
    OptionError
        For an unknown binning mode or backend, or bad admission options.
    BackendUnavailableError
        For a backend that is not installed.
    """
    require_instance(instance)  # solve_ilp's and solve_partitioned's round, before anything reads it
    mode = binning or instance.params.binning
    if mode not in BINNING_MODES:
        raise OptionError(f"unknown binning mode {mode!r}; choose one of {', '.join(BINNING_MODES)}")
    cls = get_backend(backend, probe=probe)
    admitted, label = resolve_admission(instance, admission, jobs)
    factors = binned_factors(instance.cluster, mode)
    demand = sum(instance.jobs[i].demand for i in admitted)
    return RoundSetup(mode, cls, admitted, label, factors, demand)


def run_info(setup: RoundSetup, **options: Any) -> dict[str, Any]:
    """The options of a solve as reported in ``PlacementResult.info`` (binning first)."""
    keys = {"time_limit": "time_limit", "gap": "gap_target", "threads": "threads", "deterministic": "deterministic",
            "warm_start": "warm_start"}
    return {"binning": setup.binning, **{keys[k]: v for k, v in options.items()}}


def _result(
    instance: RoundInstance,
    placements: dict[JobId, tuple[int, ...]],
    factors: Mapping[str, np.ndarray],
    **kw: Any,
) -> PlacementResult:
    """The priced result of ``placements`` (:func:`pal_opt.result.priced_result`)."""
    status = kw.pop("status")
    admission = kw.pop("admission")
    seconds = kw.pop("solve_seconds")
    return priced_result(instance, placements, factors, method="ilp", status=status, admission=admission,
                         solve_seconds=seconds, **kw)


@dataclass
class _Attempt:
    """One solve of a built round program: the round, the program, the start placement and the
    LP relaxation's bound as they become known."""

    instance: RoundInstance
    setup: RoundSetup
    form: Formulation | None
    common: dict[str, Any]
    build_seconds: float
    clock: Deadline = Deadline()
    #: Seconds kept after every stage for pricing and writing the answer (under a deadline).
    reserve: float = 0.0
    #: Seconds pricing a placement took (PAL's, under a deadline).
    price_seconds: float = 0.0
    greedy: dict[JobId, tuple[int, ...]] | None = None
    gcost: float = math.inf
    #: The start placement's price (so that a result of it is not priced twice).
    gsummary: CostSummary | None = None
    source: str | None = None
    lp_bound: float | None = None
    lp_seconds: float = 0.0
    #: The LP solver of the round program's relaxation, as messages name it (:func:`_program_lp_solver`).
    lp_solver: str = ""
    #: The caller's start placement (``solve_ilp(start=...)``), priced with the greedy ones.
    given_start: Mapping[JobId, Sequence[int]] | None = None
    #: The state carried between rounds (``solve_ilp(warm=...)``, :mod:`pal_opt.ilp.warm`).
    warm: WarmStart | None = None
    #: Replace a proven optimum by its canonical representative (``solve_ilp(canonical=True)``).
    canonical: bool = False

    @property
    def info(self) -> dict[str, Any]:
        return self.common["info"]

    @property
    def name(self) -> str:
        return self.setup.backend.name

    @property
    def program(self) -> Formulation:
        assert self.form is not None, "the program is not built"
        return self.form

    @property
    def decode_estimate(self) -> float:
        """Seconds decoding a solution may take (under a deadline)."""
        return DECODE_PER_BUILD * self.build_seconds + 0.02

    def stage_options(self, opts: SolveOptions, *, then_decode: bool) -> SolveOptions:
        """The backend options of a solver stage: without a deadline ``opts``; with one, its
        deadline less the reserve (and the decoding estimate when a solution must be decoded)."""
        if not self.clock.limited:
            return opts
        after = self.reserve + (self.decode_estimate if then_decode else 0.0)
        return replace(opts, time_limit=None, deadline=self.clock.sooner(after).at)

    def progress_fields(self, fields: dict[str, Any]) -> dict[str, Any]:
        """A progress report (:mod:`pal_opt.progress`) as the caller sees it: the incumbent is
        never worse than the start placement, the bound never below the LP relaxation's, and
        the gap is pal-opt's (relative, on the geometric-mean slowdown)."""
        out = {"backend": self.name, **fields}
        incumbent, bound = fields.get("incumbent"), fields.get("bound")
        if self.greedy is not None:
            incumbent = self.gcost if incumbent is None else min(incumbent, self.gcost)
        if self.lp_bound is not None:
            bound = self.lp_bound if bound is None else max(bound, self.lp_bound)
        if incumbent is not None:
            out["incumbent"] = incumbent
            if bound is not None:
                bound = min(bound, incumbent)
                out["gap"] = relative_gap(incumbent, bound, self.setup.demand)
        if bound is not None:
            out["bound"] = bound
        return out

    def result(self, placements: Mapping[JobId, tuple[int, ...]], **kw: Any) -> PlacementResult:
        """A priced result of ``placements`` with the build time and the common fields; with
        ``canonical``, a proven optimum is first replaced by its canonical representative
        (:mod:`pal_opt.ilp.canonical`: the same whichever backend proved it, at the same cost)."""
        if self.canonical and kw.get("status") == Status.OPTIMAL:
            placements = self.canonical_of(placements)
        if placements is self.greedy and self.gsummary is not None:
            kw["summary"] = self.gsummary
        return _result(self.instance, dict(placements), self.setup.factors, build_seconds=self.build_seconds,
                       **kw, **self.common)

    def canonical_of(self, placements: Mapping[JobId, tuple[int, ...]]) -> Mapping[JobId, tuple[int, ...]]:
        """``placements``' canonical representative (``placements`` itself when it is one, or
        when none is found by the deadline less the reserve); ``info["canonical"]`` says which
        (:func:`~pal_opt.ilp.canonical.canonicalise`)."""
        deadline = self.clock.sooner(self.reserve).at if self.clock.limited else None
        found, self.info["canonical"] = canonicalise(self.instance, placements, self.setup.factors, deadline=deadline)
        return found if self.info["canonical"] == CHANGED else placements


def solve_ilp(
    instance: RoundInstance,
    *,
    binning: str | None = None,
    backend: str | None = None,
    admission: str | None = None,
    time_limit: float | None = None,
    gap: float | None = None,
    threads: int | None = None,
    jobs: Sequence[JobId] | None = None,
    warm_start: bool = True,
    deterministic: bool = True,
    backend_params: Mapping[str, Any] | None = None,
    start: Mapping[JobId, Sequence[int]] | None = None,
    deadline: float | None = None,
    warm: WarmStart | None = None,
    canonical: bool = False,
) -> PlacementResult:
    """Place one round with the exact integer program.

    Parameters
    ----------
    instance
        The round.
    binning, backend, admission
        Binning mode (default ``instance.params.binning``, as the greedy policies); ``"highs"``,
        ``"cpsat"``, ``"cbc"`` or another registered backend (default: the first installed);
        ``"prefix"`` (default) or ``"backfill"`` (see the module docstring).
    time_limit, deadline
        Seconds for the whole call, counted from it (None: until proven optimal), and a
        ``time.monotonic()`` value by which to return; the earlier applies (module docstring).
    gap
        Relative gap target on the geometric-mean slowdown (None: prove optimality).
    threads, jobs
        Solver threads (None: the backend's default); job ids to place instead of admitting.
    warm_start, canonical
        Start the solver from the cheapest start placement (:mod:`pal_opt.ilp.heuristic`); replace
        a proven optimum by its canonical representative, the same whichever backend proved it, at
        the same cost (:mod:`pal_opt.ilp.canonical`, ``info["canonical"]``; off: the solver's own).
    deterministic, backend_params
        Same instance and options give the same placement (see the backends); options passed to
        the solver by name (a rejected one is an :class:`~pal_opt.errors.OptionError`).
    start
        A placement of exactly the admitted jobs (``{job id: GPU ids}``; else an OptionError),
        priced with the greedy starts (source ``"given"``): the cheapest is the warm start.
    warm
        A :class:`~pal_opt.ilp.warm.WarmStart` carried from round to round: on large rounds the
        last round's LP basis and placement are reused (:mod:`pal_opt.ilp.warm`); recorded
        after the solve; ``info["warm"]`` says what was reused.

    Returns
    -------
    PlacementResult
        ``objective``: the round cost by :func:`pal_opt.cost.evaluate`; ``bound``: the solver's.

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance, RoundParams
    >>> c = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0, 1.3, 1.0, 1.0]})
    >>> inst = RoundInstance(c, (Job(1, 2, "classA"), Job(2, 1, "classA")), RoundParams(binning="none"))
    >>> r = solve_ilp(inst)
    >>> r.status.value, r.placements[1], round(r.geomean_slowdown, 6)
    ('optimal', (2, 3), 1.0)
    """
    check_ilp_options(time_limit, gap, threads, warm_start, deterministic, canonical, backend_params, deadline)
    start = _start_form(start)
    check_warm(warm)
    clock = _clock(time_limit, deadline)
    setup = prepare_round(instance, binning, backend, admission, jobs, probe=not clock.limited)
    info = run_info(setup, time_limit=time_limit, gap=gap, threads=threads, deterministic=deterministic,
                    warm_start=warm_start)
    if warm is not None:
        why = warm.match(instance, setup.binning, setup.backend.name)
        info["warm"] = f"cold: {why}" if why else "warm: nothing reused (not a large round, pal_opt.ilp.scale)"
    res = _solve_set_up(instance, setup, info, clock, time_limit, gap, threads, warm_start, deterministic,
                        backend_params, start, warm, canonical=canonical)
    if warm is not None:
        warm.record(res)
    return res


def _solve_set_up(instance: RoundInstance, setup: RoundSetup, info: dict[str, Any], clock: Deadline,
                  time_limit: float | None, gap: float | None, threads: int | None, warm_start: bool, deterministic: bool,
                  backend_params: Mapping[str, Any] | None, start: Mapping[JobId, Sequence[int]] | None,
                  warm: WarmStart | None, *, canonical: bool = False) -> PlacementResult:
    """:func:`solve_ilp` once the options are checked and the jobs admitted."""
    cls = setup.backend
    common = dict(admission=setup.admission, backend=cls.name, backend_version=None, info=info)
    if (trivial := _trivial_result(instance, setup, common)) is not None:
        return trivial
    opts = SolveOptions(time_limit=time_limit, abs_gap=setup.demand * math.log1p(gap) if gap else 0.0,
                        threads=threads, deterministic=deterministic, backend_params=dict(backend_params or {}))
    if opts.backend_params:  # what the solver was given (the file records it for the reader)
        info["backend_params"] = dict(opts.backend_params)
    if has_pipelines(instance, setup.admitted):  # stages to place: the stage program (the solver's deadline)
        res = _solve_staged(instance, setup, info, clock, opts, (gap, threads, deterministic, backend_params), start,
                            warm_start)
        return _canonical_staged(instance, setup, res, clock) if canonical else res
    att = _Attempt(instance, setup, None, common, 0.0, clock, given_start=start, warm=warm, canonical=canonical)
    if (done := _flow_free(att, opts)) is not None:  # large rounds: pal_opt.ilp.scale
        return done
    try:
        _start(att)
    except TimeLimitReached as exc:
        return _out_of_time(att, exc)
    opts = replace(opts, time_limit=None) if clock.limited else opts  # the stages' deadlines bound it
    with progress.adapted(att.progress_fields):
        return _solve_built(att, cls(), opts, warm_start)


def _solve_staged(instance: RoundInstance, setup: RoundSetup, info: dict[str, Any], clock: Deadline,
                  opts: SolveOptions, gang_view: tuple[float | None, int | None, bool, Mapping[str, Any] | None],
                  start: Mapping[JobId, Sequence[int]] | None, warm_start: bool) -> PlacementResult:
    """A round whose admitted jobs include pipelines: the stage program (under a deadline from
    the gang view's start, by pairs of servers where the whole program is out of reach).  The
    whole program's answer carries the larger of its solver's bound and the jobs-alone bound (as
    the search's does, when it fits the deadline: :func:`~pal_opt.ilp.stageround.alone_bound_in_time`);
    a start that bound proves optimal is the answer, with no program built, and under a deadline
    PAL's start proven so skips the gang view too (``info["gang_view"]`` says so).
    ``gang_view``: the gap, threads, determinism and backend parameters of that start's solve."""
    cls = setup.backend
    staged = replace(opts, deadline=clock.at) if clock.limited else opts
    label = "the start given"
    pairs = clock.limited and start is None and search_applies(instance, setup.admitted)
    alone = None if pairs else alone_bound_in_time(instance, setup.admitted, setup.factors, staged.deadline)
    own = None  # PAL's start, made once for the test below and the stage round
    if clock.limited and start is None and alone is not None:
        own = start_placement(instance, setup.admitted, setup.factors)
    if own is not None and start_meets_bound(instance, setup.admitted, setup.factors, alone, own=own):
        info["gang_view"] = "not run: PAL's start placement meets the jobs-alone bound"
    elif clock.limited and start is None:
        start = _gang_view_start(instance, setup, clock, *gang_view, info)
        label = "the round program's, pipelines seen as gangs"
        if pairs:  # the whole program is out of reach: pairs
            found = solve_stage_search(instance, setup.admitted, setup.factors, backend=cls.name, options=staged,
                                       admission=setup.admission, info=info, start=start, start_label=label,
                                       warm_start=warm_start)
            if found is not None:
                return found
            alone = alone_bound_in_time(instance, setup.admitted, setup.factors, staged.deadline)
    return solve_stage_round(instance, setup.admitted, setup.factors, backend=cls.name, options=staged,
                             admission=setup.admission, info=info, start=start, warm_start=warm_start,
                             start_label=label, alone=alone, own=own)


def _canonical_staged(instance: RoundInstance, setup: RoundSetup, res: PlacementResult,
                      clock: Deadline) -> PlacementResult:
    """``canonical=True`` on a round with pipelines: the stage program's proven optimum (or the
    start the jobs-alone bound proved, with no program) replaced by its canonical representative
    (pipeline jobs stay on their stage maps), as
    :meth:`_Attempt.result` does for the round program; ``info["canonical"]`` says what was done."""
    if res.status != Status.OPTIMAL:
        return res
    deadline = clock.sooner(FINISH_SECONDS + 0.25).at if clock.limited else None
    found, res.info["canonical"] = canonicalise(instance, res.placements, setup.factors, deadline=deadline)
    if res.info["canonical"] != CHANGED:
        return res
    return _result(instance, found, setup.factors, status=res.status, admission=res.admission,
                   solve_seconds=res.solve_seconds, build_seconds=res.build_seconds, bound=res.bound, gap=res.gap,
                   backend=res.backend, backend_version=res.backend_version, message=res.message, info=res.info)


def _gang_view_start(instance: RoundInstance, setup: RoundSetup, clock: Deadline, gap: float | None,
                     threads: int | None, deterministic: bool, backend_params: Mapping[str, Any] | None,
                     info: dict[str, Any]) -> dict[JobId, tuple[int, ...]] | None:
    """Under a deadline, the start of a round with pipeline jobs: the round program's answer with
    every pipeline seen as a gang (which scales: the stage program is out of reach of a short limit
    beyond some 512 GPUs, ``formulations/pipeline_round.md`` §6), given
    :data:`GANG_VIEW_SHARE` of the time left, with each pipeline's stages then mapped best
    (:func:`~pal_opt.cost.stages_mapped_best`).  The stage program starts from the cheaper of it
    and PAL's placement, so it is never worse than PAL's.  None if it does not place every
    admitted job; ``info["gang_view"]`` says how it ended."""
    hidden = replace(instance, jobs=tuple(replace(j, pipeline=None) if j.pipeline is not None else j
                                          for j in instance.jobs))
    sub = Deadline.after(GANG_VIEW_SHARE * max(clock.left(), 0.0)).earliest(clock)
    sub_info = run_info(setup, time_limit=None, gap=gap, threads=threads, deterministic=deterministic, warm_start=True)
    wanted = {instance.jobs[i].id for i in setup.admitted}
    try:
        res = _solve_set_up(hidden, setup, sub_info, sub, None, gap, threads, True, deterministic, backend_params,
                            None, None)
    except BackendError as exc:  # the stage program, with PAL's start, may still do
        info["gang_view"] = f"failed: {exc}"
        return None
    except SolveInterrupted as exc:  # a Ctrl-C: its answer, for this round (stages mapped), is the answer
        raise _gang_view_interrupted(instance, setup, exc, wanted, info) from None
    info["gang_view"] = f"{res.status.value}: {res.message}" if res.message else res.status.value
    if set(res.placements) != wanted:
        return None
    return stages_mapped_best(instance, setup.factors, res.placements)


def _gang_view_interrupted(instance: RoundInstance, setup: RoundSetup, exc: SolveInterrupted, wanted: set[JobId],
                           info: dict[str, Any]) -> SolveInterrupted:
    """A Ctrl-C in the gang view: the placement it had (of the round with pipelines seen as
    gangs), each pipeline's stages mapped best and priced on this round, status FALLBACK, flagged
    ``info["interrupted"]``; none if it had no placement of every admitted job."""
    part = exc.result
    if not isinstance(part, PlacementResult) or set(part.placements) != wanted:
        return SolveInterrupted(None)
    info.update(interrupted=True, program="stage", gang_view="interrupted")
    res = _result(instance, stages_mapped_best(instance, setup.factors, part.placements), setup.factors,
                  status=Status.FALLBACK, admission=setup.admission, solve_seconds=part.solve_seconds,
                  backend=setup.backend.name, backend_version=None, info=info,
                  message="interrupted while solving the round with pipelines seen as gangs; its placement, "
                          "stages mapped best, is returned")
    return SolveInterrupted(res)


def _clock(time_limit: float | None, deadline: float | None) -> Deadline:
    """The solve's deadline: ``time_limit`` from now or ``deadline``, whichever comes first."""
    return Deadline.after(time_limit).earliest(Deadline(math.inf if deadline is None else float(deadline)))


def _start(att: _Attempt) -> None:
    """Everything before the solver runs: under a deadline the greedy answer first and the build
    only if its estimate fits (the solver imported only then); the build and the start placements.
    Raises :class:`~pal_opt.errors.TimeLimitReached` when the deadline comes first."""
    cls = att.setup.backend
    if att.clock.limited:
        _greedy_first(att)
        att.clock.check("building the program", need=att.reserve + program_build_estimate(att.instance, att.setup))
        get_backend(cls.name)  # the solver is imported only now, once it will be used
    att.common["backend_version"] = cls.version()
    _build(att)


def _solve_built(att: _Attempt, solver: Backend, opts: SolveOptions, warm_start: bool) -> PlacementResult:
    """Solve the built program: the LP shortcut when it applies, else the MIP.  Under a deadline
    the LP bound comes first whether or not a gap is asked for, and a stage that does not fit
    ends the solve with the best answer so far."""
    clock = att.clock
    start = None
    if warm_start and solver.supports_warm_start:
        if not clock.limited or clock.left() - att.reserve > ENCODE_PER_BUILD * att.build_seconds:
            start = _start_vector(att)
    try:
        if att.greedy is not None and solver.supports_relaxation and (opts.abs_gap > 0 or clock.limited):
            encoded = att.source
            done = _lp_shortcut(att, solver, att.stage_options(opts, then_decode=False))
            if done is not None:
                return done
            if start is not None and att.source != encoded:  # the MIP starts from the better one
                start = _start_vector(att)
        return _run_solver(att, solver, att.stage_options(opts, then_decode=True), start)
    except TimeLimitReached as exc:
        return _out_of_time(att, exc)


def program_build_estimate(instance: RoundInstance, setup: RoundSetup) -> float:
    """:func:`~pal_opt.ilp.formulation.estimated_build_seconds` for the round's admitted jobs."""
    free = instance.cluster.state == GpuState.FREE
    present = {instance.jobs[i].perfclass for i in setup.admitted}
    if not present or not free.any():
        return 0.0
    # GPU types: distinct tuples of the admitted classes' factors over the free GPUs
    cols = np.column_stack([np.asarray(setup.factors[c], dtype=np.float64)[free] for c in sorted(present)])
    types = int(np.unique(cols, axis=0).shape[0])
    return estimated_build_seconds(instance.cluster.num_servers, instance.cluster.num_gpus, types)


def _greedy_first(att: _Attempt) -> None:
    """Under a deadline, before anything else: PAL's greedy placement of the admitted jobs, priced
    (the answer if time runs out); the time pricing took sets the reserve kept for the end.
    Nothing to do when a start placement is known already."""
    if att.greedy is not None:
        return
    if att.given_start is not None:  # before anything else: the answer never costs more than it
        _price_start(att, "given", checked_start(att.instance, att.setup.admitted, att.given_start))
    att.price_seconds = _pal_start(att)
    att.reserve = FINISH_SECONDS + 2 * att.price_seconds


def _flow_free(att: _Attempt, opts: SolveOptions) -> PlacementResult | None:
    """A large round (:mod:`pal_opt.ilp.scale`; None for others and with a given start): PAL's
    greedy and the packing greedy placements,
    the flow-free relaxation's bound; the cheaper placement with that bound when the gap target
    is met or a time limit leaves no room to build the program, else None (the program's path
    follows, keeping the bound and the start placement)."""
    setup, clock = att.setup, att.clock
    if att.given_start is not None or not is_large_round(att.instance, setup.admitted):
        return None
    deferred = _pal_deferred(att)
    if not deferred:
        _greedy_first(att)
    try:
        bound, info = _bound_beside_packing(att, opts)
    except TimeLimitReached as exc:
        if deferred:
            _pal_start(att)
        return _out_of_time(att, exc)
    att.info.update(info)
    demand = setup.demand
    tol = max(opts.abs_gap, demand * math.log1p(OPTIMALITY_TOL))
    if deferred and (bound is None or att.gcost - bound > tol):
        _pal_start(att)  # the packing alone does not settle the round: PAL's placement, as cold
    if bound is not None and att.gcost - bound > tol:
        _exchange(att)
    within = bound is not None and att.gcost - bound <= tol
    # the last round's placement is a start only when the cold ones are not within the gap
    # (about 0.1 s at 8,192 GPUs, a third of a warm round; it rarely wins, benchmarks/warm_resolve.py)
    kept = None if within else _warm_start_placement(att)
    if att.warm is not None and att.warm.rounds and not str(att.info.get("warm", "")).startswith("cold"):
        att.info["warm"] = warm_info(kept, len(setup.admitted), att.warm.lp.last)
    if bound is None:
        if clock.limited and "relaxation_seconds" in info:  # the LP did not finish in time
            att.info.setdefault("time_limit_reached", "solving the flow-free relaxation's LP")
        return None
    att.lp_bound, att.lp_seconds = bound, float(info["relaxation_seconds"])
    att.build_seconds = float(info["relaxation_build_seconds"])
    within = att.gcost - bound <= tol
    no_room = clock.limited and clock.left() - att.reserve < program_build_estimate(att.instance, setup)
    if not within and not no_room:
        return None
    if not within:
        att.info["time_limit_reached"] = "building the program"
    if att.greedy is None:
        return _no_start(att, "time limit: no time to build the program", att.lp_seconds)
    best = min(bound, att.gcost)
    rgap = relative_gap(att.gcost, best, demand)
    proven = rgap is not None and rgap <= OPTIMALITY_TOL
    att.info["solver_status"] = ("start placement within the gap of the flow-free relaxation" if within
                                 else "no time to build the program; the flow-free relaxation's bound")
    att.info["incumbent"] = f"start ({att.source})"
    return att.result(att.greedy or {}, status=Status.OPTIMAL if proven else Status.FEASIBLE,
                      solve_seconds=att.lp_seconds, bound=best, gap=rgap,
                      message="" if proven else f"{att.info['relaxation']}: {att.info['solver_status']}")


#: A warm round defers PAL's greedy only when at least this many seconds are left (or no limit).
DEFER_PAL_MIN_LEFT = 2.0


def _pal_deferred(att: _Attempt) -> bool:
    """Whether this warm round computes PAL's greedy placement only after the packing greedy,
    and only if the packing is not within the gap (:mod:`pal_opt.ilp.warm`): when the last
    round's answer was not PAL's placement and the time left allows it."""
    warm = att.warm
    deferred = (warm is not None and warm.rounds > 0 and warm.last_start not in (None, "pal")
                and not str(att.info.get("warm", "")).startswith("cold")
                and (not att.clock.limited or att.clock.left() > DEFER_PAL_MIN_LEFT))
    if deferred:
        att.reserve = FINISH_SECONDS + 0.25  # pricing and writing, unmeasured without PAL's pricing
    att.info["pal_deferred"] = deferred
    return deferred


def _pal_start(att: _Attempt) -> float:
    """PAL's greedy placement of the admitted jobs priced as the start ``"pal"``; the seconds its
    pricing took."""
    t0 = time.perf_counter()
    placement = pal_greedy(att.instance, att.setup.factors, att.setup.admitted)
    t1 = time.perf_counter()
    att.info["greedy_seconds"] = t1 - t0
    _price_start(att, "pal", placement)
    if att.greedy is None and has_types(att.instance):  # PAL's greedy does not count per type
        _price_start(att, "claim", claim_placement(att.instance, att.setup.admitted))
    return time.perf_counter() - t1


def _warm_start_placement(att: _Attempt) -> dict[JobId, tuple[int, ...]] | None:
    """With a matching warm state (:mod:`pal_opt.ilp.warm`): the last placements still valid,
    the other admitted jobs placed around them by the packing greedy, priced as the start
    ``"warm"``; the kept placements (None without a usable warm state)."""
    warm = att.warm
    if warm is None or warm.rounds == 0 or str(att.info.get("warm", "")).startswith("cold"):
        return None
    t0 = time.perf_counter()
    setup = att.setup
    kept = warm.kept(att.instance, setup.admitted)
    if kept:
        _price_start(att, "warm", fast_packing(att.instance, setup.admitted, setup.factors, kept=kept))
    att.info["warm_start_seconds"] = time.perf_counter() - t0
    return kept


def _bound_beside_packing(att: _Attempt, opts: SolveOptions) -> tuple[float | None, dict[str, Any]]:
    """The flow-free relaxation's bound (:func:`~pal_opt.ilp.scale.flow_free_bound`) in this
    thread while the packing greedy runs in another (:class:`~pal_opt.ilp.scale.BackgroundPacking`,
    given up in time to be priced); the packing placement priced once both have ended, also when
    the deadline stopped the relaxation (:class:`~pal_opt.errors.TimeLimitReached`, re-raised)."""
    setup = att.setup
    packing = BackgroundPacking(att.instance, setup.admitted, setup.factors,
                                att.clock.sooner(att.reserve + att.price_seconds))
    try:
        found = flow_free_bound(att.instance, setup.admitted, setup.factors, setup.backend,
                                att.stage_options(opts, then_decode=False), att.warm)
    except TimeLimitReached:
        _take_packing(att, packing)
        raise
    except BaseException:  # a Ctrl-C or an error: the packing is not waited for
        packing.cancel()
        raise
    _take_packing(att, packing)
    return found


def _take_packing(att: _Attempt, packing: BackgroundPacking) -> None:
    """Wait for the packing greedy (it ends by its deadline) and price its placement, if any."""
    placement, stopped = packing.wait()
    att.info["packing_seconds"] = packing.seconds
    if stopped is not None:
        att.info.setdefault("time_limit_reached", stopped)
    _price_start(att, "packing", placement)


def _out_of_time(att: _Attempt, exc: TimeLimitReached) -> PlacementResult:
    """The answer when the deadline comes before a stage could run: the start placement (the
    greedy one if the program was not built) with the best bound known."""
    att.info["time_limit_reached"] = exc.stage
    if att.greedy is None:  # only given jobs may have no start placement of them all
        return _no_start(att, str(exc), att.lp_seconds)
    res = att.result(att.greedy, status=Status.FALLBACK, solve_seconds=att.lp_seconds, bound=att.lp_bound,
                     message=f"{exc}; the greedy placement ({att.source}) of the admitted jobs is returned")
    res.gap = relative_gap(res.objective, att.lp_bound, att.setup.demand)
    return res


def _trivial_result(instance: RoundInstance, setup: RoundSetup, common: dict[str, Any]) -> PlacementResult | None:
    """The result when no program is needed: INFEASIBLE when the admitted jobs need more GPUs than
    are free, or (with GPU types) one needs more than the free GPUs of its types hold; OPTIMAL
    and empty when nothing is admitted (bound = objective: the charges for running jobs left
    out, the same for every answer); else None."""
    admitted, demand, free = setup.admitted, setup.demand, instance.free_gpus
    short = _short_of_types(instance, admitted) if demand <= free else None
    if short is not None:
        return PlacementResult(placements={}, method="ilp", status=Status.INFEASIBLE, objective=math.inf,
                               geomean_slowdown=math.inf, gpus_used=0, solve_seconds=0.0, message=short, **common)
    if demand > free:
        st = instance.cluster.state
        msg = (f"{_given_jobs(instance, admitted)} but only {free} are free "
               f"({int((st == GpuState.BUSY).sum())} busy, {int((st == GpuState.FAILED).sum())} failed)")
        never = unplaceable(instance)  # a job given that no round can place (solve --jobs): named
        ids = {instance.jobs[i].id for i in admitted}
        first = next((jid for jid in never if jid in ids), None)
        if first is not None:
            msg += f"; job {first!r} can never be placed: {never[first]}"
        return PlacementResult(placements={}, method="ilp", status=Status.INFEASIBLE, objective=math.inf,
                               geomean_slowdown=math.inf, gpus_used=0, solve_seconds=0.0, message=msg,
                               **common)
    if not admitted:  # the empty placement is the only one: its cost (charges for running jobs) is the bound
        res = _result(instance, {}, setup.factors, status=Status.OPTIMAL, solve_seconds=0.0, **common)
        res.bound, res.gap = res.objective, 0.0
        return res
    return None


def _short_of_types(instance: RoundInstance, admitted: Sequence[int]) -> str | None:
    """Why an admitted job cannot be placed on the free GPUs of its types, or None (also
    without GPU types)."""
    if not has_types(instance):
        return None
    cl = instance.cluster
    free = free_per_type(cl, cl.state == GpuState.FREE)
    for i in admitted:
        job = instance.jobs[i]
        if not fits_types(type_groups(cl, job), job.demand, free):
            return f"job {job.id} needs {counted(job.demand, 'GPU')} of its GPU types but fewer are free"
    return None


def _short_of_types_together(instance: RoundInstance, admitted: Sequence[int], *, proven: bool = True) -> str | None:
    """Why the admitted jobs may not all get GPUs of their types at once, when no claim of GPUs
    per type for all of them is found (:func:`pal_opt.gputypes.claim_all`), else None (also
    without GPU types).  The claim is greedy: only a solver proves that none exists (``proven``
    says whether one did)."""
    if not has_types(instance):
        return None
    cl = instance.cluster
    free = free_per_type(cl, cl.state == GpuState.FREE)
    groups = {i: type_groups(cl, instance.jobs[i]) for i in admitted}
    if claim_all(groups, {i: instance.jobs[i].demand for i in admitted}, free) is not None:
        return None
    per_type = ", ".join(f"{t} {int(n)}" for t, n in zip(cl.type_names, free.tolist(), strict=True))
    if not proven:
        return (f"{_given_jobs(instance, admitted)} and may not all get GPUs of their types at once (free per "
                f"type: {per_type}; no greedy claim was found, infeasibility is not proven); each fits alone")
    return (f"{_given_jobs(instance, admitted)} but cannot all get GPUs of their types at once "
            f"(free per type: {per_type}); each fits alone")


def _given_jobs(instance: RoundInstance, admitted: Sequence[int]) -> str:
    """``jobs a, b, c need 16 GPUs`` (the first 20 ids named)."""
    names = ", ".join(str(instance.jobs[i].id) for i in admitted[:20])
    more = f" and {len(admitted) - 20} more" if len(admitted) > 20 else ""
    return f"jobs {names}{more} need {sum(instance.jobs[i].demand for i in admitted)} GPUs"


def _infeasible(att: _Attempt, solve_seconds: float) -> PlacementResult:
    """The result when the solver proves the round program infeasible.  Admission only admits
    jobs that can all get GPUs (of their types) at once, so this happens only for jobs given by
    id (``jobs=``) on a cluster with GPU types, each fitting alone but not all together: status
    INFEASIBLE and the reason, as when given jobs need more GPUs than are free
    (:func:`_trivial_result`).  Any other infeasible program is a solver's error."""
    why = _short_of_types_together(att.instance, att.setup.admitted)
    if why is None:
        raise BackendError(f"{att.name} reported an always-feasible round program infeasible")
    return PlacementResult(placements={}, method="ilp", status=Status.INFEASIBLE, objective=math.inf,
                           geomean_slowdown=math.inf, gpus_used=0, solve_seconds=solve_seconds,
                           build_seconds=att.build_seconds, message=why, **att.common)


def _no_start(att: _Attempt, cause: str, solve_seconds: float) -> PlacementResult:
    """The result when the solve ends (``cause``: the time limit, the solver's status) with no
    placement of every admitted job: no start placement holds them all, which happens only for
    jobs given by id (``jobs=``) on a cluster with GPU types, that may not fit together
    (:func:`_short_of_types_together`, unproven).  Nothing is placed, status FALLBACK, and the
    message names the given jobs and why, as an INFEASIBLE result would, without claiming a proof
    (and no bound: the program's is not one on the empty placement's cost)."""
    instance, admitted = att.instance, att.setup.admitted
    why = _short_of_types_together(instance, admitted, proven=False) or (
        f"{_given_jobs(instance, admitted)}; no start placement of them all was found in time")
    att.info["incumbent"] = None
    return att.result({}, status=Status.FALLBACK, solve_seconds=solve_seconds,
                      message=f"{cause}; none of the given jobs is placed: {why}")


def _build(att: _Attempt) -> None:
    """Build the program and price the start placements (PAL's greedy, the packing greedy and
    the caller's ``start`` when given); the cheapest becomes the warm start and the fallback.  Under a deadline PAL's is known
    already, and the others are skipped when the time left is under the build's time."""
    setup, clock = att.setup, att.clock
    t0 = time.perf_counter()
    progress.report(stage="building the program", backend=setup.backend.name)
    att.form = build_formulation(att.instance, setup.admitted, factors=setup.factors,
                                 deadline=clock.sooner(att.reserve) if clock.limited else None)
    att.build_seconds = time.perf_counter() - t0
    att.info.update(att.form.summary())
    if att.given_start is not None:  # priced even when time runs short: the answer never costs more
        _price_start(att, "given", _given_start(att.form, att.given_start))
    if clock.limited and clock.left() - att.reserve < att.build_seconds:
        att.info["time_limit_reached"] = "computing the packing start placements"
        return
    progress.report(stage="pricing the start placements", backend=setup.backend.name)
    for name, placement in start_placements(att.form, pal=att.greedy if att.source == "pal" else None).items():
        _price_start(att, name, placement)


def _price_start(att: _Attempt, name: str, placement: Mapping[JobId, tuple[int, ...]] | None) -> None:
    """Price a start placement; the cheapest so far becomes the warm start and the fallback
    (``info["start_source"]``).  A greedy that did not place every admitted job (None, or fewer
    jobs) is no start: priced, it could look cheaper than a placement of them all."""
    if placement is not None and len(placement) == len(att.setup.admitted):
        summary = evaluate(att.instance, placement, att.setup.factors)
        c = summary.cost
        att.info[f"start_{name}_objective"] = c
        if c < att.gcost - 1e-12:
            att.greedy, att.gcost, att.source, att.gsummary = dict(placement), c, name, summary
    att.info["start_source"] = att.source


def _exchange(att: _Attempt, start: Mapping[JobId, tuple[int, ...]] | None = None, name: str = "exchange") -> None:
    """A start placement (default: the cheapest) improved by bottleneck exchanges
    (:mod:`pal_opt.ilp.improve`) when they apply, priced as the start ``name``; under a deadline
    they stop in time for what must follow (``att.reserve``)."""
    setup = att.setup
    start = att.greedy if start is None else start
    if start is None or len(start) != len(setup.admitted) or not exchanges_apply(att.instance, setup.admitted):
        return
    clock = att.clock.sooner(att.reserve)
    if clock.passed():
        return
    t0 = time.perf_counter()
    placement, moves = exchange_bottlenecks(att.instance, start, setup.factors,
                                            give_up=clock.passed if clock.limited else None)
    att.info[f"{name}_seconds"] = time.perf_counter() - t0
    att.info[f"{name}_moves"] = moves
    if moves:
        _price_start(att, name, placement)


def _lp_lanes(att: _Attempt, solver: Backend) -> dict[JobId, tuple[int, ...]] | None:
    """With GPU types, the packing start on the LP relaxation's lanes (:mod:`pal_opt.ilp.lanelp`),
    priced as the start ``"packing-lp"``; skipped when the round has no job of several lanes or,
    under a deadline, when its estimate (:func:`~pal_opt.ilp.lanelp.estimated_seconds`) does not
    fit before the reserve.  The LP's solution is the one ``solver`` read with the bound
    (``solver.relaxation_values``: HiGHS's, which solves typed rounds' LPs for every backend,
    :func:`_program_lp_solver`), else SciPy's (HiGHS not installed)."""
    if att.form is None or not lanelp_applies(att.form):
        return None
    need = lanelp_seconds(att.form, solver.relaxation_values is not None)
    if att.clock.limited and att.clock.left() - att.reserve < need:
        att.info["lp_lanes"] = f"skipped: {need:.2f} s estimated, no time"
        return None
    t0 = time.perf_counter()
    placement = lp_lane_start(att.form, solver.relaxation_values)
    att.info["lp_lanes_seconds"] = time.perf_counter() - t0
    _price_start(att, "packing-lp", placement)
    return placement


def _start_form(start: Any) -> dict[JobId, tuple[int, ...]] | None:
    """``start`` as ``{job id: (GPU id, ...)}``; an :class:`OptionError` if it is not of that form
    (whether it is a placement of the round is checked where the program encodes it)."""
    if start is None:
        return None
    if not isinstance(start, Mapping):
        raise OptionError(f"start must map job ids to lists of GPU ids, got {type(start).__name__}")
    out: dict[JobId, tuple[int, ...]] = {}
    for jid, gids in start.items():
        if isinstance(gids, (str, bytes)) or not isinstance(gids, Iterable):
            raise OptionError(f"start[{jid!r}] must be a list of GPU ids, got {gids!r}")
        gids = tuple(gids)
        if non_integer_at(gids) is not None:
            raise OptionError(f"start[{jid!r}] must list integer GPU ids, got {list(gids)!r}")
        out[jid] = tuple(int(g) for g in gids)
    return out


def _given_start(form: Formulation, start: Mapping[JobId, Sequence[int]]) -> dict[JobId, tuple[int, ...]]:
    """``start`` as a placement, checked to be one of exactly the admitted jobs."""
    placement = {jid: tuple(int(g) for g in gids) for jid, gids in start.items()}
    try:
        encode(form, placement)
    except ValueError as exc:
        raise OptionError(f"start is not a placement of the admitted jobs: {exc}") from None
    return placement


def _start_vector(att: _Attempt) -> np.ndarray | None:
    """The start placement as a program vector (None without one)."""
    if att.greedy is None:
        return None
    try:
        return encode(att.program, att.greedy)
    except ValueError as exc:  # pragma: no cover - start placements are valid
        log.warning("warm start not encodable: %s", exc)
        return None


def _interrupted_with_start(att: _Attempt, stage: str, seconds: float) -> SolveInterrupted:
    """A Ctrl-C before the solver had anything: the start placement, flagged."""
    if att.greedy is None:  # given jobs on GPU types that may not fit together have none
        return SolveInterrupted(None)
    att.info["interrupted"] = True
    res = att.result(att.greedy, status=Status.FALLBACK, solve_seconds=seconds, bound=att.lp_bound,
                     message=f"interrupted while {att.name} {stage}; the start placement ({att.source}) is returned")
    res.gap = relative_gap(res.objective, att.lp_bound, att.setup.demand)
    return SolveInterrupted(res)


def _program_lp_solver(att: _Attempt, solver: Backend) -> Backend:
    """Who solves the round program's LP relaxation: HiGHS on rounds with GPU types or above
    :data:`PROGRAM_LP_OWN_MAX_ENTRIES` (:func:`~pal_opt.ilp.scale.relaxation_solver`), else
    ``solver``; its name is recorded in ``info["program_relaxation"]`` (``info["relaxation"]``
    names the flow-free relaxation's solver on large rounds, :mod:`pal_opt.ilp.scale`)."""
    program = att.program
    entries = program.A.nnz + program.num_vars
    prefer = has_types(att.instance) or entries > PROGRAM_LP_OWN_MAX_ENTRIES
    lp = relaxation_solver(type(solver), entries, prefer_highs=prefer) if prefer else None
    if lp is None or lp.name == solver.name:
        lp = solver
    att.info["program_relaxation"] = lp.name
    att.lp_solver = lp.lp_solver or lp.name
    return lp


def _lp_shortcut(att: _Attempt, solver: Backend, opts: SolveOptions) -> PlacementResult | None:
    """With a gap target: the LP relaxation alone is cheap and tight, so the start placement is the
    answer when it is already close enough to its bound (proving optimality needs the MIP anyway).
    Records the bound in ``att``; None when the MIP is still needed."""
    assert att.greedy is not None
    t1 = time.perf_counter()
    known = att.lp_bound  # the flow-free relaxation's, on a large round
    solver = _program_lp_solver(att, solver)
    try:
        att.lp_bound = solver.relaxation_bound(att.program, opts)
        if known is not None:
            att.lp_bound = known if att.lp_bound is None else max(att.lp_bound, known)
    except BackendAbandoned:
        raise KeyboardInterrupt from None
    except KeyboardInterrupt:  # BackendInterrupted, or a Ctrl-C while the LP was translated
        raise _interrupted_with_start(att, "solved the LP relaxation", time.perf_counter() - t1) from None
    att.lp_seconds = time.perf_counter() - t1
    att.info["relaxation_bound"] = att.lp_bound
    att.info["relaxation_seconds"] = att.lp_seconds
    demand = att.setup.demand
    tol = max(opts.abs_gap, demand * math.log1p(OPTIMALITY_TOL))
    if att.lp_bound is not None and att.gcost - att.lp_bound > tol:
        lanes = _lp_lanes(att, solver)
        cheapest = att.source
        _exchange(att)
        if lanes is not None and cheapest != "packing-lp":  # both kinds of lanes get their exchanges
            _exchange(att, lanes, "exchange-lp")
    if att.lp_bound is None or att.gcost - att.lp_bound > tol:
        return None
    lp_only = min(att.lp_bound, att.gcost)
    rgap = relative_gap(att.gcost, lp_only, demand)
    proven = rgap is not None and rgap <= OPTIMALITY_TOL
    att.info["solver_status"] = "start placement within the gap of the LP relaxation"
    att.info["incumbent"] = f"start ({att.source})"
    return att.result(att.greedy, status=Status.OPTIMAL if proven else Status.FEASIBLE, solve_seconds=att.lp_seconds,
                      bound=lp_only, gap=rgap,
                      message="" if proven else (f"{att.name} not run: the start placement is within the gap of the "
                                                 f"LP bound (solved by {att.lp_solver or att.name})"))


def _run_solver(att: _Attempt, solver: Backend, opts: SolveOptions, start: np.ndarray | None) -> PlacementResult:
    """The MIP solve and its result; on Ctrl-C, :class:`SolveInterrupted` with the best so far."""
    interrupted = False
    try:
        sol = solver.solve(att.program, opts, start)
    except BackendAbandoned:
        raise KeyboardInterrupt from None
    except KeyboardInterrupt as exc:  # BackendInterrupted, or a Ctrl-C while the model was translated
        solution = exc.solution if isinstance(exc, BackendInterrupted) else None
        if solution is None:
            raise _interrupted_with_start(att, "solved", att.lp_seconds) from None
        sol, interrupted = solution, True
        att.info["interrupted"] = True
    res = _finish(att, sol)
    if interrupted:
        res.message = f"interrupted: {res.message}" if res.message else "interrupted"
        raise SolveInterrupted(res)
    return res


def _too_late_to_decode(att: _Attempt, sol: BackendSolution) -> PlacementResult | None:
    """Under a deadline with too little time left to decode the solver's solution: the start
    placement with the solver's bound, FEASIBLE when the start is at least as good as that
    solution (in the program's units), else FALLBACK and a message saying what was lost; None
    when there is time to decode."""
    clock, demand = att.clock, att.setup.demand
    if not clock.limited or att.greedy is None or clock.left() - att.reserve >= att.decode_estimate:
        return None
    bound = sol.bound if att.lp_bound is None else max(sol.bound or att.lp_bound, att.lp_bound)
    bound = None if bound is None else min(bound, att.gcost)
    better = sol.objective is not None and sol.objective < att.gcost - 1e-9
    att.info["incumbent"] = f"start ({att.source})"
    att.info["time_limit_reached"] = "decoding the solver's solution"
    message = (f"time limit: no time left to decode {att.name}'s solution (program objective {sol.objective:.6f}); "
               f"the start placement ({att.source}) is returned" if better else f"{att.name}: {sol.message}")
    return att.result(att.greedy, status=Status.FALLBACK if better else Status.FEASIBLE,
                      solve_seconds=att.lp_seconds + sol.seconds, bound=bound,
                      gap=relative_gap(att.gcost, bound, demand), message=message)


def _finish(att: _Attempt, sol: BackendSolution) -> PlacementResult:
    """The result of a finished (or interrupted) backend solve: decode, price, compare with the
    start placement, report the gap."""
    info, demand, name = att.info, att.setup.demand, att.name
    info.update(sol.info)
    info["solver_status"] = sol.message
    info["translate_seconds"] = sol.translate_seconds
    info["program_objective"] = sol.objective
    solve_seconds = att.lp_seconds + sol.seconds
    bound = sol.bound
    if att.lp_bound is not None:
        bound = att.lp_bound if bound is None else max(bound, att.lp_bound)
    if sol.values is None:
        if sol.status == SolverStatus.INFEASIBLE:
            return _infeasible(att, solve_seconds)
        if att.greedy is None:
            return _no_start(att, f"{name} found no solution ({sol.message})", solve_seconds)
        res = att.result(att.greedy or {}, status=Status.FALLBACK, solve_seconds=solve_seconds, bound=bound,
                         message=f"{name} found no solution ({sol.message}); the greedy placement "
                                 f"({att.source}) of the admitted jobs is returned")
        res.gap = relative_gap(res.objective, bound, demand)
        return res
    late = _too_late_to_decode(att, sol)
    if late is not None:
        return late
    placements = decode(att.program, sol.values)
    cost = evaluate(att.instance, placements, att.setup.factors).cost
    info["incumbent"] = "solver"
    if att.greedy is not None and att.gcost < cost - 1e-12:
        placements, cost = dict(att.greedy), att.gcost
        info["incumbent"] = f"start ({att.source})"
    if bound is not None:
        bound = min(bound, cost)
    rgap = relative_gap(cost, bound, demand)
    proven = sol.status == SolverStatus.OPTIMAL and rgap is not None and rgap <= OPTIMALITY_TOL
    return att.result(placements, status=Status.OPTIMAL if proven else Status.FEASIBLE, solve_seconds=solve_seconds,
                      bound=bound, gap=rgap, message="" if proven else f"{name}: {sol.message}")
