"""Rules of :mod:`pal_opt.ilp.leveldeal` that a mutation audit (eighteenth session) found unpinned
(``tests/test_backend_ties.py`` deals small classes only): each test fails on the one-rule
change its docstring names."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from pal_opt.ilp import leveldeal
from pal_opt.ilp.leveldeal import MAX_JOBS, deal_levels

ALL = (1.0, 1.1, 1.25)


def _valid(
    dealing: list[float], counts: list[int], held: dict[float, int], allowed: list[set[float]]
) -> bool:
    gpus: Counter[float] = Counter()
    for level, count in zip(dealing, counts, strict=True):
        gpus[level] += count
    return dict(gpus) == {k: v for k, v in held.items() if v} and all(
        x in a for x, a in zip(dealing, allowed, strict=True)
    )


def test_levels_that_do_not_hold_the_jobs_gpus_are_not_dealt() -> None:
    """``held`` is the jobs' GPUs per level: with a GPU too many nothing is dealt (without the
    check that the jobs fill the room exactly, the spare GPU was dealt around)."""
    assert list(deal_levels([1, 1], [None, None], {1.0: 2, 1.2: 1})) == []
    assert list(deal_levels([1, 1], [None, None], {1.0: 1, 1.2: 1})) == [[1.0, 1.2], [1.2, 1.0]]


def test_a_running_jobs_own_level_is_dealt_only_when_it_may_take_it() -> None:
    """Its own level first, but only among the levels it may take (it was given its own level
    whatever ``allowed`` said)."""
    dealt = list(deal_levels([1, 1], [1.2, None], {1.0: 1, 1.2: 1}, [{1.0}, {1.0, 1.2}]))
    assert dealt == [[1.0, 1.2]]
    assert next(deal_levels([1, 1], [1.2, None], {1.0: 1, 1.2: 1})) == [1.2, 1.0]


def test_a_class_of_max_jobs_is_dealt_and_one_more_is_not() -> None:
    assert next(deal_levels([1] * MAX_JOBS, [None] * MAX_JOBS, {1.0: MAX_JOBS})) == [1.0] * MAX_JOBS
    assert list(deal_levels([1] * (MAX_JOBS + 1), [None] * (MAX_JOBS + 1), {1.0: MAX_JOBS + 1})) == []


def test_the_budget_deals_every_way_of_a_class_of_ten() -> None:
    """Ten jobs of two GPUs over two levels of ten GPUs: all C(10, 5) = 252 dealings, each
    different and valid (a budget of 20 states gave fewer)."""
    dealt = list(deal_levels([2] * 10, [None] * 10, {1.0: 10, 1.2: 10}))
    assert len(dealt) == 252 and len({tuple(d) for d in dealt}) == 252
    assert all(_valid(d, [2] * 10, {1.0: 10, 1.2: 10}, [{1.0, 1.2}] * 10) for d in dealt)


def test_a_search_of_exactly_the_budget_finishes(monkeypatch: pytest.MonkeyPatch) -> None:
    """:data:`DEAL_STATES` is the most states explored: one that needs exactly that many (here
    4: jobs of 3, 2 and 2 GPUs over 4 + 3) finishes, one fewer does not (giving up at the
    budget itself dealt nothing)."""
    monkeypatch.setattr(leveldeal, "DEAL_STATES", 4)
    assert list(deal_levels([3, 2, 2], [None] * 3, {1.0: 4, 1.2: 3})) == [[1.2, 1.0, 1.0]]
    monkeypatch.setattr(leveldeal, "DEAL_STATES", 3)
    assert list(deal_levels([3, 2, 2], [None] * 3, {1.0: 4, 1.2: 3})) == []


#: A class of 40 jobs over three levels (found by a seeded search for the audit): the search,
#: memoised, finds its first 30 dealings within the budget; without the memo it ran out first.
COUNTS = [
    3,
    1,
    2,
    1,
    1,
    4,
    1,
    2,
    4,
    1,
    1,
    2,
    4,
    2,
    4,
    2,
    1,
    1,
    1,
    2,
    2,
    3,
    2,
    4,
    2,
    2,
    3,
    4,
    2,
    2,
    3,
    2,
    2,
    3,
    1,
    2,
    1,
    3,
    2,
    2,
]
OWN = {2: 1.25, 9: 1.1, 23: 1.25, 31: 1.25, 35: 1.0, 37: 1.25}
LIMITED = {
    6: {1.25},
    17: {1.0, 1.25},
    19: {1.1},
    25: {1.1},
    28: {1.0, 1.1},
    29: {1.0, 1.1},
    32: {1.25},
    33: {1.0, 1.1},
    34: {1.25},
    36: {1.1},
    37: {1.1, 1.25},
    39: {1.0},
}
HELD = {1.0: 4, 1.1: 33, 1.25: 50}


@pytest.mark.timeout(120)
def test_a_class_of_forty_jobs_is_dealt_within_the_budget() -> None:
    own = [OWN.get(i) for i in range(len(COUNTS))]
    allowed = [LIMITED.get(i, set(ALL)) for i in range(len(COUNTS))]
    dealt = list(itertools.islice(deal_levels(COUNTS, own, HELD, allowed), 30))
    assert len(dealt) == 30 and len({tuple(d) for d in dealt}) == 30
    assert all(_valid(d, COUNTS, HELD, allowed) for d in dealt)
