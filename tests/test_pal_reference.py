"""PAL and PM-First against the plain, brute-force reference of ``tests/pal_reference.py``.

The package's policies keep counts between jobs and read the walk from suffix minima
(``pal_opt/policies/{base,pmfirst,pal}.py``); the reference recomputes every choice from the
rules, with ``sorted`` and ``itertools.combinations``.  On random small rounds -- flat and racked
clusters, servers of mixed sizes laid out as position blocks, interleaved or reversed, two to
four classes with few factor levels and ties, busy and failed GPUs, jobs of every size with
their own locality penalties (on a grid where within and across cells of the walk can cost the
same), binned or not, with and without backfill -- both must make the very same decisions: the
same jobs, in the same order, on the same GPUs in the same order.
"""

from __future__ import annotations

import numpy as np
import pal_reference as ref
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pal_opt.admission import pal_order
from pal_opt.binning import binned_factors
from pal_opt.model import Cluster, GpuState, Job, RoundInstance, RoundParams
from pal_opt.policies import pal, pmfirst

CLASSES = ("classA", "classB", "classC", "classD")
STATES = (GpuState.FREE, GpuState.BUSY, GpuState.FAILED)


@st.composite
def rounds(draw: st.DrawFn) -> RoundInstance:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    sizes = rng.integers(1, draw(st.sampled_from([3, 5, 9])), int(rng.integers(1, 9)))
    servers = np.repeat(np.arange(sizes.size), sizes)
    layout = draw(st.sampled_from(["blocks", "interleaved", "reversed"]))
    if layout == "interleaved":
        servers = rng.permutation(servers)
    elif layout == "reversed":
        servers = servers[::-1].copy()
    g = servers.size
    classes = CLASSES[: draw(st.integers(2, 4))]
    pool = np.round(rng.uniform(0.9, 1.5, int(rng.integers(1, 6))), 2)
    factors = {c: rng.choice(pool, g) for c in classes}
    busy = draw(st.sampled_from([0.0, 0.2, 0.5]))
    state = np.array([STATES[k] for k in rng.choice(3, g, p=[1 - busy, busy * 0.8, busy * 0.2])])
    racks = None
    if draw(st.booleans()):  # racked: servers in racks of 1-3 (PAL's walk must not care)
        racks = {int(s): int(s) // int(rng.integers(1, 4)) for s in range(sizes.size)}
    lams = [1.0, 1.1, 1.2, 1.25, 1.3, 1.5, 1.7, 2.0]
    jobs = []
    for i in range(int(rng.integers(1, 3 * sizes.size + 3))):
        d = int(rng.choice([1, 1, 2, 3, 4, 6, int(rng.integers(1, g + 2))]))
        pw = float(rng.choice([1.0, 1.0, 1.1, 1.2]))
        pr = max(pw, float(rng.choice(lams)))
        pa = max(pr, float(rng.choice(lams)))
        jobs.append(Job(f"j{i}", d, str(rng.choice(classes)), i, (pw, pr, pa)))
    binning = draw(st.sampled_from(["none", "pal-artifact"]))
    cluster = Cluster.from_arrays(np.arange(100, 100 + g), servers, factors, state, racks)
    return RoundInstance(cluster, tuple(jobs), RoundParams(binning=binning))


def _factors(inst: RoundInstance) -> dict[str, np.ndarray]:
    return dict(binned_factors(inst.cluster, inst.params.binning))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds(), st.booleans())
def test_pal_matches_reference(inst: RoundInstance, backfill: bool) -> None:
    f = _factors(inst)
    got = pal.place(inst, f, backfill=backfill).placements
    want = ref.place(inst, f, "pal", backfill=backfill)
    assert list(got.items()) == list(want.items())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds(), st.booleans(), st.sampled_from(pmfirst.GROUPINGS))
def test_pmfirst_matches_reference(inst: RoundInstance, backfill: bool, grouping: str) -> None:
    f = _factors(inst)
    got = pmfirst.place_sequence(inst, f, pal_order(inst), backfill=backfill, grouping=grouping)
    want = ref.place(inst, f, "pmfirst", grouping=grouping, backfill=backfill)
    assert list(got.items()) == list(want.items())


def test_reference_on_a_hand_checked_round() -> None:
    """Pins the reference itself: two 4-GPU servers, each with two GPUs at 1.0 and two at 1.2, and
    a 3-GPU job.  No server has three GPUs at 1.0, so at λ = 1.7 the walk's (1.2, within) cell,
    priced 1.2, comes before (1.0, across) at 1.7: GPUs 0, 1, 2.  At λ = 1.1 (1.0, across) at 1.1
    comes first: PM-First on the four 1.0 GPUs, groups of two, in GPU order: 0, 1, 4."""
    f = {"classA": [1.0, 1.0, 1.2, 1.2, 1.0, 1.0, 1.2, 1.2]}
    c = Cluster.uniform(2, 4, f)
    for lam, want in ((1.7, (0, 1, 2)), (1.1, (0, 1, 4))):
        inst = RoundInstance(c, (Job("a", 3, "classA", 0, (1.0, lam, lam)),))
        assert ref.place(inst, c.factors, "pal") == {"a": want}
        assert pal.place(inst, c.factors).placements == {"a": want}
