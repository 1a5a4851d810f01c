"""The synthetic round generator: variability statistics, job mix, cluster state, determinism."""

from __future__ import annotations

import glob
from collections import Counter

import numpy as np
import pytest

from pal_opt.errors import OptionError
from pal_opt.generate import (
    SIA_PHILLY_MIX,
    SYNTHETIC_VARIABILITY,
    generate_instance,
    sample_jobs,
    synthetic_factors,
)
from pal_opt.io import instance_to_dict, longhorn_paths
from pal_opt.model import MODEL_CLASS, GpuState


def _band_top(c: str) -> float:
    v = SYNTHETIC_VARIABILITY[c]
    return (1 + v.spread) / (1 + v.spread * 0.5**v.skew) + 1e-4


def _spreads(f: dict[str, np.ndarray]) -> dict[str, float]:
    out = {}
    for c, v in f.items():
        inside = v[v <= _band_top(c)]
        out[c] = float((inside.max() - inside.min()) / np.median(v))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_variability_matches_published_figures(seed):
    f = synthetic_factors(2048, seed)
    sp = _spreads(f)
    assert 0.06 <= np.mean(list(sp.values())) <= 0.10  # about 8% on average
    assert max(sp.values()) <= 0.22  # up to 22% outside outliers
    assert sp["classA"] > 0.15
    assert sp["classD"] < sp["classA"] / 5  # PageRank-like: nearly flat
    assert sp["classD"] < sp["classB"] < sp["classA"]
    for c, v in f.items():
        assert np.median(v) == pytest.approx(1.0, abs=0.01)
        assert v.max() <= 1.5 + 1e-9 and v.min() > 0.8
        assert (v > _band_top(c)).mean() < 0.02  # outliers are rare


def test_outliers_reach_towards_1_5_on_a_large_cluster():
    f = synthetic_factors(16384, 7)
    assert 1.35 < f["classA"].max() <= 1.5
    assert f["classD"].max() < 1.02


def test_classes_are_correlated_but_not_identical():
    f = synthetic_factors(4096, 3, decimals=None)
    r = np.corrcoef(f["classA"], f["classB"])[0, 1]
    assert 0.2 < r < 0.95
    assert not np.array_equal(f["classB"], f["classC"])


def test_job_sizes_and_models_follow_the_mix():
    jobs = sample_jobs(20000, 11)
    sizes = Counter(j.demand for j in jobs)
    assert set(sizes) <= {k[0] for k in SIA_PHILLY_MIX}
    assert min(sizes) >= 1 and max(sizes) <= 48
    total = sum(SIA_PHILLY_MIX.values())
    for (d, m), n in SIA_PHILLY_MIX.items():
        got = sum(1 for j in jobs if j.demand == d and j.model == m) / len(jobs)
        assert got == pytest.approx(n / total, abs=0.01), (d, m)
    assert all(MODEL_CLASS[j.model] == j.perfclass for j in jobs)
    assert [j.id for j in jobs[:5]] == [0, 1, 2, 3, 4]


def test_mix_constants_match_the_traces(shared_dir):
    import pandas as pd

    files = sorted(glob.glob(str(shared_dir / "data/pal-artifact/traces/workload-*.csv")))
    assert len(files) == 6
    d = pd.concat([pd.read_csv(f) for f in files])
    counted = Counter(zip(d["num_gpus"].astype(int), d["model"], strict=True))
    assert dict(counted) == SIA_PHILLY_MIX


def test_jobs_fit_a_small_cluster():
    inst = generate_instance(2, 4, 200, seed=3)
    assert max(j.demand for j in inst.jobs) <= 8
    inst = generate_instance(2, 4, 50, seed=3, failed_fraction=0.5)
    assert max(j.demand for j in inst.jobs) <= 4


def test_deterministic_for_a_seed():
    kw = dict(racks=2, busy_fraction=0.2, failed_fraction=0.05, running_fraction=0.4)
    a = instance_to_dict(generate_instance(8, 4, 30, seed=9, **kw))
    b = instance_to_dict(generate_instance(8, 4, 30, seed=9, **kw))
    c = instance_to_dict(generate_instance(8, 4, 30, seed=10, **kw))
    assert a == b
    assert a != c


def test_cluster_state_and_running_jobs():
    inst = generate_instance(16, 8, 60, seed=4, busy_fraction=0.25, failed_fraction=0.05, running_fraction=0.5)
    cl = inst.cluster
    g = cl.num_gpus
    assert int((cl.state == GpuState.FAILED).sum()) == round(0.05 * g)
    assert int((cl.state == GpuState.BUSY).sum()) == round(0.25 * g)
    held: set[int] = set()
    running = [j for j in inst.jobs if j.placement is not None]
    assert running
    for j in running:
        assert len(j.placement) == j.demand == len(set(j.placement))
        assert not held & set(j.placement)
        held |= set(j.placement)
        assert (cl.state[cl.positions(j.placement)] == GpuState.FREE).all()
        # packed: single server when some server could hold it at the time (at least when small)
        if j.demand == 1:
            assert cl.span_level(j.placement) == 0


def test_racks_are_contiguous_and_balanced():
    inst = generate_instance(10, 2, 5, racks=4, seed=0)
    cl = inst.cluster
    assert cl.rack_ids == ("r0", "r1", "r2", "r3")
    sizes = np.bincount(cl.rack_of_server)
    assert sizes.max() - sizes.min() <= 1
    assert (np.diff(cl.rack_of_server) >= 0).all()


def test_generation_from_measurements(shared_dir):
    paths = longhorn_paths(shared_dir / "data/pal-artifact/variability/longhorn")
    inst = generate_instance(16, 4, 10, seed=1, measurements=paths)
    f = inst.cluster.factors
    assert sorted(f) == ["classA", "classB", "classC", "classD"]
    assert np.array_equal(f["classB"], f["classC"])


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(nodes=0, gpus_per_node=4, jobs=1),
        dict(nodes=2, gpus_per_node=4, jobs=-1),
        dict(nodes=2, gpus_per_node=4, jobs=1, racks=3),
        dict(nodes=2, gpus_per_node=4, jobs=1, busy_fraction=1.5),
        dict(nodes=2, gpus_per_node=4, jobs=1, busy_fraction=0.6, failed_fraction=0.6),
        dict(nodes=2, gpus_per_node=4, jobs=1, locality_penalty=0.5),
        dict(nodes=2, gpus_per_node=4, jobs=1, locality_penalty=float("nan")),
        dict(nodes=2, gpus_per_node=4, jobs=1, binning="kmeans"),
        dict(nodes=2, gpus_per_node=4, jobs=1, restart_cost=-1.0),
    ],
)
def test_bad_options(kwargs):
    with pytest.raises(OptionError):
        generate_instance(**kwargs)
