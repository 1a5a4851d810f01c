"""HiGHS on one program, as the child process runs it: load, run, read the answer.

:func:`load_model` and :func:`answer_of` are shared with the in-process path of
:class:`~.highs.HighsBackend`; :func:`child_main` is what a child forked by :mod:`.highs_server`
runs (the protocol is in :mod:`.highs_child`).
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Answer", "load_model", "answer_of", "child_main", "FORWARD_SECONDS"]

#: The child forwards HiGHS's progress callbacks at most this often (seconds).
FORWARD_SECONDS = 0.1


@dataclass
class Answer:
    """What a HiGHS run ended with, in plain Python (picklable): read in-process from the
    ``Highs`` object (:func:`answer_of`) or sent back by a child."""

    status: str  #: ``HighsModelStatus`` member name, or ``"crashed"``
    message: str
    values: np.ndarray | None
    dual_bound: float | None
    info: dict[str, Any] = field(default_factory=dict)


def load_model(h: Any, arrays: dict[str, Any], start: np.ndarray | None, integer: bool) -> None:
    """Pass the program in ``arrays`` (see :meth:`~.highs.HighsBackend._translate`) to ``h`` as a
    column-wise ``HighsLp``; with ``integer``, its integrality too, and ``start`` (full vector) as
    the first incumbent."""
    import highspy

    lp = highspy.HighsLp()
    lp.num_col_ = int(arrays["n"])
    lp.num_row_ = int(arrays["m"])
    lp.col_cost_ = arrays["c"]
    lp.col_lower_ = arrays["lo"]
    lp.col_upper_ = arrays["hi"]
    lp.row_lower_ = arrays["rlo"]
    lp.row_upper_ = arrays["rhi"]
    lp.offset_ = float(arrays["off"])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_ = int(arrays["n"])
    lp.a_matrix_.num_row_ = int(arrays["m"])
    lp.a_matrix_.start_ = arrays["indptr"]
    lp.a_matrix_.index_ = arrays["indices"]
    lp.a_matrix_.value_ = arrays["data"]
    if integer:
        kinds = (highspy.HighsVarType.kContinuous, highspy.HighsVarType.kInteger)
        lp.integrality_ = [kinds[flag] for flag in arrays["integer"].tolist()]
    h.passModel(lp)
    if integer and start is not None:
        sol = highspy.HighsSolution()
        sol.col_value = np.asarray(start, dtype=np.float64).tolist()
        sol.value_valid = True
        h.setSolution(sol)


def answer_of(h: Any) -> Answer:
    """The :class:`Answer` of the ``Highs`` object ``h`` after ``run()``."""
    import highspy

    ms = h.getModelStatus()
    info = h.getInfo()
    has_sol = info.primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible
    values = np.asarray(h.getSolution().col_value, dtype=np.float64) if has_sol else None
    bound = float(info.mip_dual_bound)
    return Answer(ms.name, h.modelStatusToString(ms), values, bound if math.isfinite(bound) else None,
                  {"nodes": int(info.mip_node_count), "simplex_iterations": int(info.simplex_iteration_count)})


def child_main(conn: Any) -> None:
    """A child forked by the server (:mod:`.highs_server`, which has told pal-opt its pid): read
    the program, build, run, answer, and leave at once (``os._exit``: HiGHS's worker threads are never torn down by
    the interpreter's exit)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to act on
    import highspy

    _, arrays, start, settings, forward, crash_for_test = conn.recv()
    if crash_for_test:  # a stand-in for HiGHS's crash, for the tests of the recovery
        os.kill(os.getpid(), signal.SIGSEGV)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    for key, value in settings.items():
        h.setOptionValue(key, value)
    load_model(h, arrays, start, integer=True)
    h.HandleUserInterrupt = True  # cancelSolve() is acted on
    send_lock = threading.Lock()
    if forward:
        _forward_progress(h, conn, send_lock)
    threading.Thread(target=_listen, args=(h, conn), daemon=True).start()
    h.run()
    answer = answer_of(h)
    with send_lock:
        conn.send(("done", answer))
    os._exit(0)


def _forward_progress(h: Any, conn: Any, send_lock: threading.Lock) -> None:
    """Subscribe to HiGHS's MIP callbacks and send ``("found", incumbent, bound)`` to the parent,
    at most every :data:`FORWARD_SECONDS`."""
    last = [0.0]

    def send(incumbent: float | None, bound: float | None, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - last[0] >= FORWARD_SECONDS:
            last[0] = now
            with send_lock:
                conn.send(("found", incumbent, bound))

    h.cbMipInterrupt.subscribe(lambda e: send(e.data_out.mip_primal_bound, e.data_out.mip_dual_bound))
    h.cbMipImprovingSolution.subscribe(lambda e: send(e.data_out.objective_function_value, None, True))


def _listen(h: Any, conn: Any) -> None:
    """Act on the parent's ``"cancel"``; a parent gone (end of file) cancels too."""
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            h.cancelSolve()
            return
        if message == "cancel":
            h.cancelSolve()


