"""pal-opt's ``ilp`` with GPU types in the Sia simulator: a two-level round (stage 1, stage 2).

Stage 1 (:mod:`pal_opt.hetero.levelprogram`)
    Sia's goodput rows (:class:`pal_opt.hetero.policy.SiaPolicy`: learned models, projection,
    normalisation, re-allocation factor) and Sia's objective.  With ``levels=True`` the columns
    are (job, type, count, nodes, variability level): type, count and the quality of the GPUs
    chosen together; by default (``levels=False``) one level per type, i.e. Sia's program.
Stage 2 (pal-opt's round program, :func:`pal_opt.solve.solve` with ``ilp``)
    By default (``anchor=True``, with ``levels=False``) stage 1 *and Sia's placer* run exactly as
    the ``sia`` policy runs them; then every allocated job goes into the core round program on
    the typed cluster as a *guaranteed* job of its chosen type and count, **Sia's GPUs as its
    running placement** and a move priced at :data:`ANCHOR_COST` seconds (a tie-break), a job of
    at most one node's GPUs forbidden to span servers (:data:`ONE_NODE`), with the binned factors
    the scheduler sees: it minimises Σ demand · ln(slowdown), slowest factor × locality.  A job
    therefore leaves Sia's GPUs only for a strictly better placement, and a job whose per-node
    GPU counts would change (a restart in this simulator) is pinned to Sia's GPUs and the
    program solved again; a moved job's GPUs are ordered so that its per-node shape tuple is
    Sia's.  Without variability a placement of Sia's placer that splits no job over more nodes
    than it needs is already optimal (with Sia's configurations, powers of two up to a node and
    then whole nodes, the placer never splits one), so ``ilp`` allocates exactly as ``sia``
    does; with variability stage 2 never prices worse than Sia's placer.
    ``anchor=False`` (the earlier design): whenever some job must be (re)placed, every allocated
    job but those still restarting is re-placed, its current GPUs its running placement and a
    move priced as ``move_cost`` seconds lost (default 5); with ``move_cost=None`` a job whose
    type and count are unchanged keeps its GPUs instead.

Both stages see the same binned factors as every other policy (:mod:`pal_opt.hetero.gpus`).
By default the program is two-level: stage 1's level rows are exact for one class at a time,
and stage 2 may land a job on a worse level than stage 1 counted on when classes compete for
the same GPUs.  ``joint=True`` instead solves one GPU-level program of configuration, level
and GPUs (:mod:`pal_opt.hetero.jointprogram`), exact for every level but slower.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import BackendError, OptionError
from ..model import Job, RoundInstance, RoundParams, pal_locality
from ..options import is_finite_number, require_type
from .configs import GpuType
from .goodput import JobKind
from .gpus import Layout, Variability
from .jointprogram import JointRound, assign_gpus, build_joint_program, make_cells, order_gpus, solve_joint
from .levelprogram import LevelRound, build_level_program
from .policy import SiaParams, SiaPolicy
from .round import RoundDecision, RoundInput, solve_program
from .simjob import SimJob
from .typeblind import NOMINAL, core_cluster

__all__ = ["ANCHOR_COST", "STAGE2_ROUND", "STAGE2_TIME_LIMIT", "IlpTypesPolicy", "check_move_cost"]

#: Seconds of a 60 s round a move away from Sia's GPUs costs in the anchored stage 2: a tie-break
#: (0.001 per GPU in the program's units), far below any difference of binned factors or locality.
ANCHOR_COST = 0.06
#: The round length (s) the stage-2 program prices a move's lost seconds against (Sia's 60 s).
STAGE2_ROUND = 60.0
#: Seconds the stage-2 placement program may take at most, and what it gets when
#: :attr:`SiaParams.time_limit <pal_opt.hetero.policy.SiaParams.time_limit>` is None; a smaller
#: ``time_limit`` bounds it too, as it bounds every round program.
STAGE2_TIME_LIMIT = 10.0
#: Locality penalties (server, rack, cluster) of a job of at most one node's GPUs in the anchored
#: stage 2: spanning servers would change its shape (a restart in this simulator), so it costs
#: more than any binned factor could gain.
ONE_NODE = (1.0, 100.0, 100.0)
#: The core program's default locality penalties (PAL's λ = 1.7), for every other job.
SPREAD = pal_locality(1.7)


def check_move_cost(value: Any) -> None:
    """``ilp_move_cost``: None, or seconds >= 0 below :data:`STAGE2_ROUND` (a move may not lose
    the whole round the stage-2 program prices it against); else an :class:`OptionError`."""
    ok = value is None or (is_finite_number(value) and 0 <= float(value) < STAGE2_ROUND)
    if not ok:
        raise OptionError(f"ilp_move_cost must be None or a number of seconds >= 0 and below the stage-2 round of "
                          f"{STAGE2_ROUND:g} s (a move may not lose the whole round), got {value!r}")


class IlpTypesPolicy(SiaPolicy):
    """The two-level ``ilp`` policy (module docstring).

    Parameters
    ----------
    cluster
        GPU types in cluster order.
    sia_params
        Sia's parameters (power, λ_n, backend, time limit), as ``SimConfig.sia_params``.
    variability
        Per-GPU factors (the binned ones are used).
    move_cost
        None: a job whose type and count are unchanged keeps its GPUs.  A number S of seconds
        (default 5):
        whenever some job must be placed, stage 2 re-places every allocated job but the
        restarting ones, the others' current GPUs given as their running placement and a move
        priced as losing S seconds of the round (the core program's restart term).
    levels
        True: stage 1 is the level program.  False (default): stage 1 is Sia's program unchanged
        (one level per type, factor 1) and only stage 2 sees the variability; measured better
        (``formulations/sia_ilp_types.md`` §5).
    anchor
        True (default; only with ``levels=False``): stage 2 starts from Sia's own placement and
        leaves it only for a strictly better one with the same GPUs per node.  False: the
        ``move_cost`` design (module docstring).

    Notes
    -----
    Deprecated: ``params=`` (give ``sia_params=``) and reading ``policy.params``, as
    :class:`~pal_opt.hetero.policy.SiaPolicy`.
    """

    def __init__(
        self,
        cluster: Sequence[GpuType],
        sia_params: SiaParams | None = None,
        variability: Variability | None = None,
        on_round: Callable[[RoundInput, RoundDecision], None] | None = None,
        *,
        move_cost: float | None = 5.0,
        levels: bool = False,
        anchor: bool = True,
        joint: bool = False,
        params: SiaParams | None = None,
    ) -> None:
        self._init_sia_params(sia_params, params, stacklevel=5)  # the deprecated params= warns here, at the caller
        super().__init__(cluster, self.sia_params, on_round)
        check_move_cost(move_cost)
        if variability is not None:
            require_type(variability, Variability, "variability", " (parse_variability or draw_variability)")
        for name, flag in (("levels", levels), ("anchor", anchor), ("joint", joint)):
            require_type(flag, bool, name)
        self.move_cost = move_cost
        self.joint = joint
        self.use_levels = levels or joint
        self.anchor = anchor and not levels and not joint
        self.layout = Layout(tuple(self.types))
        self._server = self.layout.server_of()
        self.variability = variability or Variability()
        self.classes = sorted({self.variability.key(a) or NOMINAL for a in self.variability.raw} | {NOMINAL})
        self.levels, self.counts = self._level_tables()
        self._levels_for: tuple[int, ...] = ()  # the GPUs out of service the level tables leave out
        self.holding: dict[int, tuple[int, ...]] = {}

    def _class_index(self, job: SimJob) -> int:
        return self.classes.index(self.variability.key(job.app.name) or NOMINAL)

    def _factors(self, cls: str) -> np.ndarray:
        return np.ones(self.layout.num_gpus) if cls == NOMINAL else np.asarray(self.variability.binned[cls])

    def _level_tables(self, out_of_service: np.ndarray | None = None
                      ) -> tuple[list[list[np.ndarray]], list[list[np.ndarray]]]:
        """Per type and class the binned factors' levels and the GPUs in service at each."""
        levels: list[list[np.ndarray]] = []
        counts: list[list[np.ndarray]] = []
        for t in range(len(self.types)):
            on = self.layout.type_of == t
            if out_of_service is not None:
                on = on & ~out_of_service
            if not self.use_levels:
                levels.append([np.ones(1) for _ in self.classes])
                counts.append([np.array([int(on.sum())]) for _ in self.classes])
                continue
            pairs = [np.unique(self._factors(c)[on], return_counts=True) for c in self.classes]
            levels.append([v for v, _ in pairs])
            counts.append([n for _, n in pairs])
        return levels, counts

    def _level(self, job: SimJob, gpus: Sequence[int]) -> int:
        """Level of the slowest binned factor of the job's class among ``gpus``."""
        if not self.use_levels:
            return 0
        c = self._class_index(job)
        t = int(self.layout.type_of[gpus[0]])
        worst = float(self._factors(self.classes[c])[list(gpus)].max())
        return int(np.searchsorted(self.levels[t][c], worst))

    def _goodput(self, jobs: Sequence[SimJob], now: float) -> np.ndarray:
        g = self.goodput_matrix(jobs).astype(np.float64)
        for i, j in enumerate(jobs):
            prev = self.previous.get(j.index)
            if prev is not None:
                keep = g[i, prev]
                g[i] *= self._factor(j, now)
                g[i, prev] = keep
        return g

    def _stage1(self, rigid: Sequence[SimJob], adaptive: Sequence[SimJob], now: float) -> tuple[np.ndarray, np.ndarray]:
        pins = self._pins(adaptive)
        pinned = np.array([(k, self._level(j, self.holding[j.index])) if k >= 0 and j.index in self.holding else (-1, -1)
                           for j, k in zip(adaptive, pins.tolist(), strict=True)], dtype=np.int64).reshape(-1, 2)
        r = LevelRound(
            self.configs, self._goodput(adaptive, now), np.array([self._class_index(j) for j in adaptive], dtype=np.int64),
            self.levels, self.counts, pinned, self.rigid_costs(rigid, now),
            np.array([j.spec.num_replicas for j in rigid], dtype=np.int64), self._pins(rigid),
            p=self.sia_params.p, lambda_n=self.sia_params.lambda_n,
            capacity=self.layout.capacity(self.out_of_service),
        )
        t0 = time.perf_counter()
        prog = build_level_program(r)
        values, status, name = solve_program(prog, self.sia_params.backend, self.sia_params.time_limit)
        conf, _, rtype = prog.decode(values if values is not None else np.zeros(prog.num_vars))
        self.stats.add(RoundDecision(conf, rtype, prog.objective(values) / 100 if values is not None else 0.0,
                                     status, time.perf_counter() - t0, name))
        return conf, rtype

    def _wanted(self, active: Sequence[SimJob], now: float) -> list[tuple[SimJob, int | None, int]]:
        """(job, type or None, GPUs) per active job from stage 1; updates ``previous``."""
        rigid = [j for j in active if j.kind is JobKind.RIGID]
        adaptive = [j for j in active if j.kind is not JobKind.RIGID]
        conf, rtype = self._stage1(rigid, adaptive, now)
        cs = self.configs
        self.previous = {j.index: int(c) for j, c in zip(rigid, rtype.tolist(), strict=True) if c >= 0}
        self.previous.update({j.index: int(k) for j, k in zip(adaptive, conf.tolist(), strict=True) if k >= 0})
        out: list[tuple[SimJob, int | None, int]] = [(j, None if c < 0 else int(c), j.spec.num_replicas)
                                                     for j, c in zip(rigid, rtype.tolist(), strict=True)]
        out += [(j, None if k < 0 else int(cs.type_index[k]), 0 if k < 0 else int(cs.num_gpus[k]))
                for j, k in zip(adaptive, conf.tolist(), strict=True)]
        return out

    def allocate(self, active: Sequence[SimJob], now: float) -> dict[int, tuple[int, ...]]:
        """GPU positions of every active job for the next round (stage 1, then stage 2 anchored
        at Sia's placement or from the current GPUs; or the joint program)."""
        oos = self.out_of_service
        key = () if oos is None else tuple(np.flatnonzero(oos).tolist())
        if key != self._levels_for:  # the levels count the GPUs in service only
            self.levels, self.counts = self._level_tables(oos)
            self._levels_for = key
        if self.joint:
            return self._allocate_joint(active, now)
        if self.anchor:
            return self._allocate_anchored(active, now)
        wanted = self._wanted(active, now)
        keep: dict[int, tuple[int, ...]] = {}
        move: list[tuple[SimJob, int, int]] = []
        for j, t, n in wanted:
            held = self.holding.get(j.index, ())
            if t is None:
                continue
            if held and int(self.layout.type_of[held[0]]) == t and len(held) == n:
                keep[j.index] = held
            else:
                move.append((j, t, n))
        if move and self.move_cost is not None:
            restarting = {j.index for j in active if j.rescale_time > 0}
            move += [(j, t, n) for j, t, n in wanted if t is not None and j.index in keep and j.index not in restarting]
            keep = {i: g for i, g in keep.items() if i in restarting}
        self.holding = {**keep, **self._stage2(keep, move)}
        return {j.index: self.holding.get(j.index, ()) for j in active}

    def _allocate_anchored(self, active: Sequence[SimJob], now: float) -> dict[int, tuple[int, ...]]:
        """Stage 1 and Sia's placer exactly as ``sia`` runs them, then stage 2 from Sia's GPUs
        (module docstring): a job leaves Sia's GPUs only for a strictly better placement with
        the same GPUs per node, so it keeps its per-node shape and a move never restarts it."""
        sia = SiaPolicy.allocate(self, active, now)
        byid = {j.index: j for j in active}
        anchor = {i: g for i, g in sia.items() if g}
        pinned: dict[int, tuple[int, ...]] = {}
        while True:  # each pass pins at least one more job to Sia's GPUs, which stay feasible
            move = [(byid[i], int(self.layout.type_of[g[0]]), len(g)) for i, g in anchor.items() if i not in pinned]
            placed = self._stage2(pinned, move, anchor=anchor, move_cost=ANCHOR_COST)
            reshaped = {i: anchor[i] for i, g in placed.items() if self._node_counts(g) != self._node_counts(anchor[i])}
            if not reshaped:
                break
            pinned.update(reshaped)
        placed.update(pinned)
        self.holding = {i: self._in_shape_order(g, anchor[i]) for i, g in placed.items()}
        return {j.index: self.holding.get(j.index, ()) for j in active}

    def _node_counts(self, gpus: Sequence[int]) -> tuple[int, ...]:
        """The GPUs per (type, node) of a GPU set, sorted: its shape up to order."""
        return tuple(sorted(Counter(int(self._server[g]) for g in gpus).values()))

    def _in_shape_order(self, gpus: Sequence[int], anchor: tuple[int, ...]) -> tuple[int, ...]:
        """``gpus`` ordered so that their per-node shape tuple is ``anchor``'s (same node counts):
        ``anchor`` itself when the set is the same, else nodes taken in ``anchor``'s shape order."""
        if set(gpus) == set(anchor):
            return anchor
        server = self._server
        nodes: dict[int, list[int]] = {}
        for g in sorted(gpus):
            nodes.setdefault(int(server[g]), []).append(g)
        out: list[int] = []
        for count in self.layout.shape(anchor):
            node = next(n for n, gs in nodes.items() if len(gs) == count)
            out += nodes.pop(node)
        return tuple(out)

    def _running(self, job: SimJob, t: int, n: int) -> tuple[int, ...] | None:
        """The GPUs a job re-placed at its current type and count holds (its running placement)."""
        held = self.holding.get(job.index, ())
        return held if self.move_cost is not None and held and int(self.layout.type_of[held[0]]) == t and len(held) == n else None

    def _stage2(
        self,
        keep: dict[int, tuple[int, ...]],
        move: Sequence[tuple[SimJob, int, int]],
        *,
        anchor: dict[int, tuple[int, ...]] | None = None,
        move_cost: float | None = None,
    ) -> dict[int, tuple[int, ...]]:
        """GPUs of the jobs to (re)place, by the core round program on the GPUs nobody keeps;
        each job's running placement is its ``anchor`` GPUs if given, else :meth:`_running`, and
        a move costs ``move_cost`` seconds (default: the policy's)."""
        from ..solve import solve

        if not move:
            return {}
        busy = self.layout.unavailable(self.out_of_service)
        for g in keep.values():
            busy[list(g)] = True
        factors = {c: self._factors(c) for c in self.classes if c != NOMINAL}
        cluster = core_cluster(self.layout, factors, busy, typed=True)
        jobs = tuple(Job(j.index, n, self.classes[self._class_index(j)], position=i, kind="guaranteed",
                         gpu_type=self.types[t].name,
                         placement=anchor[j.index] if anchor is not None else self._running(j, t, n),
                         locality=ONE_NODE if anchor is not None and n <= self.types[t].gpus_per_node else SPREAD)
                     for i, (j, t, n) in enumerate(move))
        cost = self.move_cost if move_cost is None else move_cost
        params = RoundParams(binning="none", restart_cost=cost or 0.0, round_length=STAGE2_ROUND)
        inst = RoundInstance(cluster, jobs, params)
        limit = STAGE2_TIME_LIMIT if self.sia_params.time_limit is None else min(STAGE2_TIME_LIMIT, self.sia_params.time_limit)
        result = solve(inst, "ilp", backend=self.sia_params.backend, jobs=[j.id for j in jobs], time_limit=limit)
        out = {int(k): tuple(sorted(int(g) for g in v)) for k, v in result.placements.items()}
        for j, t, n in move:  # what the program could not place (it should not happen): first free GPUs
            if j.index not in out:
                taken = set().union(*out.values()) if out else set()
                free = [g for g in np.flatnonzero((self.layout.type_of == t) & ~busy).tolist() if g not in taken]
                if len(free) >= n:
                    out[j.index] = tuple(free[:n])
        return out

    def _joint_round(self, rigid: Sequence[SimJob], adaptive: Sequence[SimJob], now: float
                     ) -> tuple[JointRound, dict[int, tuple[int, ...]]]:
        """The joint program's data and the GPUs kept by the jobs still restarting (pinned)."""
        jobs = [*adaptive, *rigid]
        pins = np.concatenate([self._pins(adaptive), self._pins(rigid)])
        keep = {j.index: self.holding[j.index] for j, k in zip(jobs, pins.tolist(), strict=True)
                if k >= 0 and j.index in self.holding}
        pinned = np.array([(k, self._level(j, keep[j.index])) if j.index in keep else (-1, -1)
                           for j, k in zip(adaptive, pins.tolist(), strict=False)], dtype=np.int64).reshape(-1, 2)
        r = LevelRound(
            self.configs, self._goodput(adaptive, now), np.array([self._class_index(j) for j in adaptive], dtype=np.int64),
            self.levels, self.counts, pinned, self.rigid_costs(rigid, now),
            np.array([j.spec.num_replicas for j in rigid], dtype=np.int64),
            np.array([k if j.index in keep else -1 for j, k in zip(rigid, pins[len(adaptive):].tolist(), strict=True)],
                     dtype=np.int64),
            p=self.sia_params.p, lambda_n=self.sia_params.lambda_n,
            capacity=self.layout.capacity(self.out_of_service),
        )
        free = ~self.layout.unavailable(self.out_of_service)
        for g in keep.values():
            free[list(g)] = False
        factors = np.vstack([self._factors(c) for c in self.classes])
        cells = make_cells(self.layout.type_of, self._server, factors, free)
        cell_of = {g: e for e, gs in enumerate(cells.gpus) for g in gs}
        held = np.zeros((len(jobs), len(cells)), dtype=np.int64)
        for i, j in enumerate(jobs):
            for x in self.holding.get(j.index, ()) if j.index not in keep else ():
                if x in cell_of:
                    held[i, cell_of[x]] += 1
        return JointRound(r, cells, held), keep

    def _allocate_joint(self, active: Sequence[SimJob], now: float) -> dict[int, tuple[int, ...]]:
        """GPU positions of every active job from one joint program (configuration, level, GPUs)."""
        rigid = [j for j in active if j.kind is JobKind.RIGID]
        adaptive = [j for j in active if j.kind is not JobKind.RIGID]
        jobs = [*adaptive, *rigid]
        t0 = time.perf_counter()
        jr, keep = self._joint_round(rigid, adaptive, now)
        prog = build_joint_program(jr)
        values, status, name = solve_joint(prog, self.sia_params.backend, self.sia_params.time_limit)
        if values is None:
            raise BackendError("the joint round program is infeasible (it never should be: nothing but the pinned jobs is a solution)")
        conf, _, rtype, counts = prog.decode(values)
        self.stats.add(RoundDecision(conf, rtype, prog.round_objective(values), status, time.perf_counter() - t0, name))
        self.previous = {j.index: int(c) for j, c in zip(rigid, rtype.tolist(), strict=True) if c >= 0}
        self.previous.update({j.index: int(k) for j, k in zip(adaptive, conf.tolist(), strict=True) if k >= 0})
        gpus = assign_gpus(jr.cells, counts, {i: self.holding.get(jobs[i].index, ()) for i in counts})
        out = dict(keep)
        for i, g in gpus.items():
            held = self.holding.get(jobs[i].index, ())
            out[jobs[i].index] = order_gpus(g, self._server, self.layout.shape(held) if held else ())
        self._check_joint(jobs, conf, rtype, out)
        self.holding = {i: g for i, g in out.items() if g}
        return {j.index: self.holding.get(j.index, ()) for j in active}

    def _check_joint(self, jobs: Sequence[SimJob], conf: np.ndarray, rtype: np.ndarray, out: dict[int, tuple[int, ...]]) -> None:
        """Every job gets exactly its configuration's type and count on at most its node count, and
        no GPU twice (an internal error otherwise)."""
        cs, na, server = self.configs, len(conf), self._server
        for i, j in enumerate(jobs):
            k = int(conf[i]) if i < na else int(rtype[i - na])
            if k < 0:
                continue
            t, n = (int(cs.type_index[k]), int(cs.num_gpus[k])) if i < na else (k, j.spec.num_replicas)
            m = int(cs.num_nodes[k]) if i < na else -(-n // self.types[t].gpus_per_node)
            g = out.get(j.index, ())
            if len(g) != n or any(int(self.layout.type_of[x]) != t for x in g) or len({int(server[x]) for x in g}) > m:
                raise BackendError(f"the joint round gave job {j.index} GPUs {g}, not {n} GPUs of "
                                   f"{self.types[t].name} on ≤ {m} nodes")
        flat = [x for g in out.values() for x in g]
        if len(flat) != len(set(flat)):
            raise BackendError("the joint round gave a GPU to two jobs")
