"""Decode's steps 4 and 5 (concrete GPUs per pool, then per job) cannot fail once the maximum
flow of step 3 has routed every GPU of the demand: :func:`pal_opt.ilp.decode.decode` has no guard
there (three that could never fire were removed), and these tests hold the reason.

Random integral slot vectors, with every job type given as many slots as it has jobs (so that
the count guard passes) but slots placed anywhere, on flat, racked and typed rounds: each is
either refused by the flow (``BackendError: solution is not placeable``) or decoded into a valid
placement of exactly the admitted jobs, each on its demand of distinct free GPUs of its usable
types, inside the node of a slot of its type.
"""

from __future__ import annotations

import numpy as np
import pytest

from pal_opt import generate_instance
from pal_opt.errors import BackendError
from pal_opt.generate import generate_typed_instance
from pal_opt.ilp import build_formulation, decode
from pal_opt.ilp.formulation import KIND_X, KIND_Y, KIND_Z, Formulation
from pal_opt.model import GpuState, Level, RoundInstance, usable_types


def _random_slots(form: Formulation, rng: np.random.Generator) -> np.ndarray:
    """A vector with each type's jobs dealt to random slot columns of the type, within bounds."""
    x = np.zeros(form.num_vars)
    slot = form.var_kind <= KIND_Z
    for t, jt in enumerate(form.types):
        cols = np.flatnonzero(slot & (form.var_type == t))
        for _ in range(len(jt.jobs)):
            room = cols[x[cols] < form.col_hi[cols]]
            x[rng.choice(room)] += 1.0
    return x


def _assert_valid(inst: RoundInstance, form: Formulation, got: dict[object, tuple[int, ...]]) -> None:
    cl = inst.cluster
    assert list(got) == [inst.jobs[j].id for j in form.admitted]  # exactly the admitted, in queue order
    seen: set[int] = set()
    for jid, gpus in got.items():
        job = inst.job_by_id[jid]
        assert len(gpus) == len(set(gpus)) == job.demand, (jid, gpus)
        assert not seen & set(gpus), (jid, gpus)
        seen |= set(gpus)
        pos = cl.positions(gpus)
        assert (cl.state[pos] == GpuState.FREE).all(), (jid, gpus)
        if cl.typed:
            assert set(cl.type_of[pos].tolist()) <= set(usable_types(cl, job)), (jid, gpus)


@pytest.mark.parametrize("make", [
    lambda seed: generate_instance(nodes=4, gpus_per_node=4, jobs=7, seed=seed, busy_fraction=0.2),
    lambda seed: generate_instance(nodes=6, gpus_per_node=4, jobs=9, racks=3, seed=seed, busy_fraction=0.2),
    lambda seed: generate_typed_instance("a:3x4,b:2x8", jobs=8, racks=2, seed=seed, busy_fraction=0.1),
], ids=["flat", "racked", "typed"])
def test_random_slot_vectors_decode_to_valid_placements_or_are_refused_by_the_flow(make: object) -> None:
    rng = np.random.default_rng(0)
    decoded = refused = 0
    for seed in range(6):
        inst = make(seed)  # type: ignore[operator]
        form = build_formulation(inst)
        if form.num_vars == 0 or not form.admitted:
            continue
        for _ in range(40):
            x = _random_slots(form, rng)
            try:
                got = decode(form, x)
            except BackendError as exc:
                assert "solution is not placeable" in str(exc), exc
                refused += 1
                continue
            _assert_valid(inst, form, got)
            decoded += 1
    assert decoded > 10 and refused > 0, (decoded, refused)  # both branches were exercised


def test_jobs_given_server_or_rack_slots_span_no_more() -> None:
    """A job of a server slot lies on one server and one of a rack slot within a rack: at least
    as many jobs span a server (a rack) as the vector has server slots (server and rack slots)."""
    inst = generate_instance(nodes=6, gpus_per_node=4, jobs=6, racks=3, seed=1)
    form = build_formulation(inst)
    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(60):
        x = _random_slots(form, rng)
        try:
            got = decode(form, x)
        except BackendError:
            continue
        span = [inst.cluster.span_level(g) for g in got.values()]
        on_servers = int(x[form.var_kind == KIND_X].sum())
        in_racks = on_servers + int(x[form.var_kind == KIND_Y].sum())
        assert sum(level == Level.SERVER for level in span) >= on_servers
        assert sum(level <= Level.RACK for level in span) >= in_racks
        checked += 1
    assert checked > 10


def test_no_two_running_jobs_share_a_gpu_so_kept_jobs_cannot_overlap() -> None:
    """Why decode has no check that two kept jobs overlap: keep columns exist only for running
    jobs, each kept on its own placement, and a round refuses two running jobs on one GPU."""
    from pal_opt.errors import InstanceError
    from pal_opt.model import Cluster, Job

    cl = Cluster.uniform(1, 2, {"classA": [1.0, 1.0]})
    with pytest.raises(InstanceError, match=r"jobs\[1\]\.placement: GPU 1 is also held by jobs\[0\]"):
        RoundInstance(cl, (Job("r", 2, "classA", placement=(0, 1)), Job("s", 1, "classA", placement=(1,))))
