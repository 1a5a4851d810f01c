"""Rules of pal_opt/hetero/placer.py that no test held: each test here fails on a one-rule change (a mutation review, 2026-12-06) that the rest of the suite let pass."""

from __future__ import annotations

import pytest

from pal_opt.errors import OptionError
from pal_opt.hetero.placer import fit_shape, place_type


def test_a_shape_on_exactly_the_node_limit_is_kept() -> None:
    assert fit_shape((3, 1), 2) == (3, 1)
    assert fit_shape((1, 2, 1), 3) == (1, 2, 1)


def test_a_whole_node_is_looked_for_on_every_node_before_the_rest() -> None:
    """The whole-node pass visits all N nodes from the pointer, so with no node free whole the
    pointer is back on node 0 and the rest starts there: 3 GPUs of node 0, then 1 of node 1.
    Visiting N − 1 nodes left the pointer on node 1 and took [1, 1, 1, 0]."""
    assert place_type(2, 4, [4], free=[3, 3]) == [[0, 0, 0, 1]]


def test_free_must_give_one_count_per_node() -> None:
    """``free`` of another length than ``num_nodes`` is refused, not read as a type of that many
    nodes (which placed 1 GPU on a third node of a two-node type)."""
    for free in ([4, 4, 4], [4]):
        with pytest.raises(OptionError, match=r"free must give 0\.\.4 GPUs for each of 2 nodes"):
            place_type(2, 4, [1], free=free)
