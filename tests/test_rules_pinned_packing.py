"""Rules of :mod:`pal_opt.ilp.packing` that a mutation audit (eighteenth session) found unpinned
(``tests/test_ilp_scale.py`` compares its placements with the packing greedy's as dicts, on
rounds whose locality penalty leaves no tie): each test fails on the one-rule change its
docstring names."""

from __future__ import annotations

from pal_opt.generate import generate_instance, generate_typed_instance
from pal_opt.ilp.formulation import build_formulation
from pal_opt.ilp.heuristic import packing_greedy
from pal_opt.ilp.packing import fast_packing, fast_packing_applies
from pal_opt.ilp.solve import prepare_round


def _setup(inst):  # type: ignore[no-untyped-def]
    return prepare_round(inst, None, "highs", None, None)


def test_fast_packing_is_for_flat_rounds_without_types() -> None:
    """A racked cluster is not flat (it was taken for one)."""
    assert fast_packing_applies(generate_instance(16, 4, 40, seed=3))
    assert not fast_packing_applies(generate_instance(16, 4, 40, racks=4, seed=3))
    assert not fast_packing_applies(generate_typed_instance("aws:3x4,rtx:3x4", 10, seed=1))


def test_without_a_locality_penalty_a_tie_goes_to_one_server_as_the_greedy_does() -> None:
    """With a locality penalty of 1 "in one server" and "anywhere" cost the same at one level:
    both greedies take the server (the fast one took "anywhere" on a tie)."""
    for seed in range(4):
        inst = generate_instance(12, 8, 40, busy_fraction=0.2, seed=seed, locality_penalty=1.0)
        setup = _setup(inst)
        form = build_formulation(inst, setup.admitted, factors=setup.factors)
        assert fast_packing(inst, setup.admitted, setup.factors) == packing_greedy(form), seed


def test_the_placement_is_in_queue_order_and_kept_jobs_keep_their_gpus_to_themselves() -> None:
    """The jobs come out in the order admitted (as the greedy gives them), and no job is placed
    on the GPUs of a kept one (they were left free to the others)."""
    inst = generate_instance(16, 4, 40, busy_fraction=0.1, seed=1)
    setup = _setup(inst)
    ids = [inst.jobs[i].id for i in setup.admitted]
    full = fast_packing(inst, setup.admitted, setup.factors)
    assert full is not None and list(full) == ids
    first = ids[0]
    kept = {first: full[first]}
    again = fast_packing(inst, setup.admitted, setup.factors, kept)
    assert again is not None and list(again) == ids and again[first] == full[first]
    used = [g for gpus in again.values() for g in gpus]
    assert len(used) == len(set(used))
