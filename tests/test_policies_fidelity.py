"""PAL and PM-First against the eight rounds computed by the PAL authors' own code.

Each ``../shared/reference/pal/*.json`` holds a round's inputs and the artifact's outputs
(binned factors, placements, placement order) for ``placement/pal.py`` and
``placement/pmfirst.py``.  We check the placed job set, the placement order, every job's
slowdown (max binned factor × locality penalty), the binned factors, and that every job gets
the very same GPU set.  Skips when ``../shared`` is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pal_opt.admission import pal_order
from pal_opt.binning import binned_factors
from pal_opt.cost import job_slowdown
from pal_opt.model import Cluster, GpuState, Job, RoundInstance, RoundParams, pal_locality
from pal_opt.policies import get_policy
from pal_opt.policies import pal as pal_module
from pal_opt.policies import pmfirst as pmfirst_module

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
REFERENCE = SHARED / "reference" / "pal"
FILES = sorted(REFERENCE.glob("*.json")) if REFERENCE.is_dir() else []
POLICIES = ("pal", "pmfirst")

pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared data not available at {SHARED}")


def load(path: Path) -> tuple[dict, RoundInstance]:
    """A reference file and the round it describes."""
    doc = json.loads(path.read_text())
    nodes, per = int(doc["nodes"]), int(doc["gpus_per_node"])
    state = np.full(nodes * per, GpuState.FREE, dtype=np.int8)
    state[np.asarray(doc["busy_gpus"], dtype=np.int64)] = GpuState.BUSY
    cluster = Cluster.uniform(nodes, per, doc["perfvar"], state)
    lam = float(doc["locality_penalty"])
    jobs = tuple(
        Job(j["id"], int(j["num_gpus"]), j["perfclass"], k, pal_locality(lam), model=j.get("model"))
        for k, j in enumerate(doc["jobs"])
    )
    return doc, RoundInstance(cluster, jobs, RoundParams(locality_penalty=lam), name=path.stem)


def _norm(placements: dict) -> dict[str, list[int]]:
    return {str(k): [int(g) for g in v] for k, v in placements.items()}


@pytest.fixture(scope="module", params=FILES, ids=[p.stem for p in FILES])
def reference(request: pytest.FixtureRequest) -> tuple[dict, RoundInstance, dict]:
    doc, inst = load(request.param)
    factors = binned_factors(inst.cluster)
    return doc, inst, factors


def test_reference_files_present() -> None:
    assert len(FILES) == 8, f"expected eight reference rounds in {REFERENCE}, found {len(FILES)}"


@pytest.mark.parametrize("policy", POLICIES)
def test_binned_factors_match(reference: tuple, policy: str) -> None:
    doc, inst, factors = reference
    for cls, ref in doc["expected"][policy]["slowdown_factors"].items():
        ours = factors[cls]
        ref_arr = np.asarray(ref, dtype=np.float64)
        assert ours.shape == ref_arr.shape
        np.testing.assert_allclose(ours, ref_arr, rtol=0, atol=1e-9, err_msg=f"{doc['name']} {cls}")


@pytest.mark.parametrize("policy", POLICIES)
def test_same_jobs_order_and_slowdowns(reference: tuple, policy: str) -> None:
    doc, inst, factors = reference
    exp = doc["expected"][policy]
    out = get_policy(policy)(inst, factors)
    got = _norm(out.placements)
    want = _norm(exp["placements"])
    assert set(got) == set(want), f"{doc['name']}: placed jobs differ"
    assert list(got) == [str(j) for j in exp["placement_order"]], f"{doc['name']}: placement order differs"
    ref_factors = {c: np.asarray(v, dtype=np.float64) for c, v in exp["slowdown_factors"].items()}
    by_id = {str(j.id): j for j in inst.jobs}
    for jid, gpus in want.items():
        job = by_id[jid]
        assert len(got[jid]) == job.demand
        ours = job_slowdown(inst, factors, job, tuple(got[jid]))
        theirs = job_slowdown(inst, ref_factors, job, tuple(gpus))
        assert ours == pytest.approx(theirs, abs=1e-9), f"{doc['name']} job {jid}"


@pytest.mark.parametrize("policy", POLICIES)
def test_identical_gpu_sets(reference: tuple, policy: str) -> None:
    """Every job gets exactly the artifact's GPUs (and in the artifact's order)."""
    doc, inst, factors = reference
    got = _norm(get_policy(policy)(inst, factors).placements)
    want = _norm(doc["expected"][policy]["placements"])
    same_set = [j for j in want if sorted(got.get(j, [])) == sorted(want[j])]
    assert len(same_set) == len(want), (
        f"{doc['name']} {policy}: {len(same_set)}/{len(want)} identical GPU sets; "
        f"differ: {sorted(set(want) - set(same_set))}"
    )
    assert got == want


def test_fidelity_summary(capsys: pytest.CaptureFixture[str]) -> None:
    """Share of jobs with the artifact's exact GPU set, per file and policy (printed with -s)."""
    lines = []
    total = {p: [0, 0] for p in POLICIES}
    for path in FILES:
        doc, inst = load(path)
        factors = binned_factors(inst.cluster)
        row = [f"{path.stem:14s}"]
        for p in POLICIES:
            got = _norm(get_policy(p)(inst, factors).placements)
            want = _norm(doc["expected"][p]["placements"])
            same = sum(sorted(got.get(j, [])) == sorted(g) for j, g in want.items())
            total[p][0] += same
            total[p][1] += len(want)
            row.append(f"{p} {same}/{len(want)}")
        lines.append("  ".join(row))
    with capsys.disabled():
        print("\nidentical GPU sets per reference round:\n" + "\n".join(lines))
    for p, (same, n) in total.items():
        assert n > 0 and same == n, f"{p}: {same}/{n} identical GPU sets"


@pytest.mark.parametrize("module", [pal_module, pmfirst_module], ids=["pal", "pmfirst"])
def test_place_sequence_on_pal_order_is_the_policy(reference: tuple, module) -> None:  # type: ignore[no-untyped-def]
    doc, inst, factors = reference
    seq = module.place_sequence(inst, factors, pal_order(inst))
    assert seq == module.place(inst, factors).placements


def test_server_grouping_is_not_the_reference() -> None:
    """PM-First grouped per server only (one revision of the artifact) misses the references.

    Documents why both policies group per (factor, server)."""
    hits = n = 0
    for path in FILES:
        doc, inst = load(path)
        factors = binned_factors(inst.cluster)
        got = _norm(pmfirst_module.place_sequence(inst, factors, pal_order(inst), grouping="server"))
        want = _norm(doc["expected"]["pmfirst"]["placements"])
        hits += sum(sorted(got.get(j, [])) == sorted(g) for j, g in want.items())
        n += len(want)
    assert hits < n / 2
