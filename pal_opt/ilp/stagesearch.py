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
units and is not the pair's).  A job lying on three servers or more is in no pair (but in the
group of three of a pass over an odd number of servers, by chance): after the pairs, each pass
visits in queue order the *group* of every such job whose servers hold at most
:data:`GROUP_MAX_GPUS` free GPUs -- those servers and one more drawn at random (from a stream of
its own, so the pairs are dealt as without groups) among those that keep it within that size --
and places again, the same way, the jobs lying wholly on it.  On rounds of 2- and 4-GPU servers
(``benchmarks/stage_scale.py --server-gpus``), where the 8-GPU pipelines lie on several servers,
a group took about 0.01 s.  Last, each pass visits in queue order the *neighbourhood* of every job
that lies on two servers or more and has no group (on two servers, on servers holding more than
:data:`GROUP_MAX_GPUS` free GPUs: 16-GPU servers, a job spread over servers with many free GPUs,
or a job of more than :data:`NEIGHBOURHOOD_GPUS` GPUs, which no group holds): its servers, and
(:data:`OUTSIDE_SERVER`) the server outside them with the most idle GPUs faster for the job than
its slowest, if any, with every GPU held busy but the job's own, those of other jobs lying wholly
on its servers, drawn in an order from a third stream of its own while they fit, and idle GPUs of
those servers, fastest for the job first (:data:`IDLE_SHARE` of the room kept for them): at most
:data:`NEIGHBOURHOOD_GPUS` free GPUs, a program no larger than a pair's (0.11 s at the median on
``stage_scale.py --server-gpus 16 --pipeline-gpus 16 24`` under load 6-7, as the pairs there), or
for a larger job its own GPUs and at most :data:`LARGE_JOB_EXTRA_GPUS` more (0.04-0.06 s at the
median for the 48-GPU pipelines of ``--pipeline-gpus 16 48``, about a pair's).  The jobs it opens are placed again
as a pair's are.  The pair's
(group's, neighbourhood's) answer is
priced on the whole round (its jobs alone: the others' charges do not change) and kept when it
costs less, so the round's cost falls by the gain the search reports, whatever a cost term makes
of where a job's GPUs lie in the cluster.  The search
stops at the deadline (a pair is not started with less than :data:`MIN_PAIR_SECONDS`, the finish
reserve and the backend's ``stop_seconds`` left; a pair whose solver the deadline left no time is
not counted as solved), after ``passes`` passes, after :data:`STALE_PASSES` passes in a row
that found nothing, or once within the gap target of a bound it was given;
``SearchStats.stopped`` says which.

:func:`solve_stage_search` is what :func:`pal_opt.ilp.solve_ilp` runs, under a deadline, instead
of the whole stage program on a round with at least :data:`SEARCH_MIN_GPUS` free GPUs and a
pipeline job (:func:`search_applies`; every one lies in a pair, a group or a neighbourhood, one of
more GPUs than those hold in its own large neighbourhood: until the fifteenth session a round
whose only pipelines were such jobs got the whole stage program, which on
``stage_scale.py --partitioned-only`` rounds of 40- and 48-GPU pipelines, 512-2,048 GPUs, 10 s,
returned its start in all 12, where the search ended 0-1.9 lower (``formulations/pipeline_round.md``
§6)): the
search from the cheaper of the start given (the round program's, pipelines seen as gangs) and
PAL's placement with the stages mapped best.  Its bound is :func:`~pal_opt.ilp.stageround.alone_bound`: each job at its
cheapest alone on the free GPUs (valid, as every placement prices each job at least that, and
weak, as all may take the fastest GPUs at once; 0.03-0.2 s at 2,048 GPUs, skipped when that does
not fit the deadline: :data:`~pal_opt.ilp.stageround.BOUND_SECONDS_PER_GPU`, as beside the whole stage program,
:func:`~pal_opt.ilp.stageround.alone_bound_in_time`); the search stops once
within the gap target of it (``abs_gap``; :data:`STOP_BOUND`).  Its answer is FEASIBLE with that
bound and gap (OPTIMAL when the gap is closed), and the message says why the search stopped ("time
limit reached" when the deadline did); FALLBACK, with ``info["time_limit_reached"]``, when no
pair's solver had time to run (the start, as the whole stage program returns it then).  A Ctrl-C, in a pair's solver or between two, raises
:class:`~pal_opt.errors.SolveInterrupted` with the best placement so far.  Under a deadline the
answer depends on how many pairs were solved in time, as the whole program's incumbent depends on
how far its solver got; without one (or when it stopped before it) the search is deterministic
when every pair's solver ends within :data:`PAIR_SECONDS`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, NamedTuple

import numpy as np

from .. import progress
from ..binning import binned_factors
from ..cost import CostSummary, evaluate, relative_gap
from ..deadline import FINISH_SECONDS, Deadline
from ..errors import BackendError, SolveInterrupted
from ..model import GpuState, JobId, RoundInstance
from ..result import PlacementResult, Status, priced_result
from ..sigint import SigintDeferred
from .backends import SolveOptions, get_backend
from .stageround import (
    PROVEN_GAP,
    alone_bound_in_time,
    bounded,
    check_stage_round,
    solve_stage_round,
    stage_backend_params,
    start_placement,
)
from .subround import part_instance

__all__ = ["SEARCH_MIN_GPUS", "PAIR_SECONDS", "GROUP_MAX_GPUS", "NEIGHBOURHOOD_GPUS", "LARGE_JOB_EXTRA_GPUS",
           "OUTSIDE_SERVER", "STALE_PASSES", "STOPS",
           "SearchStats", "PairSearch", "search_applies", "solve_stage_search"]

#: Free GPUs from which :func:`pal_opt.ilp.solve_ilp`, under a deadline, searches pairs of servers
#: instead of solving the whole stage program.  Measured on ``benchmarks/stage_scale.py``'s rounds
#: with a 10 s limit: at 256 GPUs both end at about the same cost (-6.34 and -6.36); at 512 the
#: whole program returned its start (-7.49) and the search reached -9.36.
SEARCH_MIN_GPUS = 384
#: Seconds the stage program of one pair may take (its answer is then its solver's incumbent).
PAIR_SECONDS = 1.0
#: A job lying on three servers or more whose free GPUs are at most this many is re-placed, once
#: per pass after the pairs, with the jobs lying wholly on its servers plus one more server drawn
#: at random (while the group stays within this many free GPUs): four 8-GPU servers, eight of 4
#: GPUs.  Such a group's program, of a few jobs on at most 32 GPUs, is solved in about 0.02 s
#: (``benchmarks/stage_scale.py --server-gpus 2``, module docstring).
GROUP_MAX_GPUS = 32
#: A job of at most this many GPUs lying on two servers or more that no group holds (on two servers,
#: or on servers whose free GPUs exceed :data:`GROUP_MAX_GPUS`: 16-GPU servers, servers with many
#: free GPUs) is re-placed, once per pass after the groups, in a *neighbourhood* of at most this
#: many of its servers' free GPUs: its own, those of other jobs lying wholly on its servers (drawn
#: at random, while they fit) and idle ones, fastest for the job first; the GPUs outside it held
#: busy.  Its program is no larger than a pair's (0.11 s at the median on ``stage_scale.py
#: --server-gpus 16 --pipeline-gpus 16 24`` under load 6-7, as the pairs there).  A larger job
#: has one of its own GPUs and :data:`LARGE_JOB_EXTRA_GPUS` more.
NEIGHBOURHOOD_GPUS = GROUP_MAX_GPUS
#: A job of more than :data:`NEIGHBOURHOOD_GPUS` GPUs lying on two servers or more (no pair or
#: group holds one) has a neighbourhood too: its own GPUs and at most this many more (other jobs
#: lying wholly on its servers, idle GPUs), so that its program is solved in about a pair's time
#: (48-GPU pipelines on 16-GPU servers, ``stage_scale.py --server-gpus 16 --pipeline-gpus 16 48``:
#: 0.04-0.06 s at the median with 8, 0.19-0.23 s with 16 for about the same gain).
LARGE_JOB_EXTRA_GPUS = 8
#: Whether a neighbourhood may also open idle GPUs of one server outside the job's: the one with
#: the most idle GPUs faster for the job than its slowest (:meth:`PairSearch._idle`).  Rounds with
#: idle GPUs to measure it on: ``benchmarks/stage_scale.py --idle-fraction``.
OUTSIDE_SERVER = True
#: The share of a neighbourhood's room (beside the job's own GPUs) kept for idle GPUs, when its
#: servers have some: the rest goes to the jobs drawn first.
IDLE_SHARE = 0.25
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
STOP_BOUND = "within the gap target of the bound"
STOPS = (STOP_DEADLINE, STOP_STALE, STOP_PASSES, STOP_SERVERS, STOP_INTERRUPTED, STOP_BOUND)
#: ``info["time_limit_reached"]`` when the deadline left no time for any pair.
SEARCH_STAGE = "solving the stage program on pairs of servers"


class _Open(NamedTuple):
    """What a neighbourhood (:meth:`PairSearch._open`) opens: the jobs it places again (queue
    order), the idle GPUs (ids) it leaves free beside theirs, and its servers (positions, sorted:
    the job's and, with :data:`OUTSIDE_SERVER`, the one outside them it drew idle GPUs from)."""

    jobs: tuple[JobId, ...]
    idle: np.ndarray
    servers: np.ndarray


@dataclass
class SearchStats:
    """What a :class:`PairSearch` did: ``passes`` begun, ``pairs`` whose stage program was solved
    (a pair the deadline left no time to solve is not counted), ``groups`` of a multi-server job's
    servers and ``neighbourhoods`` of a job no group holds (:data:`NEIGHBOURHOOD_GPUS`) likewise,
    ``improved`` pairs, groups and neighbourhoods whose answer was taken, the total ``gain`` in
    round cost, why it ``stopped`` (one of :data:`STOPS`; empty while it runs), and those
    ``skipped``: started, but their solver had no time to run."""

    passes: int = 0
    pairs: int = 0
    improved: int = 0
    gain: float = 0.0
    stopped: str = ""
    skipped: int = 0
    groups: int = 0
    neighbourhoods: int = 0

    @property
    def solved(self) -> int:
        """Pairs, groups and neighbourhoods solved."""
        return self.pairs + self.groups + self.neighbourhoods

    def as_info(self) -> dict[str, Any]:
        """For ``PlacementResult.info["stage_search"]``."""
        return asdict(self)


def search_applies(instance: RoundInstance, admitted: Sequence[int] | None = None) -> bool:
    """Whether the round has at least :data:`SEARCH_MIN_GPUS` free GPUs and (with ``admitted``)
    an admitted pipeline job.  One that two servers' free GPUs, a group's (:data:`GROUP_MAX_GPUS`)
    or a neighbourhood's (:data:`NEIGHBOURHOOD_GPUS`) can hold lies in one of those; a larger one
    outgrows every server's free GPUs, so it lies on two servers or more, where its own
    neighbourhood (:data:`LARGE_JOB_EXTRA_GPUS`) re-places it.  Until the fifteenth session a round
    whose only pipelines were larger got the whole stage program; measured (HiGHS, 10 s,
    ``benchmarks/stage_scale.py --partitioned-only``, pipelines of 40 and 48 GPUs on 8- and 16-GPU
    servers, 512-2,048 GPUs) it returned its start in all 12 rounds (at 2,048 GPUs the program did
    not fit the deadline), where the search ended 0-1.9 lower (equal in one)."""
    cl = instance.cluster
    free = cl.state == GpuState.FREE
    if int(np.count_nonzero(free)) < SEARCH_MIN_GPUS:
        return False
    if admitted is None:
        return True
    return any(instance.jobs[i].pipeline is not None for i in admitted)


class PairSearch:
    """The search on pairs of servers (module docstring) from ``start``, a placement of exactly
    the ``admitted`` jobs (GPU lists in stage order).  ``placement`` is the best placement so far,
    ``cost`` its round cost and ``stats`` what was done; :meth:`run` improves them, and stops once
    ``cost`` is within the gap target of ``bound`` (a lower bound of the round cost, if given)."""

    def __init__(self, instance: RoundInstance, admitted: Sequence[int], factors: Mapping[str, np.ndarray],
                 start: Mapping[JobId, Sequence[int]], *, backend: str | None = None,
                 options: SolveOptions | None = None, warm_start: bool = True, bound: float | None = None) -> None:
        self.instance, self.factors, self.warm_start, self.bound = instance, factors, warm_start, bound
        self.backend = get_backend(backend).name
        self.options = options or SolveOptions()
        self.index = {instance.jobs[i].id: i for i in admitted}
        self.placement = {jid: tuple(int(g) for g in start[jid]) for jid in self.index}
        self.home = self._homes(self.placement)
        self.stats = SearchStats()
        self.cost = evaluate(instance, self.placement, factors).cost
        self.demand = sum(instance.jobs[i].demand for i in admitted)

    def _homes(self, placement: Mapping[JobId, tuple[int, ...]]) -> dict[JobId, frozenset[int]]:
        """The servers each job of ``placement`` lies on."""
        cl = self.instance.cluster
        return {jid: frozenset(cl.server_of[cl.positions(g)].tolist()) for jid, g in placement.items()}

    def run(self, passes: int | None = None) -> None:
        """Passes until the deadline (``options.deadline``), ``passes`` of them, :data:`STALE_PASSES`
        in a row without a gain, or the bound met; ``stats.stopped`` says which."""
        cl = self.instance.cluster
        clock = Deadline.none() if self.options.deadline is None else Deadline(self.options.deadline)
        free = np.bincount(cl.server_of[cl.state == GpuState.FREE], minlength=cl.num_servers)
        servers = np.flatnonzero(free)
        rng = np.random.default_rng(self.options.seed)
        # the groups' and the neighbourhoods' draws from streams of their own: the pairs are dealt
        # as without groups, the groups drawn as without neighbourhoods
        group_rng = np.random.default_rng([self.options.seed, 1])
        near_rng = np.random.default_rng([self.options.seed, 2])
        stale, self.stats.stopped = 0, ""
        while True:
            self.stats.stopped = (STOP_SERVERS if servers.size < 2 else STOP_BOUND if self.bound_met()
                                  else STOP_STALE if stale >= STALE_PASSES
                                  else STOP_PASSES if passes is not None and self.stats.passes >= passes else "")
            if self.stats.stopped:
                return
            self.stats.passes += 1
            before = self.stats.improved
            pairs = np.array_split(rng.permutation(servers), servers.size // 2)
            self.stats.stopped = (self._visit(((p, None) for p in pairs), clock, "pairs")
                                  or self._visit(((g, None) for g in self._groups(group_rng, free)), clock, "groups")
                                  or self._visit(self._neighbourhoods(near_rng, free), clock, "neighbourhoods"))
            if self.stats.stopped:
                return
            stale = stale + 1 if self.stats.improved == before else 0

    def bound_met(self) -> bool:
        """Whether the placement is within the gap target (``options.abs_gap``) of the ``bound``
        given, or proven optimal by it (:data:`PROVEN_GAP`)."""
        if self.bound is None:
            return False
        gap = relative_gap(self.cost, self.bound, self.demand)
        return self.cost - self.bound <= self.options.abs_gap or (gap is not None and gap <= PROVEN_GAP)

    def _visit(self, groups: Iterator[tuple[np.ndarray, _Open | None]], clock: Deadline, kind: str) -> str:
        """Place again the jobs of each group of servers in turn (:meth:`_pair`; ``kind``: the
        :class:`SearchStats` count of its solves, with what of it is open, None: every job lying
        wholly on it and every GPU the others leave); why the search stops (:data:`STOP_DEADLINE`
        once the deadline leaves no time for the next, :data:`STOP_BOUND`), else ``""``."""
        # a group needs, beside its own time, what its solver takes to stop (else it is not run)
        need = MIN_PAIR_SECONDS + FINISH_SECONDS + get_backend(self.backend).stop_seconds
        for group, opened in groups:
            if self.bound_met():
                return STOP_BOUND
            if clock.left() < need or not self._pair(group, clock, kind, opened):
                return STOP_DEADLINE
        return ""

    def _groups(self, rng: np.random.Generator, free: np.ndarray) -> Iterator[np.ndarray]:
        """The group of each admitted job (queue order) that lies, when its turn comes, on at
        least three servers holding at most :data:`GROUP_MAX_GPUS` free GPUs (``free``: per
        server): those servers and one more drawn from ``rng`` among the servers with free GPUs
        that keep it within :data:`GROUP_MAX_GPUS` (if any); each group visited once a pass."""
        seen: set[frozenset[int]] = set()
        for jid in self.index:
            where = self.home[jid]
            inside = np.fromiter(where, dtype=np.int64)
            room = GROUP_MAX_GPUS - int(free[inside].sum())
            if len(where) < 3 or room < 0:
                continue
            others = np.flatnonzero((free > 0) & (free <= room))
            others = others[~np.isin(others, inside)]
            group = set(where) | ({int(others[rng.integers(others.size)])} if others.size else set())
            if frozenset(group) not in seen:
                seen.add(frozenset(group))
                yield np.array(sorted(group))

    def _neighbourhoods(self, rng: np.random.Generator, free: np.ndarray) -> Iterator[tuple[np.ndarray, _Open]]:
        """The neighbourhood of each admitted job (queue order) that lies, when its turn comes, on
        two servers or more and has no group (:meth:`_groups`: on two servers only, on servers
        holding more than :data:`GROUP_MAX_GPUS` free GPUs, or a job of more than
        :data:`NEIGHBOURHOOD_GPUS` GPUs; ``free``: per server): its servers (and the one
        :meth:`_idle` adds), opened as :meth:`_open` says (``rng``)."""
        for jid in self.index:
            where = self.home[jid]
            if len(where) >= 2 and (len(where) == 2 or len(self.placement[jid]) > NEIGHBOURHOOD_GPUS
                                    or int(free[np.fromiter(where, dtype=np.int64)].sum()) > GROUP_MAX_GPUS):
                opened = self._open(jid, where, rng)
                yield opened.servers, opened

    def _idle(self, jid: JobId, where: frozenset[int]) -> tuple[np.ndarray, np.ndarray]:
        """The idle GPUs (positions: free, held by no job) a neighbourhood of job ``jid`` on its
        servers ``where`` may open, and its servers: those of ``where`` and (with
        :data:`OUTSIDE_SERVER`) of the server outside them with the most idle GPUs faster for the
        job than its slowest GPU (the lowest position on a tie; none when no server has one)."""
        cl = self.instance.cluster
        held = np.fromiter((g for gids in self.placement.values() for g in gids), dtype=cl.gpu_ids.dtype)
        idle = (cl.state == GpuState.FREE) & ~np.isin(cl.gpu_ids, held)
        mine = np.isin(cl.server_of, list(where))
        servers = sorted(where)
        if OUTSIDE_SERVER:
            speed = np.asarray(self.factors[self.instance.jobs[self.index[jid]].perfclass])
            slowest = float(speed[cl.positions(self.placement[jid])].max())
            fast = np.bincount(cl.server_of[idle & ~mine & (speed < slowest)], minlength=cl.num_servers)
            if fast.any():
                best = int(np.argmax(fast))
                mine |= cl.server_of == best
                servers = sorted({*servers, best})
        return np.flatnonzero(mine & idle), np.asarray(servers, dtype=np.int64)

    def _open(self, jid: JobId, where: frozenset[int], rng: np.random.Generator) -> _Open:
        """Job ``jid``'s neighbourhood on its servers ``where`` (and the one outside them
        :meth:`_idle` adds): the job; the other jobs lying wholly on ``where``, in an order drawn
        from ``rng``, each while the GPUs so far fit the cap less :data:`IDLE_SHARE` of the room
        for idle GPUs (when there are some); then idle GPUs (:meth:`_idle`), fastest for the job's
        class first (by position on a tie), up to the cap in all: :data:`NEIGHBOURHOOD_GPUS`, or
        for a larger job its own GPUs and :data:`LARGE_JOB_EXTRA_GPUS` more."""
        cl = self.instance.cluster
        own = len(self.placement[jid])
        cap = own + LARGE_JOB_EXTRA_GPUS if own > NEIGHBOURHOOD_GPUS else NEIGHBOURHOOD_GPUS
        room = cap - own
        idle, servers = self._idle(jid, where)
        left = room - min(idle.size, int(room * IDLE_SHARE))
        others = [k for k, on in self.home.items() if k != jid and on <= where]
        jobs = {jid}
        for k in rng.permutation(len(others)).tolist():
            if len(self.placement[others[k]]) <= left:
                jobs.add(others[k])
                left -= len(self.placement[others[k]])
        used = sum(len(self.placement[k]) for k in jobs)
        speed = np.asarray(self.factors[self.instance.jobs[self.index[jid]].perfclass])[idle]
        fastest = idle[np.lexsort((idle, speed))][:cap - used]
        return _Open(tuple(k for k in self.index if k in jobs), cl.gpu_ids[fastest], servers)

    def _pair(self, servers: np.ndarray, clock: Deadline, kind: str = "pairs", opened: _Open | None = None) -> bool:
        """Place the jobs lying wholly on ``servers`` again (module docstring), or only those
        ``opened`` names on the GPUs it leaves open (a neighbourhood), a solve counted in
        ``stats``'s ``kind``; False when the round's deadline left the solver no time to run."""
        inside = set(servers.tolist())
        mine = ([jid for jid, where in self.home.items() if where <= inside] if opened is None
                else list(opened.jobs))
        if not any(self.instance.jobs[self.index[jid]].pipeline is not None for jid in mine):
            return True
        sub = self._pair_round(servers, mine, None if opened is None else opened.idle)
        given = {jid: self.placement[jid] for jid in mine}
        # priced on the whole round (the other jobs' charges are the same before and after), so
        # that a term pricing a job by where its GPUs lie in the cluster is priced as the round does
        before = evaluate(self.instance, given, self.factors).cost
        end = clock.sooner(FINISH_SECONDS).at
        deadline = min(end, time.monotonic() + PAIR_SECONDS)
        capped = deadline < end
        # the whole round's gap target (abs_gap, in its units) is not the pair's: a pair is solved
        # to optimality (the search stops at the round's bound, ``bound_met``, not a pair)
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
        setattr(self.stats, kind, getattr(self.stats, kind) + 1)
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
            self.cost -= gain

    def _pair_round(self, servers: np.ndarray, mine: list[JobId], idle: np.ndarray | None = None) -> RoundInstance:
        """The round restricted to ``servers`` and the jobs ``mine``, the GPUs there that the
        other jobs hold busy, and (with ``idle``, GPU ids) every GPU no job holds but those."""
        sub = part_instance(self.instance, self.factors, servers, [self.index[jid] for jid in mine],
                            f"{self.instance.name} (pair)")
        keep = set(mine)
        held = [g for jid, gids in self.placement.items() if jid not in keep for g in gids]
        state = sub.cluster.state.copy()
        state[np.isin(sub.cluster.gpu_ids, np.asarray(held, dtype=sub.cluster.gpu_ids.dtype))] = GpuState.BUSY
        if idle is not None:
            opened = np.concatenate([np.asarray(self.placement[jid], dtype=np.int64) for jid in mine] + [idle])
            state[(state == GpuState.FREE) & ~np.isin(sub.cluster.gpu_ids, opened)] = GpuState.BUSY
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
    a FEASIBLE result (method ``"ilp"``, with the jobs-alone bound and its gap; OPTIMAL when that
    gap is closed, FALLBACK when no pair's solver had time to run) never worse than that start, with ``info["stage_search"]`` (:class:`SearchStats`).  None
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
    bound = alone_bound_in_time(instance, admitted, factors, None if options is None else options.deadline)
    if bound is not None:
        details["alone_bound"] = bound
    progress.report(stage="solving the stage program on pairs of servers", backend=cls.name)
    search = PairSearch(instance, admitted, factors, first, backend=cls.name, options=options, warm_start=warm_start,
                        bound=bound)
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
    return _answer(instance, factors, search, (first, first_summary, label), bound, common, t0)


def _answer(instance: RoundInstance, factors: Mapping[str, np.ndarray], search: PairSearch,
            first: tuple[dict[JobId, tuple[int, ...]], CostSummary, str], bound: float | None,
            common: dict[str, Any], t0: float) -> PlacementResult:
    """The search's priced answer (never worse than the start ``first``: placement, its price,
    its label) with ``bound``, the jobs-alone bound (:func:`~pal_opt.ilp.stageround.alone_bound`),
    and its gap: OPTIMAL when that gap is closed, FALLBACK when no pair's solver had time to run."""
    stats, placement, details = search.stats, search.placement, common["info"]
    summary = evaluate(instance, placement, factors)
    if summary.cost > first[1].cost:  # (not expected: pairs are priced on the round)
        placement, summary = first[0], first[1]
    none_in_time = stats.solved == 0 and (stats.stopped == STOP_DEADLINE or stats.skipped)  # the start
    # OPTIMAL when the gap is closed (the start itself, when no pair was solved)
    bound, gap, status = bounded(summary.cost, search.demand, Status.FALLBACK if none_in_time else Status.FEASIBLE,
                                 [bound])
    if status == Status.FALLBACK:
        details["time_limit_reached"] = SEARCH_STAGE
    groups = f", {stats.groups} groups of a multi-server job's servers" if stats.groups else ""
    if stats.neighbourhoods:
        groups += f", {stats.neighbourhoods} neighbourhoods of a multi-server job"
    return priced_result(instance, placement, factors, status=status, summary=summary, bound=bound, gap=gap,
                         solve_seconds=time.perf_counter() - t0, **common,
                         message=f"the stage program on pairs of servers from {first[2]} ({stats.pairs} pairs"
                                 f"{groups} solved in {stats.passes} passes, {stats.improved} improved; stopped: "
                                 f"{stats.stopped}); bound: each job alone on the free GPUs"
                                 + ("" if bound is not None else " (none)"))
