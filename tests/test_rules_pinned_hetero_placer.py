"""Rules of pal_opt/hetero/placer.py that no test held: each test here fails on a one-rule change (a mutation review, 2026-12-06) that the rest of the suite let pass."""

from __future__ import annotations

from pal_opt.hetero.placer import fit_shape


def test_a_shape_on_exactly_the_node_limit_is_kept() -> None:
    assert fit_shape((3, 1), 2) == (3, 1)
    assert fit_shape((1, 2, 1), 3) == (1, 2, 1)
