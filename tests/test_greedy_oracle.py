"""PAL and PM-First against the implementation they replaced (issue 15: greedy speed at 65,536 GPUs).

``tests/greedy_oracle.py`` is the code of ``pal_opt/policies/{base,pmfirst,pal}.py`` before the
rewrite, kept verbatim as an oracle.  On random small rounds -- servers of mixed sizes, laid out
as position blocks or interleaved, few factor levels with ties, busy GPUs, jobs of every size
with their own locality penalties (including penalties under which two cells of PAL's walk cost
the same) -- both must make the very same decisions: the same jobs, in the same order, on the
same GPUs in the same order.
"""

from __future__ import annotations

import greedy_oracle as oracle
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pal_opt.binning import binned_factors
from pal_opt.model import Cluster, GpuState, Job, RoundInstance, RoundParams
from pal_opt.policies import pal, pmfirst
from pal_opt.policies.base import FreeGpus

CLASSES = ("classA", "classB", "classC")


@st.composite
def rounds(draw: st.DrawFn) -> RoundInstance:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    sizes = rng.integers(1, draw(st.sampled_from([2, 5, 9])), int(rng.integers(1, 13)))
    servers = np.repeat(np.arange(sizes.size), sizes)
    layout = draw(st.sampled_from(["blocks", "interleaved", "reversed"]))
    if layout == "interleaved":
        servers = rng.permutation(servers)
    elif layout == "reversed":
        servers = servers[::-1].copy()
    g = servers.size
    levels = int(rng.integers(1, 6))
    pool = np.round(rng.uniform(0.9, 1.5, levels), 2)
    factors = {c: rng.choice(pool, g) for c in CLASSES}
    state = np.where(rng.random(g) < draw(st.sampled_from([0.0, 0.2, 0.5])), GpuState.BUSY, GpuState.FREE)
    # penalties on a coarse grid so that within and across cells of the walk can tie in price
    lams = [1.0, 1.1, 1.2, 1.25, 1.3, 1.5, 1.7, 2.0]
    jobs = []
    for i in range(int(rng.integers(1, 3 * sizes.size + 3))):
        d = int(rng.choice([1, 1, 2, 3, 4, int(rng.integers(1, g + 2))]))
        pw = float(rng.choice([1.0, 1.0, 1.1, 1.2]))
        pa = max(pw, float(rng.choice(lams)))
        jobs.append(Job(f"j{i}", d, str(rng.choice(CLASSES)), i, (pw, pa, pa)))
    binning = draw(st.sampled_from(["none", "pal-artifact"]))
    cluster = Cluster.from_arrays(np.arange(g), servers, factors, state)
    return RoundInstance(cluster, tuple(jobs), RoundParams(binning=binning))


def _factors(inst: RoundInstance) -> dict[str, np.ndarray]:
    return dict(binned_factors(inst.cluster, inst.params.binning))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds(), st.booleans())
def test_pal_same_decisions(inst: RoundInstance, backfill: bool) -> None:
    f = _factors(inst)
    new, old = pal.place(inst, f, backfill=backfill), oracle.pal_place(inst, f, backfill=backfill)
    assert list(new.placements.items()) == list(old.placements.items())
    assert (new.jobs_to_terminate, new.admission) == (old.jobs_to_terminate, old.admission)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds(), st.booleans())
def test_pmfirst_same_decisions(inst: RoundInstance, backfill: bool) -> None:
    f = _factors(inst)
    new, old = pmfirst.place(inst, f, backfill=backfill), oracle.pmfirst_place(inst, f, backfill=backfill)
    assert list(new.placements.items()) == list(old.placements.items())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds(), st.data())
def test_selections_on_the_same_free_gpus(inst: RoundInstance, data: st.DataObject) -> None:
    """Each choice on its own, for every class, demand and level bound, on one free set:
    PM-First with both groupings and PAL's within-server choice."""
    f = _factors(inst)
    free = inst.cluster.state == GpuState.FREE
    new, old = FreeGpus(inst.cluster, free, f), oracle.FreeGpus(inst.cluster, free, f)
    for c in CLASSES:
        levels = new.index[c].num_levels
        for d in range(1, 10):
            top = data.draw(st.sampled_from([None, *range(levels)]))
            for grouping in pmfirst.GROUPINGS:
                a = pmfirst.pmfirst_select(new, c, d, top, grouping)
                b = oracle.pmfirst_select(old, c, d, top, grouping)
                assert (a is None and b is None) or a.tolist() == b.tolist(), (c, d, top, grouping)
            lev = levels - 1 if top is None else top
            a = pal.within_select(new, c, d, lev)
            b = oracle.within_select(old, c, d, lev)
            assert (a is None and b is None) or a.tolist() == b.tolist(), (c, d, lev)
    # and after some GPUs are taken (the lazily refreshed per-server levels)
    taken = np.flatnonzero(free)[::3]
    if taken.size:
        new.take(taken)
        old.take(taken)
        for c in CLASSES:
            for d in range(2, 6):
                lev = new.index[c].num_levels - 1
                a, b = pal.within_select(new, c, d, lev), oracle.within_select(old, c, d, lev)
                assert (a is None and b is None) or a.tolist() == b.tolist(), (c, d)


def test_walk_first_cell_is_the_oracle_walk() -> None:
    """Ties in price (non-monotone walks) pick the first feasible cell as the old cell-by-cell walk."""
    rng = np.random.default_rng(3)
    for _ in range(300):
        f = np.round(rng.uniform(0.9, 1.3, 12), 1)
        cl = Cluster.from_arrays(np.arange(12), np.arange(12) // 4, {"classA": f})
        ci = oracle.class_index(cl, f)
        pw, pa = float(rng.choice([1.0, 1.1])), float(rng.choice([1.0, 1.1, 1.2, 1.21]))
        cells = pal.traversal_order(ci, pw, pa)
        walk = pal._Walk.build(cells, ci.num_levels)
        for lw in range(ci.num_levels + 1):
            for la in range(ci.num_levels + 1):
                want = next(((lev, w) for lev, w in cells if (w and lev >= lw) or (not w and lev >= la)), None)
                assert walk.first(lw, la) == want
