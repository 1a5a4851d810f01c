"""Factor levels given out again among jobs of one class (:mod:`pal_opt.ilp.canonical`).

A gang job's cost depends on its GPU count ``n`` and its *cap*, the slowest binned factor ``f``
of its class among its GPUs, through ``n * ln f`` (and its locality, which stays): jobs of one
class that trade caps so that as many GPUs as before are priced at each level cost the same in
total.  Two optima may differ only in that (a job of six GPUs on the faster level and six jobs
of one GPU on the slower, or the other way round), and every backend proves its own.
:func:`deal_levels` gives the levels out again from the jobs, the levels each may take and the
number of GPUs per level alone, in a fixed order: first a running job its own GPUs' level, then
every job in queue order the fastest level that leaves the rest dealable, each choice checked
by an exact search (can the remaining jobs fill the remaining GPUs per level exactly, each on a
level it may take?) with a budget of :data:`DEAL_STATES` states in all; the caller takes the
first dealing whose jobs it can place.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence

__all__ = ["deal_levels", "DEAL_STATES", "MAX_JOBS"]

#: The most states one call of :func:`deal_levels` explores in all before it gives up.
DEAL_STATES = 20_000
#: Classes of more jobs than this are not dealt (the search recurses once per job).
MAX_JOBS = 400

#: A job still to deal: its GPU count and the positions (in ``room``) of the levels it may take.
_Item = tuple[int, tuple[int, ...]]


class _OutOfStates(Exception):
    """The budget of :data:`DEAL_STATES` is spent."""


class _Filler:
    """Whether jobs fill the room per level exactly (every job on one level it may take, every
    level's GPUs used up): a search over the jobs largest first, memoised, with a budget.  Jobs
    of one GPU that may take any level fill whatever room the others leave."""

    def __init__(self, budget: int, levels: int) -> None:
        self.left = budget
        self.every = tuple(range(levels))
        self.memo: dict[tuple[tuple[_Item, ...], tuple[int, ...]], bool] = {}

    def fits(self, items: Sequence[_Item], room: Sequence[int]) -> bool:
        if sum(c for c, _ in items) != sum(room):
            return False
        hard = tuple(sorted((it for it in items if it[0] > 1 or it[1] != self.every), key=lambda it: (-it[0], it[1])))
        return self._fits(hard, tuple(room))

    def _fits(self, items: tuple[_Item, ...], room: tuple[int, ...]) -> bool:
        if not items:
            return True
        key = (items, room)
        if key in self.memo:
            return self.memo[key]
        self.left -= 1
        if self.left < 0:
            raise _OutOfStates
        count, may = items[0]
        ok = any(room[k] >= count and self._fits(items[1:], (*room[:k], room[k] - count, *room[k + 1:])) for k in may)
        self.memo[key] = ok
        return ok


def deal_levels(counts: Sequence[int], own: Sequence[float | None], held: Mapping[float, int],
                allowed: Sequence[Collection[float]] | None = None) -> Iterator[list[float]]:
    """The dealings of levels to jobs, the first first (module docstring), the same for every
    input with the same arguments.

    Parameters
    ----------
    counts
        Each job's GPU count, in queue order.
    own
        Each job's preferred level (a running job's own GPUs'), or None.
    held
        GPUs per level (``sum(counts)`` in all): what the jobs' levels must add up to.
    allowed
        Each job's levels it may take (default: every level of ``held``).

    Yields
    ------
    list
        Per job its level, ``held`` GPUs at each: the jobs with a level of their own ``own``
        dealt first, in queue order, then the others, each its own level first then the
        fastest; the next dealing changes the last job's level first.  Ends when every dealing
        was given, or once the budget ran out.

    Examples
    --------
    >>> next(deal_levels([1, 1, 2], [None, None, None], {1.0: 2, 1.2: 2}))
    [1.0, 1.0, 1.2]
    >>> list(deal_levels([2, 1, 1], [None, None, None], {1.0: 2, 1.2: 2}))
    [[1.0, 1.2, 1.2], [1.2, 1.0, 1.0]]
    >>> next(deal_levels([1, 1, 2], [None, 1.2, None], {1.0: 2, 1.2: 2}))
    [1.2, 1.2, 1.0]
    >>> list(deal_levels([2, 1, 1], [None, None, None], {1.0: 2, 1.2: 2}, [{1.2}, {1.0, 1.2}, {1.0, 1.2}]))
    [[1.2, 1.0, 1.0]]
    """
    levels = sorted(held)
    if len(counts) > MAX_JOBS:
        return
    room = [held[x] for x in levels]
    may = [tuple(k for k, x in enumerate(levels) if allowed is None or x in allowed[i]) for i in range(len(counts))]
    mine = [levels.index(x) if x is not None and x in held else None for x in own]
    order = [i for i in range(len(counts)) if mine[i] is not None] + [i for i in range(len(counts)) if mine[i] is None]
    filler = _Filler(DEAL_STATES, len(levels))
    out: list[int] = [0] * len(counts)

    def walk(depth: int) -> Iterator[list[float]]:
        if depth == len(order):
            yield [levels[k] for k in out]
            return
        i = order[depth]
        first = mine[i]
        for k in ([first] if first is not None else []) + [k for k in may[i] if k != first]:
            if k not in may[i] or room[k] < counts[i]:
                continue
            room[k] -= counts[i]
            if filler.fits([(counts[j], may[j]) for j in order[depth + 1:]], room):
                out[i] = k
                yield from walk(depth + 1)
            room[k] += counts[i]

    try:
        yield from walk(0)
    except _OutOfStates:
        return
