"""Between program vectors and GPU sets.

:func:`decode` turns a solution of the round program into ``{job id: GPU ids}``:

1. kept running jobs (keep variables at 1) get their current GPUs;
2. the other jobs of each type fill the type's slots (``x``, ``y``, ``z`` at their values) in
   queue order; a slot's jobs join its pool;
3. integral per-(pool, GPU type) counts are computed by one maximum flow on the laminar
   network source → pool → (node, type) → … → (server, type) → sink.  The solver's own flow
   values are not used: they may be fractional (they are continuous variables), and recomputing
   them makes the placement depend only on the slot values, whichever backend found them;
4. concrete GPUs are taken server pools first, then rack pools from the rack's leftovers, then
   cluster pools from the cluster's leftovers, preferring servers (and racks) with the most
   leftover GPUs the pool can use;
5. each pool's GPUs are split among its jobs, largest demand first, best fit by server, so a
   job in a rack or cluster pool spans as few servers as it can.

Every job then lies on GPUs of level ≤ its slot's level, inside the slot's node, so its true cost
(:func:`pal_opt.cost.evaluate`) is at most the slot's cost: the decoded placement costs at most
the program objective, and exactly that at the optimum.

:func:`encode` is the converse: a valid placement of the admitted jobs becomes a feasible
program vector of the same cost (used for warm starts and in the tests).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import BackendError, InputTypeError, InstanceError
from ..model import JobId, Level, keeps_placement
from ..options import number_array
from .formulation import KIND_DROP, KIND_FLOW, KIND_KEEP, KIND_X, KIND_Y, KIND_Z, Formulation

__all__ = ["decode", "encode", "INTEGRALITY_TOL"]

#: How far a solver's integer variable may sit from an integer before decoding refuses it.
INTEGRALITY_TOL = 1e-4


def _rounded(form: Formulation, values: np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.shape != (form.num_vars,):
        raise BackendError(f"solution has {v.size} values, the program has {form.num_vars} variables")
    ints = form.integrality
    finite = np.isfinite(v[ints])  # (a NaN, a value the solver did not give, is not finite)
    vi = np.where(finite, v[ints], 0.0)
    r = np.round(vi)
    bad = ~finite | (np.abs(vi - r) > INTEGRALITY_TOL)
    if bad.any():
        i = int(np.flatnonzero(ints)[np.argmax(bad)])
        raise BackendError(f"variable {form.var_names[i]} = {float(v[i])!r} is not integral")
    lo, hi = form.col_lo[ints], form.col_hi[ints]
    out_of_range = (r < lo) | (r > hi)
    if out_of_range.any():
        k = int(np.argmax(out_of_range))
        i = int(np.flatnonzero(ints)[k])
        raise BackendError(f"variable {form.var_names[i]} = {float(v[i])!r} is outside its bounds "
                           f"[{lo[k]:g}, {hi[k]:g}]")
    out = np.zeros(form.num_vars, dtype=np.int64)
    out[ints] = r.astype(np.int64)
    return out


def _require_form(form: Any) -> None:
    if not isinstance(form, Formulation):
        raise InputTypeError(f"must be a Formulation (pal_opt.ilp.build_formulation), got {type(form).__name__}",
                             path="form")


def decode(form: Formulation, values: np.ndarray) -> dict[JobId, tuple[int, ...]]:
    """GPU sets for the admitted jobs from a program solution.

    Parameters
    ----------
    form
        The program.
    values
        A feasible solution vector (integer variables within :data:`INTEGRALITY_TOL` of an
        integer inside their bounds; the continuous flow variables are not read).

    Returns
    -------
    dict
        ``{job id: sorted GPU ids}`` in queue order.

    Raises
    ------
    BackendError
        If ``values`` is not a feasible, integral slot assignment: the wrong length, an integer
        variable not finite, fractional or out of its bounds, a job type given more or fewer
        slots than it has jobs to place, a job both kept and left out, slots whose pools the
        free GPUs cannot hold.
    """
    _require_form(form)
    inst = form.instance
    cl = inst.cluster
    vals = _rounded(form, number_array(values, "values", "iufb"))
    kind = form.var_kind
    used = np.zeros(cl.num_gpus, dtype=bool)
    out: dict[JobId, tuple[int, ...]] = {}

    # 1. kept running jobs (a RoundInstance holds no two running jobs on one GPU: no overlap)
    kept: set[int] = set()
    for k in np.flatnonzero((kind == KIND_KEEP) & (vals > 0)).tolist():
        j = int(form.var_job[k])
        pos = cl.positions(inst.jobs[j].placement or ())
        used[pos] = True
        kept.add(j)
        out[inst.jobs[j].id] = tuple(sorted(int(g) for g in cl.gpu_ids[pos]))

    # (optional running jobs whose drop variable is 1 are left out: preempted)
    dropped = {int(form.var_job[k]) for k in np.flatnonzero((kind == KIND_DROP) & (vals > 0)).tolist()}
    if dropped & kept:
        raise BackendError("a job both keeps its GPUs and is left out")

    # 2. the other jobs fill their type's slots in queue order
    slots = np.flatnonzero((kind <= KIND_Z) & (vals > 0))
    pool_jobs: dict[int, list[int]] = {}
    by_type: dict[int, list[int]] = {}
    for v in slots.tolist():
        by_type.setdefault(int(form.var_type[v]), []).extend([v] * int(vals[v]))
    for t, jt in enumerate(form.types):
        waiting = [j for j in jt.jobs if j not in kept and j not in dropped]
        filled = by_type.get(t, [])
        if len(filled) != len(waiting):
            raise BackendError(f"job type {t} has {len(waiting)} jobs to place but {len(filled)} slots")
        for j, v in zip(waiting, filled, strict=True):
            pool_jobs.setdefault(int(form.var_pool[v]), []).append(j)
    demand = np.zeros(form.num_pools, dtype=np.int64)
    for q, js in pool_jobs.items():
        demand[q] = sum(inst.jobs[j].demand for j in js)

    # 3. integral GPU counts per (pool, GPU type)
    avail_pos = np.flatnonzero((form.gpu_type >= 0) & ~used)
    flows = _pool_type_flows(form, demand, avail_pos)

    # 4. concrete GPUs per pool, then 5. split among the pool's jobs
    taken = _take_gpus(form, flows, avail_pos, demand)
    for q in sorted(pool_jobs):
        for j, pos in _split_pool(form, q, taken[q], pool_jobs[q]).items():
            out[inst.jobs[j].id] = tuple(sorted(int(g) for g in cl.gpu_ids[pos]))
    order = {inst.jobs[j].id: n for n, j in enumerate(form.admitted)}
    return dict(sorted(out.items(), key=lambda kv: order[kv[0]]))


def _pool_type_flows(form: Formulation, demand: np.ndarray, avail_pos: np.ndarray) -> dict[int, np.ndarray]:
    """``{pool: GPUs per GPU type}`` by one maximum flow on the laminar network."""
    from scipy.sparse.csgraph import maximum_flow  # here: importing it takes 0.1-0.25 s (scipy.sparse.linalg)

    cl = form.instance.cluster
    nt = int(form.type_levels.shape[0])
    S, R = cl.num_servers, len(cl.rack_ids)
    racked = cl.racked
    cnt = np.zeros((S, nt), dtype=np.int64)
    np.add.at(cnt, (cl.server_of[avail_pos], form.gpu_type[avail_pos]), 1)
    cntr = np.zeros((R, nt), dtype=np.int64)
    if racked:
        np.add.at(cntr, cl.rack_of_server, cnt)
    tot = cnt.sum(axis=0)
    # node ids: 0 source, 1 sink, pools, then (server, g), (rack, g), (cluster, g)
    base_s = 2 + form.num_pools
    base_r = base_s + S * nt
    base_c = base_r + R * nt
    n_nodes = base_c + nt
    edges: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    sc = np.flatnonzero(cnt.ravel() > 0)
    edges.append((base_s + sc, np.ones(sc.size, dtype=np.int64), cnt.ravel()[sc]))
    if racked:
        rack_cell = cl.rack_of_server[sc // nt] * nt + sc % nt
        edges.append((base_r + rack_cell, base_s + sc, cnt.ravel()[sc]))
        rcell = np.flatnonzero(cntr.ravel() > 0)
        edges.append((base_c + rcell % nt, base_r + rcell, cntr.ravel()[rcell]))
    else:
        edges.append((base_c + sc % nt, base_s + sc, cnt.ravel()[sc]))
    active = np.flatnonzero(demand > 0)
    edges.append((np.zeros(active.size, dtype=np.int64), 2 + active, demand[active]))
    pk, pn, pp, pv = (a[active] for a in (form.pool_kind, form.pool_node, form.pool_profile, form.pool_level))
    # pool -> (its node, g) for every compatible GPU type present there
    avail = np.vstack([cnt, cntr, tot[None, :]])
    node_row = np.where(pk == KIND_X, pn, np.where(pk == KIND_Y, S + pn, S + R))
    compat = (form.type_levels.T[pp] <= pv[:, None]) & (avail[node_row] > 0)
    qi, eg = np.nonzero(compat)
    node_base = np.where(pk == KIND_X, base_s + pn * nt, np.where(pk == KIND_Y, base_r + pn * nt, base_c))
    src = 2 + active[qi]
    dst = node_base[qi] + eg
    edges.append((src, dst, demand[active][qi]))
    uu = np.concatenate([e[0] for e in edges]).astype(np.int64)
    ww = np.concatenate([e[1] for e in edges]).astype(np.int64)
    cc = np.concatenate([e[2] for e in edges]).astype(np.int32)
    graph = sp.csr_array((cc, (uu, ww)), shape=(n_nodes, n_nodes))
    res = maximum_flow(graph, 0, 1)
    need = int(demand.sum())
    if int(res.flow_value) != need:
        raise BackendError(f"solution is not placeable: {int(res.flow_value)} of {need} GPUs routed")
    fv = np.asarray(res.flow.tocsr()[src, dst]).ravel().astype(np.int64) if src.size else np.zeros(0, dtype=np.int64)
    out = {int(q): np.zeros(nt, dtype=np.int64) for q in active.tolist()}
    for q, g, f in zip(active[qi].tolist(), eg.tolist(), fv.tolist(), strict=True):
        if f > 0:
            out[q][g] += f
    return out


def _take_gpus(
    form: Formulation, flows: Mapping[int, np.ndarray], avail_pos: np.ndarray, demand: np.ndarray
) -> dict[int, np.ndarray]:
    """Concrete GPU positions per pool: server pools, then rack pools, then cluster pools.

    Every pool gets all its ``flows``: the maximum flow routed each (pool, type) count through
    the pool's node, within the free GPUs of each (server, type), (rack, type) and type, and the
    node sets are laminar, so what server pools take leaves each rack at least what its rack
    pools and the cluster pools routed through it need, and so on up.  A pool's GPUs are then
    ``demand[q]`` (its in-flow), and no check can fail here (``tests/test_decode_invariants.py``
    decodes random slot vectors to hold this)."""
    cl = form.instance.cluster
    nt = int(form.type_levels.shape[0])
    gt = form.gpu_type[avail_pos]
    srv = cl.server_of[avail_pos]
    # GPUs per (server, type) cell, in position order; a cursor per cell
    cell = srv * nt + gt
    order = np.lexsort((avail_pos, cell))
    cell_sorted = cell[order]
    pos_sorted = avail_pos[order]
    start = np.searchsorted(cell_sorted, np.arange(cl.num_servers * nt))
    end = np.searchsorted(cell_sorted, np.arange(cl.num_servers * nt), side="right")
    cursor = start.copy()
    left = (end - start).reshape(cl.num_servers, nt)
    pk, pn, pp, pv = form.pool_kind, form.pool_node, form.pool_profile, form.pool_level
    taken: dict[int, np.ndarray] = {}
    pools = sorted(flows, key=lambda q: (int(pk[q]), q))
    for q in pools:
        need = flows[q]
        compat = form.type_levels[:, pp[q]] <= pv[q]
        if pk[q] == KIND_X:
            servers = np.asarray([pn[q]])
        else:
            servers = np.arange(cl.num_servers) if pk[q] == KIND_Z else np.flatnonzero(cl.rack_of_server == pn[q])
            score = left[servers][:, compat].sum(axis=1)
            if pk[q] == KIND_Z and cl.racked:
                rscore = np.bincount(cl.rack_of_server[servers], weights=score, minlength=len(cl.rack_ids))
                key = np.lexsort((servers, -score, cl.rack_of_server[servers], -rscore[cl.rack_of_server[servers]]))
            else:
                key = np.lexsort((servers, -score))
            servers = servers[key]
        got: list[np.ndarray] = []
        for g in np.flatnonzero(need).tolist():
            k = int(need[g])
            for s in servers[left[servers, g] > 0].tolist():  # (servers with none add nothing)
                if k == 0:
                    break
                c = s * nt + g
                m = min(k, int(left[s, g]))
                if m:
                    got.append(pos_sorted[cursor[c] : cursor[c] + m])
                    cursor[c] += m
                    left[s, g] -= m
                    k -= m
        taken[q] = np.sort(np.concatenate(got)) if got else np.zeros(0, dtype=np.int64)
    return taken


def _split_pool(form: Formulation, q: int, pos: np.ndarray, jobs: Sequence[int]) -> dict[int, np.ndarray]:
    """Split a pool's GPUs among its jobs: largest demand first, best fit by server (then rack).

    The pool holds exactly its jobs' demands (:func:`_take_gpus`), so each job finds its GPUs:
    a rack is chosen only when it holds the job's demand, else every server of the pool is
    open, and they hold at least the demands still waiting."""
    cl = form.instance.cluster
    inst = form.instance
    srv = cl.server_of[pos]
    servers = list(dict.fromkeys(srv.tolist()))
    rank = {s: i for i, s in enumerate(servers)}
    avail: dict[int, list[int]] = {s: pos[srv == s].tolist() for s in servers}
    order = sorted(jobs, key=lambda j: (-inst.jobs[j].demand, j))
    out: dict[int, np.ndarray] = {}
    for j in order:
        d = inst.jobs[j].demand
        fits = [s for s in servers if len(avail[s]) >= d]
        if fits:
            s = min(fits, key=lambda s: (len(avail[s]), rank[s]))
            out[j] = np.asarray(avail[s][:d], dtype=np.int64)
            del avail[s][:d]
            continue
        pick = servers
        if cl.racked and form.pool_kind[q] == KIND_Z:
            rack_left: dict[int, int] = {}
            for s in servers:
                r = int(cl.rack_of_server[s])
                rack_left[r] = rack_left.get(r, 0) + len(avail[s])
            rfits = [r for r, n in rack_left.items() if n >= d]
            if rfits:
                r = min(rfits, key=lambda r: (rack_left[r], r))
                pick = [s for s in servers if int(cl.rack_of_server[s]) == r]
        got: list[int] = []
        for s in sorted(pick, key=lambda s: (-len(avail[s]), rank[s])):
            m = min(d - len(got), len(avail[s]))
            got.extend(avail[s][:m])
            del avail[s][:m]
            if len(got) == d:
                break
        out[j] = np.asarray(got, dtype=np.int64)
    return out


# --------------------------------------------------------------------------- encoding
def _lookups(
    form: Formulation,
) -> tuple[dict[tuple[int, int, int, int, int], int], dict[tuple[int, int], int], dict[int, int]]:
    hit = form._cache.get("lookups")
    if hit is None:
        kind = form.var_kind
        slots = np.flatnonzero(kind <= KIND_Z)
        prof = form.var_profile if form.var_profile is not None else np.full(kind.size, -1)
        slot = {
            (int(form.var_type[v]), int(prof[v]), int(kind[v]), int(form.var_level[v]), int(form.var_node[v])): int(v)
            for v in slots.tolist()
        }
        fl = np.flatnonzero(kind == KIND_FLOW)
        flow = {(int(form.var_pool[v]), int(form.var_gtype[v])): int(v) for v in fl.tolist()}
        keep = {int(form.var_job[v]): int(v) for v in np.flatnonzero(kind == KIND_KEEP).tolist()}
        hit = form._cache["lookups"] = (slot, flow, keep)
    return hit  # type: ignore[no-any-return]


def encode(form: Formulation, placements: Mapping[Any, Sequence[int]]) -> np.ndarray:
    """The program vector of a valid placement of the admitted jobs.

    Its objective ``form.objective(vector)`` equals the placement's round cost under
    :func:`pal_opt.cost.evaluate`.

    Raises
    ------
    InstanceError
        If the placement is not a valid placement of exactly the admitted jobs (a
        :class:`ValueError`, as before); :class:`~pal_opt.errors.InputTypeError` if it is not a
        mapping, or ``form`` not a :class:`Formulation`.
    """
    _require_form(form)
    if not isinstance(placements, Mapping):
        raise InputTypeError(f"must map job ids to GPU ids, got {type(placements).__name__}", path="placements")
    inst = form.instance
    cl = inst.cluster
    slot, flow, keep = _lookups(form)
    type_of = {j: t for t, jt in enumerate(form.types) for j in jt.jobs}
    x = np.zeros(form.num_vars, dtype=np.float64)
    want = {inst.jobs[j].id: j for j in form.admitted}
    left_out = set(want) - set(placements)
    if set(placements) - set(want) or any(want[jid] not in form.optional for jid in left_out):
        raise InstanceError("does not cover exactly the admitted jobs", path="placements")
    drop = {int(form.var_job[v]): int(v) for v in np.flatnonzero(form.var_kind == KIND_DROP).tolist()}
    for jid in left_out:
        x[drop[want[jid]]] = 1.0
    used = np.zeros(cl.num_gpus, dtype=bool)
    for jid, gids in placements.items():
        j = want[jid]
        job = inst.jobs[j]
        try:
            pos = cl.positions(gids)
        except KeyError as exc:
            raise InstanceError(f"unknown GPU {exc.args[0]!r}", path=f"placements.{jid}") from None
        if pos.size != job.demand or np.unique(pos).size != pos.size:
            raise InstanceError(f"needs {job.demand} distinct GPUs", path=f"placements.{jid}")
        if used[pos].any() or (form.gpu_type[pos] < 0).any():
            raise InstanceError("uses a GPU that is not free", path=f"placements.{jid}")
        used[pos] = True
        k = keep.get(j)
        if k is not None and keeps_placement(job, gids):
            x[k] = 1.0
            continue
        t = type_of[j]
        jt = form.types[t]
        p, lv = _lane_of(form, jt.profiles, pos)
        if p < 0:
            raise InstanceError("its GPUs are not all of one of its GPU type groups", path=f"placements.{jid}")
        level = cl.span_level_pos(pos)
        if level == Level.SERVER:
            node = int(cl.server_of[pos[0]])
        elif level == Level.RACK:
            node = int(cl.rack_of_server[cl.server_of[pos[0]]])
        else:
            node = -1
        v = slot.get((t, p, int(level), lv, node))
        if v is None:
            raise InstanceError(f"no slot variable for level {lv} at {Level(level).name.lower()} {node}",
                                path=f"placements.{jid}")
        x[v] += 1.0
        q = int(form.var_pool[v])
        for g in form.gpu_type[pos].tolist():
            x[flow[(q, g)]] += 1.0
    return x


def _lane_of(form: Formulation, profiles: tuple[int, ...], pos: np.ndarray) -> tuple[int, int]:
    """The first lane (by its profile) whose GPUs hold ``pos``, and the level of ``pos`` there;
    ``(-1, -1)`` if none does."""
    for p in profiles:
        lv = int(form.type_levels[form.gpu_type[pos], p].max())
        if lv < form.profiles[p].num_levels:
            return p, lv
    return -1, -1
