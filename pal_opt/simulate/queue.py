"""Queue policies: the order in which a round offers the active jobs to the placement method.

As in Blox:

``fifo``
    First in, first out by submit time.
``las``
    Least attained service first: GPU-seconds the job has held GPUs so far (demand × seconds
    run), so a job that has waited keeps priority over one that has run.
``srtf``
    Shortest remaining time first: remaining iterations × seconds per iteration on a median
    GPU (the scheduler does not know a job's placement slowdown in advance).

Ties are broken by submit time, then by trace order, so every order is total and
deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import OptionError
from ..options import require_items

__all__ = ["QueueEntry", "QUEUE_POLICIES", "get_queue_policy", "order_queue"]


@dataclass(frozen=True)
class QueueEntry:
    """What a queue policy may look at for one active job.

    Attributes
    ----------
    index
        The job's position in the trace (tie-break of last resort).
    submit_time
        Arrival time (s).
    attained
        GPU-seconds held so far.
    remaining_seconds
        Remaining iterations × seconds per iteration on a median GPU.
    """

    index: int
    submit_time: float
    attained: float
    remaining_seconds: float


def _fifo(e: QueueEntry) -> tuple[float, ...]:
    return (e.submit_time, e.index)


def _las(e: QueueEntry) -> tuple[float, ...]:
    return (e.attained, e.submit_time, e.index)


def _srtf(e: QueueEntry) -> tuple[float, ...]:
    return (e.remaining_seconds, e.submit_time, e.index)


#: Queue policy name -> sort key.
QUEUE_POLICIES: dict[str, Callable[[QueueEntry], tuple[float, ...]]] = {
    "fifo": _fifo,
    "las": _las,
    "srtf": _srtf,
}


def get_queue_policy(name: str) -> Callable[[QueueEntry], tuple[float, ...]]:
    """The sort key of queue policy ``name`` (``fifo``, ``las`` or ``srtf``)."""
    key = QUEUE_POLICIES.get(name.lower()) if isinstance(name, str) else None
    if key is None:  # not a str: AttributeError 'lower' before
        raise OptionError(f"unknown queue policy {name!r}; choose one of {', '.join(QUEUE_POLICIES)}")
    return key


def order_queue(entries: Sequence[QueueEntry], policy: str = "fifo") -> list[int]:
    """Trace indices of ``entries`` in queue order.

    >>> es = [QueueEntry(0, 10.0, 500.0, 50.0), QueueEntry(1, 20.0, 0.0, 900.0), QueueEntry(2, 5.0, 100.0, 10.0)]
    >>> order_queue(es, "fifo"), order_queue(es, "las"), order_queue(es, "srtf")
    ([2, 0, 1], [1, 2, 0], [2, 0, 1])
    """
    key = get_queue_policy(policy)
    return [e.index for e in sorted(require_items(entries, "entries", "a list of QueueEntry", of=QueueEntry), key=key)]
