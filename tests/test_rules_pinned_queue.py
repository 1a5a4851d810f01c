"""Rules of pal_opt/simulate/queue.py that no test held (mutation review round 5, 2026-12-06):
the tie-breaks of the queue policies and the policy's name, each test failing on a one-rule
change of queue.py that the rest of the suite let pass."""

from __future__ import annotations

from pal_opt.simulate.queue import QueueEntry, order_queue


def test_las_and_srtf_break_ties_by_submit_time_before_trace_order() -> None:
    """Equal attained service (las) or equal remaining time (srtf): the job submitted first goes
    first, whatever its trace position (Q2, Q3 dropped the submit-time tie-break and went by
    trace order)."""
    es = [QueueEntry(0, 30.0, 100.0, 50.0), QueueEntry(1, 10.0, 100.0, 50.0), QueueEntry(2, 20.0, 0.0, 900.0)]
    assert order_queue(es, "las") == [2, 1, 0]
    assert order_queue(es, "srtf") == [1, 0, 2]


def test_the_queue_policy_name_is_case_insensitive() -> None:
    """``--queue FIFO`` is ``fifo`` (Q4 refused it as an unknown policy)."""
    es = [QueueEntry(0, 10.0, 500.0, 50.0), QueueEntry(1, 20.0, 0.0, 900.0), QueueEntry(2, 5.0, 100.0, 10.0)]
    assert order_queue(es, "FIFO") == order_queue(es, "fifo") == [2, 0, 1]
    assert order_queue(es, "Las") == [1, 2, 0]


def test_fifo_breaks_a_submit_time_tie_by_trace_index_not_by_the_order_given():
    """Entries given out of trace order: equal submit times go by ``index`` (a key of submit time
    alone kept the order given, as the sort is stable)."""
    es = [QueueEntry(3, 5.0, 0.0, 1.0), QueueEntry(1, 5.0, 0.0, 1.0), QueueEntry(2, 1.0, 0.0, 1.0)]
    assert order_queue(es, "fifo") == [2, 1, 3]


def test_the_default_queue_policy_is_fifo():
    es = [QueueEntry(0, 10.0, 500.0, 50.0), QueueEntry(1, 20.0, 0.0, 900.0), QueueEntry(2, 5.0, 100.0, 10.0)]
    assert order_queue(es) == order_queue(es, "fifo") == [2, 0, 1]
