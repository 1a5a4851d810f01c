"""What the ``pal-opt`` command shows while a long solve runs: one live line on stderr.

:func:`live_line` installs a :class:`LiveLine` as the :mod:`pal_opt.progress` reporter for the
block it wraps, but only when stderr is a terminal (never in a pipe or a file, where it would
only be noise).  The line appears once the work has run :data:`SHOW_AFTER` seconds (fast solves
show nothing), is redrawn every :data:`REFRESH` seconds by a helper thread (so the elapsed time
moves even while the library reports nothing, e.g. while a program is built), and is erased
when the block ends, however it ends, before anything else is printed::

    solving (ilp, highs): 12.4 s, incumbent 566.6975, bound 566.1021, gap 0.017%

The line is drawn with tqdm, which fits it to the terminal's width and erases it cleanly;
:func:`status_bar` makes the other bars of the command the same way (:func:`simulation_bar`, ``pal-opt
simulate``'s, on a PAL or a Sia trace).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from . import progress

__all__ = ["LiveLine", "live_line", "status_bar", "simulation_bar", "show_simulation_progress", "is_terminal",
           "terminal_shape", "SHOW_AFTER", "REFRESH", "INTERRUPT_REQUESTED", "raise_if_interrupted"]

#: Set by the command line's SIGINT handler (in :mod:`pal_opt.cli`), the Ctrl-C
#: flag, besides raising ``KeyboardInterrupt``.  A long loop checks it at safe points
#: (:func:`raise_if_interrupted`), so a Ctrl-C that a library swallowed while it ran in C (a
#: solver's own callback, a worker thread) still stops the command at the next round.
INTERRUPT_REQUESTED = threading.Event()


def raise_if_interrupted() -> None:
    """Raise ``KeyboardInterrupt`` if a Ctrl-C arrived (:data:`INTERRUPT_REQUESTED`)."""
    if INTERRUPT_REQUESTED.is_set():
        raise KeyboardInterrupt

#: Seconds of work before the line appears.
SHOW_AFTER = 2.0
#: Seconds between two redraws.
REFRESH = 0.25


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is an open terminal."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def terminal_shape(stream: Any) -> tuple[int, int]:
    """Columns and rows tqdm may use on ``stream``: the terminal's size less one column, or 80 × 24
    when it reports none (a pseudo-terminal whose size was never set reports 0 × 0, on which tqdm
    would draw nothing at all)."""
    try:
        cols, rows = os.get_terminal_size(stream.fileno())
    except (AttributeError, ValueError, OSError):
        cols, rows = 0, 0
    return (cols - 1 if cols > 1 else 79), (rows if rows > 1 else 24)


def status_bar(**kwargs: Any) -> Any:
    """A tqdm bar on stderr that is drawn only when stderr is a terminal (``disable`` may turn it
    off too), fitted to its size (:func:`terminal_shape`)."""
    from tqdm import tqdm

    stream = kwargs.pop("file", None) or sys.stderr
    ncols, nrows = terminal_shape(stream)
    disable = bool(kwargs.pop("disable", False)) or not is_terminal(stream)
    return tqdm(file=stream, ncols=ncols, nrows=nrows, disable=disable, **kwargs)


def simulation_bar(policy: str, jobs: int, *, quiet: bool) -> Any:
    """The bar of ``pal-opt simulate``, on a PAL or a Sia trace alike: jobs finished of ``jobs``,
    elapsed time, ETA, and (:func:`show_simulation_progress`) rounds done and simulated time; a
    :func:`status_bar`, so drawn only on a terminal and without ``--quiet``."""
    fmt = "{desc}: {n_fmt}/{total_fmt} jobs finished |{bar}| {elapsed}, ETA {remaining}{postfix}"
    return status_bar(total=jobs, desc=f"simulate {policy}", bar_format=fmt, miniters=0, disable=quiet)


def show_simulation_progress(bar: Any, rounds: int, done: int, now: float, max_time: float | None = None) -> None:
    """Move a :func:`simulation_bar` to ``done`` jobs finished after ``rounds`` rounds, ``now``
    simulated seconds in (tqdm redraws at most every 0.1 s, finished jobs or not).  A run that
    stops at ``max_time`` simulated seconds says so (``12.0 h simulated of at most 720 h``): its
    ETA, reckoned in jobs, assumes every job finishes, which such a run may stop short of."""
    cap = f" of at most {max_time / 3600:g} h" if max_time is not None and math.isfinite(max_time) else ""
    bar.set_postfix_str(f"{rounds} rounds, {now / 3600:.1f} h simulated{cap}", refresh=False)
    bar.update(done - bar.n)


class LiveLine:
    """A :mod:`pal_opt.progress` reporter that keeps the latest fields and shows them on one line.

    Parameters
    ----------
    verb, what
        The line starts ``"<verb> (<what>, <backend>): "``, e.g. ``solving (ilp, highs): ``.
    stream
        Where the line is drawn (a terminal).
    delay, interval
        Seconds before the line appears, and between two redraws.
    """

    def __init__(self, verb: str, what: str, stream: TextIO, *, delay: float = SHOW_AFTER,
                 interval: float = REFRESH):
        self.verb = verb
        self.what = what
        self.stream = stream
        self.delay = delay
        self.interval = interval
        self.fields: dict[str, Any] = {}
        self.started = time.perf_counter()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar: Any = None

    def __call__(self, fields: dict[str, Any]) -> None:
        with self._lock:
            self.fields.update(fields)

    def text(self, elapsed: float) -> str:
        """The line for the fields reported so far, ``elapsed`` seconds into the work."""
        with self._lock:
            f = dict(self.fields)
        name = ", ".join(str(x) for x in (self.what, f.get("backend")) if x)
        parts = [f"{elapsed:.1f} s"]
        stage = f.get("stage")
        if stage and stage != "solving":
            parts.append(str(stage))
        for key in ("incumbent", "bound"):
            if f.get(key) is not None:
                parts.append(f"{key} {f[key]:.4f}")
        if f.get("gap") is not None:
            parts.append(f"gap {100 * f['gap']:.3f}%")
        if f.get("stopping"):
            parts.append("stopping (Ctrl-C)...")
        return f"{self.verb} ({name}): " + ", ".join(parts) if name else f"{self.verb}: " + ", ".join(parts)

    def draw(self) -> None:
        """Show the line now if the work has run long enough (from the helper thread)."""
        elapsed = time.perf_counter() - self.started
        if elapsed < self.delay:
            return
        text = self.text(elapsed)
        if self._bar is None:
            self._bar = status_bar(desc=text, bar_format="{desc}", file=self.stream, leave=False)
        else:
            self._bar.ncols = terminal_shape(self.stream)[0]  # follow the terminal's width
            self._bar.set_description_str(text)

    def start(self) -> None:
        """Start redrawing every :attr:`interval` seconds."""
        self._thread = threading.Thread(target=self._run, name="pal-opt-progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(self.interval):
            try:
                self.draw()
            except (OSError, ValueError):  # the terminal went away: stop drawing
                return

    def close(self) -> None:
        """Stop redrawing and erase the line."""
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        if self._bar is not None:
            try:
                self._bar.close()
            except (OSError, ValueError):  # pragma: no cover - the terminal went away
                pass
            self._bar = None


@contextmanager
def live_line(verb: str, what: str, *, enabled: bool = True, stream: TextIO | None = None) -> Iterator[LiveLine | None]:
    """Show the progress reported inside the block on one live line of ``stream`` (default
    stderr) when ``enabled`` and ``stream`` is a terminal; the line is erased when the block
    ends.  Yields the :class:`LiveLine`, or None when nothing is shown."""
    out = sys.stderr if stream is None else stream
    if not enabled or not is_terminal(out):
        yield None
        return
    line = LiveLine(verb, what, out)
    with progress.reporting(line):
        line.start()
        try:
            yield line
        finally:
            line.close()
