"""Large rounds with pipeline jobs under a deadline: the stage program on pairs of servers.

The stage program of a whole round (:mod:`pal_opt.ilp.stageround`) is out of reach of a short
time limit beyond some 512 GPUs: HiGHS's presolve and root LP alone outlast 10 s, and it returns
the start it was given (``benchmarks/results/stage_scale.md``).  Even the stage program of 8
servers (64 GPUs, 17 jobs, 1,741 columns) took HiGHS 14.8 s to prove, and CP-SAT and CBC had not
proved it in 20 s.  What it adds to its start -- the round program's answer with every pipeline
seen as a gang, stages then mapped best -- is mostly exchanges of GPUs between jobs on a few
servers: a slow GPU moved to a pipeline stage with slack, a fast one to a gang that needs it.
The stage program of *two* servers holds such exchanges and is solved in about 0.1 s.

:class:`PairSearch` starts from a placement of the admitted jobs and makes passes over the
servers with free GPUs, dealt into pairs at random (``numpy.random.default_rng(options.seed)``;
with an odd number of servers the first group of a pass has three).  For each pair that holds a
pipeline job, the jobs lying wholly on the pair's servers are placed again by the stage program of
the round restricted to those servers (:func:`~pal_opt.ilp.subround.part_instance`) on the GPUs
the other jobs leave, started from where they are (so never worse), for at most
:data:`PAIR_SECONDS`, to optimality (the round's gap target, ``abs_gap``, is in the whole round's
units and is not the pair's).  A job lying on three servers or more keeps the start's GPUs (but
in the group of three of a pass over an odd number of servers, by chance).  The pair's answer is
priced on the whole round (its jobs alone: the others' charges do not change) and kept when it
costs less, so the round's cost falls by the gain the search reports, whatever a cost term makes
of where a job's GPUs lie in the cluster.  The search
stops at the deadline (a pair is not started with less than :data:`MIN_PAIR_SECONDS`, the finish
reserve and the backend's ``stop_seconds`` left; a pair whose solver the deadline left no time is
not counted as solved), after ``passes`` passes, or after :data:`STALE_PASSES` passes in a row
that found nothing; ``SearchStats.stopped`` says which.

:func:`solve_stage_search` is what :func:`pal_opt.ilp.solve_ilp` runs, under a deadline, instead
of the whole stage program on a round with at least :data:`SEARCH_MIN_GPUS` free GPUs and a
pipeline job that two servers can hold (:func:`search_applies`): the search from the cheaper of
the start given (the round program's, pipelines seen as gangs) and PAL's placement with the
stages mapped best.  Its answer is FEASIBLE, with no bound (no program of the whole round is
solved), and the message says why the search stopped ("time limit reached" when the deadline
did); FALLBACK, with ``info["time_limit_reached"]``, when no pair's solver had time to run (the
start, as the whole stage program returns it then).  A Ctrl-C, in a pair's solver or between two, raises
:class:`~pal_opt.errors.SolveInterrupted` with the best placement so far.  Under a deadline the
answer depends on how many pairs were solved in time, as the whole program's incumbent depends on
how far its solver got; without one (or when it stopped before it) the search is deterministic
when every pair's solver ends within :data:`PAIR_SECONDS`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from .. import progress
from ..binning import binned_factors
from ..cost import evaluate
from ..deadline import FINISH_SECONDS, Deadline
from ..errors import BackendError, SolveInterrupted
from ..model import GpuState, JobId, RoundInstance
from ..result import PlacementResult, Status, priced_result
from ..sigint import SigintDeferred
from .backends import SolveOptions, get_backend
from .stageround import check_stage_round, solve_stage_round, stage_backend_params, start_placement
from .subround import part_instance

__all__ = ["SEARCH_MIN_GPUS", "PAIR_SECONDS", "STALE_PASSES", "STOPS", "SearchStats", "PairSearch", "search_applies",
           "solve_stage_search"]

#: Free GPUs from which :func:`pal_opt.ilp.solve_ilp`, under a deadline, searches pairs of servers
#: instead of solving the whole stage program.  Measured on ``benchmarks/stage_scale.py``'s rounds
#: with a 10 s limit: at 256 GPUs both end at about the same cost (-6.34 and -6.36); at 512 the
#: whole program returned its start (-7.49) and the search reached -9.36.
SEARCH_MIN_GPUS = 384
#: Seconds the stage program of one pair may take (its answer is then its solver's incumbent).
PAIR_SECONDS = 1.0
#: The search stops after this many passes in a row that improved no pair.
STALE_PASSES = 2
#: A pair is not started with fewer seconds than this left (beside the finish reserve).
MIN_PAIR_SECONDS = 0.05
#: Relative cost decrease under which a pair's answer is not taken (solver tolerances).
GAIN_TOL = 1e-9
#: Why a search stopped (``SearchStats.stopped``): the deadline, :data:`STALE_PASSES` passes
#: without a gain, the passes asked for, fewer than two servers with free GPUs, or a Ctrl-C.
STOP_DEADLINE, STOP_STALE, STOP_PASSES, STOP_SERVERS = ("time limit reached", f"{STALE_PASSES} passes without a gain",
                                                         "the passes asked for made",
                                                         "fewer than two servers with free GPUs")
STOP_INTERRUPTED = "interrupted"
STOPS = (STOP_DEADLINE, STOP_STALE, STOP_PASSES, STOP_SERVERS, STOP_INTERRUPTED)
#: ``info["time_limit_reached"]`` when the deadline left no time for any pair.
SEARCH_STAGE = "solving the stage program on pairs of servers"


@dataclass
class SearchStats:
    """What a :class:`PairSearch` did: ``passes`` begun, ``pairs`` whose stage program was solved
    (a pair the deadline left no time to solve is not counted), ``improved`` pairs whose answer
    was taken, the total ``gain`` in round cost, why it ``stopped`` (one of :data:`STOPS`; empty
    while it runs), and the pairs ``skipped``: started, but their solver had no time to run."""

    passes: int = 0
    pairs: int = 0
    improved: int = 0
    gain: float = 0.0
    stopped: str = ""
    skipped: int = 0

    def as_info(self) -> dict[str, Any]:
        """For ``PlacementResult.info["stage_search"]``."""
        return asdict(self)


def search_applies(instance: RoundInstance, admitted: Sequence[int] | None = None) -> bool:
    """Whether the round has at least :data:`SEARCH_MIN_GPUS` free GPUs and (with ``admitted``)
    an admitted pipeline job that two servers' free GPUs can hold: a pipeline on three servers or
    more is never re-placed, so with none that fits the search would return its start, where the
    whole stage program may improve it or at least bound it."""
    cl = instance.cluster
    free = cl.state == GpuState.FREE
    if int(np.count_nonzero(free)) < SEARCH_MIN_GPUS:
        return False
    if admitted is None:
        return True
    per_server = np.sort(np.bincount(cl.server_of[free], minlength=cl.num_servers))
    two = int(per_server[-2:].sum())
    return any(instance.jobs[i].pipeline is not None and instance.jobs[i].demand <= two for i in admitted)


class PairSearch:
    """The search on pairs of servers (module docstring) from ``start``, a placement of exactly
    the ``admitted`` jobs (GPU lists in stage order).  ``placement`` is the best placement so far
    and ``stats`` what was done; :meth:`run` improves them."""

    def __init__(self, instance: RoundInstance, admitted: Sequence[int], factors: Mapping[str, np.ndarray],
                 start: Mapping[JobId, Sequence[int]], *, backend: str | None = None,
                 options: SolveOptions | None = None, warm_start: bool = True) -> None:
        self.instance, self.factors, self.warm_start = instance, factors, warm_start
        self.backend = get_backend(backend).name
        self.options = options or SolveOptions()
        self.index = {instance.jobs[i].id: i for i in admitted}
        self.placement = {jid: tuple(int(g) for g in start[jid]) for jid in self.index}
        self.home = self._homes(self.placement)
        self.stats = SearchStats()

    def _homes(self, placement: Mapping[JobId, tuple[int, ...]]) -> dict[JobId, frozenset[int]]:
        """The servers each job of ``placement`` lies on."""
        cl = self.instance.cluster
        return {jid: frozenset(cl.server_of[cl.positions(g)].tolist()) for jid, g in placement.items()}

    def run(self, passes: int | None = None) -> None:
        """Passes until the deadline (``options.deadline``), ``passes`` of them, or
        :data:`STALE_PASSES` in a row without a gain; ``stats.stopped`` says which."""
        cl = self.instance.cluster
        clock = Deadline.none() if self.options.deadline is None else Deadline(self.options.deadline)
        servers = np.unique(cl.server_of[cl.state == GpuState.FREE])
        rng = np.random.default_rng(self.options.seed)
        # a pair needs, beside its own time, what its solver takes to stop (else it is not run)
        need = MIN_PAIR_SECONDS + FINISH_SECONDS + get_backend(self.backend).stop_seconds
        stale, self.stats.stopped = 0, ""
        while not self.stats.stopped:
            if servers.size < 2 or stale >= STALE_PASSES or (passes is not None and self.stats.passes >= passes):
                self.stats.stopped = STOP_SERVERS if servers.size < 2 else STOP_STALE if stale >= STALE_PASSES \
                    else STOP_PASSES
                return
            self.stats.passes += 1
            before = self.stats.improved
            for pair in np.array_split(rng.permutation(servers), servers.size // 2):
                if clock.left() < need or not self._pair(pair, clock):
                    self.stats.stopped = STOP_DEADLINE
                    return
            stale = stale + 1 if self.stats.improved == before else 0

    def _pair(self, servers: np.ndarray, clock: Deadline) -> bool:
        """Place the jobs lying wholly on ``servers`` again (module docstring); False when the
        round's deadline left the pair's solver no time to run."""
        inside = set(servers.tolist())
        mine = [jid for jid, where in self.home.items() if where <= inside]
        if not any(self.instance.jobs[self.index[jid]].pipeline is not None for jid in mine):
            return True
        sub = self._pair_round(servers, mine)
        given = {jid: self.placement[jid] for jid in mine}
        # priced on the whole round (the other jobs' charges are the same before and after), so
        # that a term pricing a job by where its GPUs lie in the cluster is priced as the round does
        before = evaluate(self.instance, given, self.factors).cost
        end = clock.sooner(FINISH_SECONDS).at
        deadline = min(end, time.monotonic() + PAIR_SECONDS)
        capped = deadline < end
        # the whole round's gap target (abs_gap, in its units) is not the pair's: a pair is solved
        # to optimality (the search has no bound of the round to stop at)
        opts = replace(self.options, time_limit=None, deadline=deadline, abs_gap=0.0)
        try:
            res = solve_stage_round(sub, range(len(mine)), binned_factors(sub.cluster, "none"), backend=self.backend,
                                    options=opts, start=given, warm_start=self.warm_start,
                                    start_label="the search's placement")
        except BackendError:  # (not expected: the start is a placement) the pair keeps its GPUs
            return True
        if "time_limit_reached" in res.info:  # its solver did not run: not a pair solved
            self.stats.skipped += 1
            return capped
        self.stats.pairs += 1
        if set(res.placements) != set(mine):
            return True
        new = {jid: tuple(int(g) for g in gids) for jid, gids in res.placements.items()}
        gain = before - evaluate(self.instance, new, self.factors).cost
        if gain > GAIN_TOL * max(1.0, abs(before)):
            self._take(new, gain)
        return True

    def _take(self, new: Mapping[JobId, tuple[int, ...]], gain: float) -> None:
        """Keep the pair's answer ``new``, all of it or (a Ctrl-C held off) none."""
        homes = self._homes(new)
        with SigintDeferred():
            self.placement = {**self.placement, **new}
            self.home = {**self.home, **homes}
            self.stats.improved += 1
            self.stats.gain += gain

    def _pair_round(self, servers: np.ndarray, mine: list[JobId]) -> RoundInstance:
        """The round restricted to ``servers`` and the jobs ``mine``, the GPUs there that the
        other jobs hold busy."""
        sub = part_instance(self.instance, self.factors, servers, [self.index[jid] for jid in mine],
                            f"{self.instance.name} (pair)")
        keep = set(mine)
        held = [g for jid, gids in self.placement.items() if jid not in keep for g in gids]
        state = sub.cluster.state.copy()
        state[np.isin(sub.cluster.gpu_ids, np.asarray(held, dtype=sub.cluster.gpu_ids.dtype))] = GpuState.BUSY
        return replace(sub, cluster=sub.cluster.with_state(state))


def solve_stage_search(
    instance: RoundInstance,
    admitted: Sequence[int],
    factors: Mapping[str, np.ndarray],
    *,
    backend: str | None = None,
    options: SolveOptions | None = None,
    admission: str = "given",
    info: Mapping[str, Any] | None = None,
    start: Mapping[JobId, Sequence[int]] | None = None,
    start_label: str = "the start given",
    warm_start: bool = True,
) -> PlacementResult | None:
    """The search on pairs of servers (module docstring) from the cheaper of ``start`` (a
    placement of exactly the admitted jobs, labelled ``start_label``) and
    :func:`~pal_opt.ilp.stageround.start_placement` (PAL's, on a tie), until ``options.deadline``;
    a FEASIBLE result (method ``"ilp"``, no bound; FALLBACK when no pair's solver had time to
    run) never worse than that start, with ``info["stage_search"]`` (:class:`SearchStats`).  None
    when there is no start placement (the caller then solves the whole stage program).  A Ctrl-C raises
    :class:`~pal_opt.errors.SolveInterrupted` with the best placement so far.

    Raises
    ------
    InstanceError
        As :func:`~pal_opt.ilp.stageround.build_stage_round`: a job of two or more GPUs whose
        locality penalties decrease with the level.
    """
    t0 = time.perf_counter()
    check_stage_round(instance, admitted)
    cls = get_backend(backend)
    own = start_placement(instance, admitted, factors)
    given = None if start is None else {jid: tuple(int(g) for g in gids) for jid, gids in start.items()}
    starts = [(evaluate(instance, p, factors), k, p, name)
              for k, (p, name) in enumerate(((given, start_label), (own, "PAL's"))) if p is not None]
    if not starts:
        return None
    # the cheaper start; PAL's on a tie
    first_summary, _, first, label = min(starts, key=lambda s: (s[0].cost, -s[1]))
    details = {**(info or {}), "program": "stage", "start": label}
    if params := stage_backend_params(cls, options):  # what each pair's solver is given, as solve_stage_round records
        details["backend_params"] = params
    common: dict[str, Any] = dict(method="ilp", admission=admission, backend=cls.name,
                                  backend_version=cls.version(), info=details, build_seconds=0.0)
    progress.report(stage="solving the stage program on pairs of servers", backend=cls.name)
    search = PairSearch(instance, admitted, factors, first, backend=cls.name, options=options, warm_start=warm_start)
    try:
        search.run()
    except KeyboardInterrupt:  # in a pair's solver (SolveInterrupted) or between two solves
        search.stats.stopped = STOP_INTERRUPTED
        details.update(interrupted=True, stage_search=search.stats.as_info())
        raise SolveInterrupted(priced_result(
            instance, search.placement, factors, status=Status.FEASIBLE, solve_seconds=time.perf_counter() - t0,
            message="interrupted while the stage program was solved on pairs of servers; the best placement "
                    "so far is returned", **common)) from None
    details["stage_search"] = search.stats.as_info()
    stats, placement = search.stats, search.placement
    summary = evaluate(instance, placement, factors)
    if summary.cost > first_summary.cost:  # (not expected: pairs are priced on the round)
        placement, summary = first, first_summary
    status = Status.FEASIBLE
    if stats.pairs == 0 and (stats.stopped == STOP_DEADLINE or stats.skipped):  # no pair in time: the start
        status, details["time_limit_reached"] = Status.FALLBACK, SEARCH_STAGE
    return priced_result(instance, placement, factors, status=status, summary=summary,
                         solve_seconds=time.perf_counter() - t0, **common,
                         message=f"the stage program on pairs of servers from {label} ({stats.pairs} pairs solved "
                                 f"in {stats.passes} passes, {stats.improved} improved; stopped: {stats.stopped}); "
                                 "no bound")
