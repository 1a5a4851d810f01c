"""CBC through PuLP (``PULP_CBC_CMD``, the CBC binary bundled with PuLP).

Translation: one PuLP variable per column (names kept), one constraint per row (equalities,
``≤`` or ``≥``; a ranged row becomes two).  The objective constant is kept out of the PuLP
model and added back by pal-opt, so the figures CBC prints are ``c·x`` alone.

Options: ``preprocess on`` (see :data:`CBC_OPTIONS`); ``time_limit`` → ``-sec`` with
``timeMode elapsed`` (CBC counts CPU seconds by default); gap → ``gapAbs`` (``allow``; ``1e-9`` to
prove optimality) with ``gapRel = 0``; ``threads`` → ``threads`` when above 1.  CBC's
single-threaded search is deterministic.  Warm start: every variable's ``setInitialValue``, written
by PuLP as a MIP start file (``-mips``).  ``backend_params`` are CBC command-line options placed
after pal-opt's own (``{"maxNodes": 100}`` → ``-maxNodes 100``).  CBC takes any option silently
and only prints that it did not understand one, so each is first tried on a CBC that reads it and
quits (a few milliseconds, remembered): "No match for", "illegal", "valid range" or "Possible
options" in its answer is a rejection.

The process is pal-opt's own: PuLP builds the model, writes the MPS and MIP-start files and reads
CBC's solution file, but pal-opt starts the bundled CBC binary itself (:func:`_run_cbc`), so that

* the time limit is a wall-clock deadline: CBC does not check ``-sec`` while it reads the model,
  solves the root LP or preprocesses, so past ``1.05 × limit + 0.25 s`` it is sent SIGINT
  (it stops and writes its incumbent) and, 0.5 s later, killed;
* a Ctrl-C does the same, and the ``KeyboardInterrupt`` goes on as
  :class:`~.base.BackendInterrupted` carrying whatever CBC wrote;
* the CBC process does not outlive the call, and its files live in a private temporary
  directory that is removed however the call ends.  A SIGTERM while CBC runs (``timeout``,
  ``kill``, a pod stopping) kills CBC, removes the directory and then ends pal-opt by SIGTERM,
  as its default action would have (:class:`~pal_opt.sigint.SigtermNoted`; main thread only, and
  only when nobody installed a handler).  In a worker of pal-opt's process pool (a partitioned
  solve) a SIGTERM at any point of a solve kills the worker's CBC and removes its directories
  first (:func:`_clean_up`, :func:`pal_opt.sigint.clean_up_on_sigterm`).  Only pal-opt being
  killed outright (SIGKILL) leaves CBC
  running (until its time limit, or until it finishes when there is none) and the directory
  behind; the next CBC solve on the machine removes the directories of dead processes
  (:func:`_workdir`).

Progress (:meth:`CbcBackend._observe`, only when someone listens): the waiting loop reads the
lines CBC has added to its log (:class:`_LogProgress`) and reports the incumbents ("Integer
solution of", "best solution") and bounds ("Continuous objective value", "best possible") they
name.  CBC writes its log through C stdio, which holds a file's output back in 4 KiB blocks
(nothing at all appears during a 10 s run), so CBC is then started under coreutils' ``stdbuf
-oL`` (line-buffered output; the same process, pid and signals); without a working ``stdbuf``
(macOS has none) only the elapsed time is reported.

PuLP reports no bound, so CBC's log is written to that directory and read: ``Lower bound:``
when the search stopped early (printed with few digits, so one unit of its last printed digit
is subtracted), else the objective minus the allowed gap.  Each solve starts one CBC process,
which costs tens of milliseconds.  Translation time includes writing the MPS file.

LP relaxation (:meth:`CbcBackend.relaxation_bound`, which lets :func:`pal_opt.ilp.solve_ilp`
stop before the search when the start placement is already within the requested gap): the bound
comes from CLP, the LP solver inside the same CBC binary.  The relaxation is written as MPS
without integrality by pal-opt's own writer (:mod:`pal_opt.ilp.mpswriter`: whole-array
operations, every number exact; no PuLP model, which takes a second or two on 2,048-GPU rounds)
and solved with ``-dualsimplex`` (0.5 s there; the primal simplex 0.8 s), then ``-solution``
writes the status and the objective, which is read back lowered by one unit of its last printed
digit and by :data:`RELAXATION_SAFETY` relative.  The process is run like the search's
(:func:`_run_cbc`: wall-clock deadline, SIGINT then kill, Ctrl-C, private temporary directory);
None unless CLP says "Optimal".  On round programs with GPU types :func:`pal_opt.ilp.solve.solve_ilp`
has HiGHS solve the LP instead (CLP took 2.2-2.8 s there, HiGHS 0.4-0.6 s;
:data:`pal_opt.ilp.solve.PROGRAM_LP_OWN_MAX_ENTRIES`).
"""

from __future__ import annotations

import functools
import logging
import math
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ...deadline import Deadline
from ...errors import BackendError
from ...sigint import SigintDeferred, SigtermNoted, at_sigterm, sigterm_clean_up_held
from ..mpswriter import write_lp_mps
from ..program import Program
from .base import (
    POLL_SECONDS,
    Backend,
    BackendAbandoned,
    BackendInterrupted,
    Readout,
    RelaxationState,
    SolveOptions,
    SolverStatus,
    SolverWatch,
    is_second_press,
    poll_progress,
)

#: PuLP 3 warns that ``PULP_CBC_CMD`` and a directly built ``LpVariable`` go in PuLP 4.0 (which no
#: longer bundles the CBC binary this backend runs); ``pyproject.toml`` keeps PuLP below 4, so the
#: warnings name nothing a user can act on, and under ``-W error::DeprecationWarning`` they made
#: CBC look "not available".
_PULP_4_NOTICE = r".*PuLP 4\.0"


@contextmanager
def _pulp_4_notices_off() -> Iterator[None]:
    """PuLP's notices of its 4.0 changes (:data:`_PULP_4_NOTICE`) not shown inside the block."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_PULP_4_NOTICE, category=DeprecationWarning)
        yield


def _cbc_cmd(**kwargs: Any) -> Any:
    """``pulp.PULP_CBC_CMD(**kwargs)`` (the bundled CBC binary's command) without PuLP's notice."""
    import pulp

    with _pulp_4_notices_off():
        return pulp.PULP_CBC_CMD(**kwargs)

_log = logging.getLogger(__name__)
__all__ = ["CbcBackend"]

OPTIMALITY_ABS_GAP = 1e-9
#: Relative amount CLP's LP optimum is lowered by before it is used as a bound (its feasibility
#: tolerances are 1e-7; see :data:`pal_opt.ilp.backends.cpsat.RELAXATION_SAFETY`).
RELAXATION_SAFETY = 1e-7
#: Seconds per matrix entry and column to write the LP relaxation's MPS file (measured: 0.13 s
#: for 110,000 on a busy core).
LP_WRITE_SECONDS_PER_ENTRY = 3e-6
_LP_SOLUTION = re.compile(r"^(\w[\w ]*?) - objective value (\S+)")
#: Extra CBC options.  ``preprocess on`` keeps CBC's preprocessing but without its default SOS
#: detection: with SOS rows CBC 2.10.3 can return a "solution" whose integer variables are
#: fractional (seen on the type rows ``Σ slots = n_t`` after a MIP start).
CBC_OPTIONS: tuple[str, ...] = ("preprocess on",)
_LOWER = re.compile(r"^Lower bound:\s+(\S+)", re.M)
_VERSION = re.compile(r"Version:\s*(\S+)")
#: Log lines naming an incumbent and/or a bound (:class:`_LogProgress`), in CBC's objective units.
_PROGRESS_LINES: tuple[tuple[re.Pattern[str], str | None, str | None], ...] = tuple(
    (re.compile(pattern), incumbent, bound) for pattern, incumbent, bound in (
        (r"Continuous objective value is (?P<b>\S+)", None, "b"),
        (r"MIPStart provided solution with cost (?P<i>\S+)", "i", None),
        (r"Integer solution of (?P<i>\S+) found", "i", None),
        (r"At root node, .* to (?P<b>\S+) in \d+ passes", None, "b"),
        (r"(?P<i>\S+) best solution, best possible (?P<b>\S+)", "i", "b"),
        (r"best objective (?P<i>\S+) \(best possible (?P<b>[^)\s]+)", "i", "b"),
        (r"Search completed - best objective (?P<i>\S+),", "i", None),
    )
)
#: CBC's "no solution" objective (1e+50) and anything as large is not a figure.
_NOT_A_FIGURE = 1e40
#: What CBC prints for an option it does not take.
_REJECTED = re.compile(r"No match for|Multiple matches for|is illegal for|valid range is|Possible options for")
#: Answers of the trial CBCs (:func:`_rejection`) kept, per CBC binary, option and value, the most
#: recently used.  They were all kept: a scheduler passing a new value every round (a seed:
#: ``{"randomCbcSeed": round}``) kept one more answer per round for the life of its process.
PARAM_CHECKS_KEPT = 256


#: The CBC process is stopped from outside when it runs past ``DEADLINE_FACTOR × time limit +
#: DEADLINE_GRACE`` seconds: CBC's ``-sec`` is not checked while it reads the model, solves the
#: root LP or preprocesses, so a short limit can otherwise be overrun by seconds.
DEADLINE_FACTOR = 1.05
DEADLINE_GRACE = 0.25
#: Seconds CBC is given to act on SIGINT (stop and write its incumbent) before it is killed.
#: CBC acts on SIGINT during branch-and-bound; before that it ignores it.
KILL_GRACE = 0.5


#: Signals of which a process dies by its own fault: a CBC that dies of one is run once more.
CRASH_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT})


def _signal_name(number: int) -> str:
    """``SIGSEGV`` for 11."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass
class _CbcRun:
    returncode: int
    interrupted: bool  # a Ctrl-C reached pal-opt while CBC ran
    stopped_by: str | None  # None, "sigint" (CBC stopped and wrote what it had) or "kill"
    crashes: int = 0  # runs before this one that died of a signal pal-opt did not send

    @property
    def stopped_by_us(self) -> bool:
        return self.stopped_by is not None

    def crashed(self, sol_path: str) -> bool:
        """Whether CBC crashed (:data:`CRASH_SIGNALS`; not a SIGINT or SIGTERM from outside, such
        as a terminal's Ctrl-C that a solve outside the main thread does not see), leaving no
        solution file, while pal-opt had not stopped it."""
        return (-self.returncode in CRASH_SIGNALS and not self.stopped_by_us and not self.interrupted
                and not os.path.exists(sol_path))

    def describe(self, cbc_result: str) -> str:
        why = "Ctrl-C" if self.interrupted else "the time limit"
        if self.stopped_by == "kill":
            return f"CBC stopped from outside at {why} before it had a solution to write"
        if self.stopped_by == "sigint":
            return f"{cbc_result} (CBC stopped from outside at {why})"
        return cbc_result


class _ExitWaiter:
    """``wait(seconds) -> exited``, returning as soon as CBC exits.

    On Linux a pidfd makes the wait exact (``poll`` wakes when the process ends), so a 20 ms CBC
    run costs 20 ms; elsewhere ``Popen.wait(timeout)`` polls.  The wait is in short slices
    either way, so that a Ctrl-C (a Python-level signal, run between slices) is acted on
    whichever thread the kernel delivered SIGINT to.  :meth:`close` releases the pidfd.
    """

    def __init__(self, proc: subprocess.Popen[bytes]):
        self.proc = proc
        self.fd: int | None = None
        self.poller: Any = None
        if hasattr(os, "pidfd_open") and hasattr(select, "poll"):
            try:
                self.fd = os.pidfd_open(proc.pid)
            except OSError:  # pragma: no cover - kernels before 5.3, or the process is gone
                self.fd = None
        if self.fd is not None:
            self.poller = select.poll()  # not select(): it fails on descriptors >= 1024
            self.poller.register(self.fd, select.POLLIN)

    def __call__(self, seconds: float) -> bool:
        if self.proc.returncode is not None:
            return True
        if self.poller is None:  # pragma: no cover - not Linux
            try:
                self.proc.wait(timeout=max(seconds, 0.0))
                return True
            except subprocess.TimeoutExpired:
                return False
        if self.poller.poll(max(int(seconds * 1000), 0)):
            self.proc.wait()
            return True
        return False

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


#: The CBC processes running and the solve directories alive in this process (for
#: :func:`_clean_up`, the SIGTERM of a pool worker).
_RUNNING: set[subprocess.Popen[bytes]] = set()
_DIRS: set[str] = set()


def _start_cbc(args: list[str], log_fh: Any) -> subprocess.Popen[bytes]:
    """The CBC process, writing to ``log_fh``; in a process group of its own when this process
    ignores SIGINT (see :func:`_run_cbc`)."""
    own_group = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    with sigterm_clean_up_held():
        proc = subprocess.Popen(args, stdout=log_fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                process_group=0 if own_group else None)
        _RUNNING.add(proc)
    return proc


def _remove_dir(path: str) -> None:
    """Remove one solve's directory (:func:`_workdir`)."""
    shutil.rmtree(path, ignore_errors=True)
    _DIRS.discard(path)


def _clean_up() -> None:
    """A pool worker's SIGTERM (:func:`pal_opt.sigint.clean_up_on_sigterm`): kill the CBCs this
    process runs and remove its solve directories, wherever in a solve it was."""
    for proc in list(_RUNNING):
        if proc.poll() is None:
            proc.kill()
            try:  # with a timeout: a wait without one takes a lock that the interrupted code may hold
                proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
    for path in list(_DIRS):
        _remove_dir(path)


at_sigterm(_clean_up)


def _run_cbc(args: list[str], log_path: str, time_limit: float | None) -> _CbcRun:
    """Run CBC, owning the process: it does not outlive this call.

    A Ctrl-C (``KeyboardInterrupt``) or the wall-clock deadline (see :data:`DEADLINE_FACTOR`)
    sends CBC SIGINT, after which CBC stops and writes its incumbent; if it has not exited
    :data:`KILL_GRACE` seconds later it is killed.  A second Ctrl-C kills it at once and raises
    :class:`~.base.BackendAbandoned`.  CBC runs in the caller's process group, so a terminal's
    Ctrl-C reaches it too; but when this process ignores SIGINT (started under ``nohup`` or
    ``trap '' INT``: see :mod:`pal_opt.cli`), CBC gets a process group of its own, since it
    installs a SIGINT handler of its own once its search starts and would otherwise stop early
    at a Ctrl-C that pal-opt ignores.
    """
    t0 = time.monotonic()
    deadline = math.inf if time_limit is None else t0 + DEADLINE_FACTOR * time_limit + DEADLINE_GRACE
    interrupted = False
    first_press = math.inf
    sigint_at = math.inf
    stopped_by: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    wait: _ExitWaiter | None = None

    def signal_cbc(how: str) -> None:
        nonlocal stopped_by, sigint_at
        assert proc is not None
        if proc.poll() is not None:  # already exited by itself: nothing was stopped
            return
        if how == "sigint":
            proc.send_signal(signal.SIGINT)
            sigint_at = time.monotonic()
        else:
            proc.kill()
        stopped_by = how

    with open(log_path, "w", encoding="utf-8") as log_fh, SigtermNoted() as term:
        try:
            while True:
                try:
                    if proc is None:
                        # Popen waits for the child's exec in Python code, where a KeyboardInterrupt would
                        # leave an unreachable CBC running: a Ctrl-C is re-raised once ``proc`` is set
                        with SigintDeferred():
                            proc = _start_cbc(args, log_fh)
                    if wait is None:  # here, not above: the deferred Ctrl-C is raised as Popen returns
                        wait = _ExitWaiter(proc)
                    if interrupted and stopped_by is None:  # here, inside the try: a Ctrl-C during it is caught
                        signal_cbc("sigint")
                    next_event = {None: deadline, "sigint": sigint_at + KILL_GRACE}.get(stopped_by, math.inf)
                    if wait(min(POLL_SECONDS, next_event - time.monotonic())) or term.pending:
                        break  # CBC exited; or SIGTERM: CBC is killed below, then this process dies of it
                    poll_progress(interrupted)
                    now = time.monotonic()
                    if stopped_by is None and now >= deadline:
                        signal_cbc("sigint")
                    elif stopped_by == "sigint" and now >= sigint_at + KILL_GRACE:
                        signal_cbc("kill")
                except KeyboardInterrupt:
                    if proc is None:  # CBC never started: nothing to stop
                        raise
                    if interrupted:
                        if is_second_press(first_press):
                            raise BackendAbandoned() from None
                        continue
                    interrupted, first_press = True, time.monotonic()
        finally:
            if proc is not None:
                if proc.poll() is None:
                    proc.kill()
                    stopped_by = "kill"
                proc.wait()
                _RUNNING.discard(proc)
            if wait is not None:
                wait.close()
    if term.pending:
        # the caller's clean-up will not run: remove CBC's private directory (the log's; see
        # _workdir) before dying as SIGTERM's default action would have
        _remove_dir(os.path.dirname(log_path))
        term.die()
    assert proc is not None and proc.returncode is not None
    return _CbcRun(proc.returncode, interrupted, stopped_by)


def _with_time_limit(args: list[str], seconds: float | None) -> list[str]:
    """``args`` with CBC's ``-sec`` set to ``seconds`` (unchanged when None)."""
    if seconds is None:
        return args
    out = list(args)
    for i, arg in enumerate(out[:-1]):
        if arg == "-sec":
            out[i + 1] = repr(float(seconds))
    return out


@functools.cache
def _line_buffering() -> str | None:
    """coreutils' ``stdbuf`` if it is installed and works (it needs its preload library), else
    None; asked once per process."""
    stdbuf = shutil.which("stdbuf")
    if stdbuf is None:
        return None
    try:
        ok = subprocess.run([stdbuf, "-oL", "true"], capture_output=True, timeout=10,
                            stdin=subprocess.DEVNULL).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return stdbuf if ok else None


class _LogProgress:
    """Reads the lines CBC added to its log since the last call and tells ``watch`` the
    incumbents and bounds they name (``offset`` added: CBC's objective lacks the program's
    constant).  Only whole lines are read; a file that cannot be read is skipped."""

    def __init__(self, path: str, watch: SolverWatch, offset: float):
        self.path = path
        self.watch = watch
        self.offset = offset
        self.pos = 0

    def __call__(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.pos)
                chunk = fh.read()
        except OSError:
            return
        end = chunk.rfind(b"\n")
        if end < 0:
            return
        self.pos += end + 1
        for line in chunk[:end].decode("utf-8", errors="replace").splitlines():
            for pattern, inc, bound in _PROGRESS_LINES:
                m = pattern.search(line)
                if m:
                    self.watch.found(self._figure(m, inc), self._figure(m, bound))

    def _figure(self, match: re.Match[str], group: str | None) -> float | None:
        if group is None:
            return None
        try:
            x = float(match.group(group))
        except ValueError:
            return None
        return x + self.offset if abs(x) < _NOT_A_FIGURE else None


def _lp_optimum(sol_path: str, run: _CbcRun, offset: float) -> float | None:
    """The objective in CLP's solution file (first line ``Optimal - objective value X``) plus
    ``offset``, lowered as :meth:`CbcBackend.relaxation_bound` says; None unless CLP exited by
    itself and says "Optimal"."""
    if run.returncode != 0 or run.stopped_by_us or not os.path.exists(sol_path):
        return None
    with open(sol_path, encoding="utf-8", errors="replace") as fh:
        m = _LP_SOLUTION.match(fh.readline().strip())
    if m is None or m.group(1) != "Optimal":
        return None
    try:
        obj = _conservative(m.group(2)) + offset
    except ValueError:
        return None
    return obj - RELAXATION_SAFETY * max(1.0, abs(obj)) if math.isfinite(obj) else None


def _conservative(text: str) -> float:
    """A printed number lowered by one unit of its last printed digit."""
    x = float(text)
    mant = text.lower().split("e")[0]
    if "." in mant:
        step = 10.0 ** -(len(mant.split(".")[1]))
    else:
        step = 1.0
    if "e" in text.lower():
        step *= 10.0 ** int(text.lower().split("e")[1])
    return x - step


@dataclass
class _CbcModel:
    """The PuLP model, its variables, and once configured the CBC command line and its files."""

    prob: Any
    xs: list[Any]
    has_start: bool
    workdir: str | None = None
    args: list[str] = field(default_factory=list)
    gap: float = OPTIMALITY_ABS_GAP
    cmd: Any = None
    mps: tuple[Any, ...] = ()
    sol: str = ""
    log_path: str = ""
    log: str = ""
    line_buffered: bool = False  # start CBC under ``stdbuf -oL`` (progress is read from its log)



#: The CBC files of one solve go to ``<tmp>/pal_opt_cbc_<ns>-<pid>_<kind>_<random>``: the process
#: id (and its PID namespace, on Linux) lets a later solve remove what a killed process left
#: (SIGTERM ends pal-opt at once, before its ``finally`` clauses; a large round's MPS file is
#: megabytes).  Only directories of the same PID namespace of the same running kernel are judged:
#: a container sharing ``/tmp`` sees other pids, and so does another machine sharing a scratch
#: ``TMPDIR`` (the host's namespace has the same inode on every machine; the boot id tells them
#: apart).
_WORKDIR = re.compile(r"pal_opt_cbc_(\d+)-(\d+)_")


def _pid_namespace() -> int | None:
    """This process's PID namespace on this boot of this machine, as one number, or None."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            boot = int(fh.read().strip().replace("-", "")[:12], 16)
        return boot * (1 << 32) + os.stat("/proc/self/ns/pid").st_ino
    except (OSError, ValueError):
        return None


def _workdir(kind: str) -> str:
    """A private directory for one solve's files, after removing those of dead processes."""
    ns = _pid_namespace()
    if ns is None:  # no way to tell a dead process from one in another namespace: nothing removed
        prefix = f"pal_opt_cbc_{kind}_"
    else:
        _remove_orphans(ns)
        prefix = f"pal_opt_cbc_{ns}-{os.getpid()}_{kind}_"
    with sigterm_clean_up_held():
        path = tempfile.mkdtemp(prefix=prefix)
        _DIRS.add(path)
    return path


@functools.cache
def _remove_orphans(ns: int) -> None:
    """Remove the CBC directories of this PID namespace's processes that no longer run (once per
    process and namespace)."""
    root = tempfile.gettempdir()
    try:
        names = [n for n in os.listdir(root) if n.startswith("pal_opt_cbc_")]
    except OSError:
        return
    for name in names:
        m = _WORKDIR.match(name)
        if m is None or int(m.group(1)) != ns or int(m.group(2)) == os.getpid():
            continue
        try:
            os.kill(int(m.group(2)), 0)
        except ProcessLookupError:  # no such process: its directory is an orphan
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        except (OverflowError, OSError):  # alive under another user (PermissionError), or not a pid
            continue


@functools.lru_cache(maxsize=PARAM_CHECKS_KEPT)
def _rejection(cbc: str, option: tuple[str, ...]) -> str | None:
    """What the CBC binary ``cbc`` prints against ``option`` (a key and maybe its value), tried on a
    CBC that reads it and quits; None if it takes it.  Remembered (the last
    :data:`PARAM_CHECKS_KEPT`); an error running CBC is raised and not remembered."""
    out = subprocess.run([cbc, *option, "-quit"], capture_output=True, text=True, timeout=30,
                         stdin=subprocess.DEVNULL).stdout
    bad = [ln.strip() for ln in out.splitlines() if _REJECTED.search(ln)]
    return "; ".join(bad) or None


class CbcBackend(Backend):
    """CBC via PuLP."""

    name: ClassVar[str] = "cbc"
    lp_solver: ClassVar[str] = "CLP"
    requires: ClassVar[tuple[str, ...]] = ("pulp",)
    supports_warm_start: ClassVar[bool] = True
    supports_relaxation: ClassVar[bool] = True

    @classmethod
    def _probe(cls) -> None:
        super()._probe()

        if not _cbc_cmd(msg=False).available():
            raise ImportError("PuLP is installed but its CBC binary cannot be run")

    @classmethod
    def _solver_version(cls) -> str:
        import pulp

        cbc = "?"
        try:
            out = subprocess.run(
                [_cbc_cmd(msg=False).path, "-quit"],
                capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
            ).stdout
            m = _VERSION.search(out)
            if m:
                cbc = m.group(1)
        except (OSError, subprocess.SubprocessError):
            pass
        return f"{cbc} (PuLP {pulp.__version__})"

    def relaxation_bound(self, program: Program, options: SolveOptions,
                         state: RelaxationState | None = None) -> float | None:
        """The LP relaxation's optimum by CLP (module docstring), lowered by one unit of its last
        printed digit and by :data:`RELAXATION_SAFETY` relative.  None if CLP did not prove it
        optimal (in time); with a deadline, :class:`~pal_opt.errors.TimeLimitReached` when there
        is no time to write and start it; :class:`~.base.BackendInterrupted` (without a
        solution) on Ctrl-C.  ``state`` only records that the LP started cold (each call is a
        fresh CBC process; nothing is kept between rounds)."""

        if state is not None:
            state.last = "cold: CLP runs in a fresh CBC process every round"
        if options.deadline is not None:
            need = 0.05 + LP_WRITE_SECONDS_PER_ENTRY * (program.A.nnz + program.num_vars)
            Deadline(options.deadline).check("writing the LP relaxation for CLP", need=need)
        workdir = _workdir("lp")
        try:
            mps, sol, log = (os.path.join(workdir, n) for n in ("relaxation.mps", "relaxation.sol", "clp.log"))
            write_lp_mps(program, mps)
            options = self._fit_to_deadline(options, "solving the LP relaxation")
            args = [_cbc_cmd(msg=False).path, mps]
            if options.time_limit is not None:
                args += ["-timeMode", "elapsed", "-sec", repr(float(options.time_limit))]
            args += ["-dualsimplex", "-solution", sol]
            with self._watched(None, program, "solving the LP relaxation (CLP)", observe=False):
                run = _run_cbc(args, log, options.time_limit)
            if run.interrupted:
                raise BackendInterrupted(None)
            return _lp_optimum(sol, run, program.obj_offset)
        finally:
            _remove_dir(workdir)

    def _translate(self, program: Program, start: np.ndarray | None) -> _CbcModel:
        import pulp

        prob = pulp.LpProblem("pal_opt_round", pulp.LpMinimize)
        lo = [None if math.isinf(v) else float(v) for v in program.col_lo.tolist()]
        hi = [None if math.isinf(v) else float(v) for v in program.col_hi.tolist()]
        cats = [pulp.LpInteger if f else pulp.LpContinuous for f in program.integrality.tolist()]
        with _pulp_4_notices_off():  # one notice per variable otherwise
            xs = [pulp.LpVariable(nm, lowBound=a, upBound=b, cat=ct)
                  for nm, a, b, ct in zip(program.var_names, lo, hi, cats, strict=True)]
        c = program.c.tolist()
        prob.setObjective(pulp.LpAffineExpression([(xs[i], c[i]) for i in np.flatnonzero(program.c).tolist()]))
        A = program.A
        ind, val, ptr = A.indices.tolist(), A.data.tolist(), A.indptr.tolist()
        rlo, rhi = program.row_lo.tolist(), program.row_hi.tolist()
        for i, name in enumerate(program.row_names):
            expr = pulp.LpAffineExpression([(xs[j], a) for j, a in zip(ind[ptr[i] : ptr[i + 1]], val[ptr[i] : ptr[i + 1]], strict=True)])
            a, b = rlo[i], rhi[i]
            if a == b:
                prob.addConstraint(pulp.LpConstraint(expr, pulp.LpConstraintEQ, rhs=b), name)
                continue
            if not math.isinf(b):
                prob.addConstraint(pulp.LpConstraint(expr, pulp.LpConstraintLE, rhs=b), name if math.isinf(a) else name + "_hi")
            if not math.isinf(a):
                prob.addConstraint(pulp.LpConstraint(expr, pulp.LpConstraintGE, rhs=a), name if math.isinf(b) else name + "_lo")
        if start is not None:
            for x, v in zip(xs, np.asarray(start, dtype=np.float64).tolist(), strict=True):
                x.setInitialValue(round(v) if x.cat == pulp.LpInteger else v)
        model = _CbcModel(prob, xs, start is not None)
        try:
            self._write_files(model)
        except BaseException:
            self._release(model)
            raise
        return model

    @staticmethod
    def _write_files(model: _CbcModel) -> None:
        """The MPS (and MIP start) file, written to a private directory (part of translating, so
        that a deadline's time limit is fitted once they are written)."""

        model.workdir = workdir = _workdir("mip")
        mps, mst, model.sol, model.log_path = (os.path.join(workdir, n) for n in ("round.mps", "start.mst", "round.sol", "cbc.log"))
        model.mps = vs, var_names, con_names, _ = model.prob.writeMPS(mps, rename=1)
        model.args = [mps]
        if model.has_start:
            _cbc_cmd(msg=False).writesol(mst, model.prob, vs, var_names, con_names)
            model.args += ["-mips", mst]

    def solver_time_limit(self, seconds_left: float) -> float:
        """CBC is stopped from outside at :data:`DEADLINE_FACTOR` × limit + :data:`DEADLINE_GRACE`
        and killed :data:`KILL_GRACE` later: the limit that ends all that in ``seconds_left``."""
        return (seconds_left - DEADLINE_GRACE - KILL_GRACE - 0.1) / DEADLINE_FACTOR

    def _configure(self, model: _CbcModel, program: Program, options: SolveOptions) -> None:
        """The CBC command line (the files are written by :meth:`_translate`)."""

        model.gap = float(options.abs_gap) if options.abs_gap > 0 else OPTIMALITY_ABS_GAP
        kwargs: dict[str, Any] = dict(msg=False, gapRel=0, gapAbs=model.gap, warmStart=model.has_start,
                                      options=list(CBC_OPTIONS))
        if options.time_limit is not None:
            kwargs["timeMode"] = "elapsed"
        if options.threads is not None and options.threads > 1:
            kwargs["threads"] = int(options.threads)
        model.cmd = cmd = _cbc_cmd(**kwargs)
        model.args = [cmd.path, *model.args]
        if options.time_limit is not None:
            model.args += ["-sec", repr(float(options.time_limit))]
        for opt in [*cmd.options, *cmd.getOptions()]:
            model.args += ("-" + opt).split()

    def _param_model(self) -> _CbcModel:

        return _CbcModel(None, [], False, cmd=_cbc_cmd(msg=False))

    def _set_param(self, model: _CbcModel, key: str, value: Any) -> None:
        option = (f"-{key}",) if value is None else (f"-{key}", str(value))
        try:
            why = _rejection(model.cmd.path, option)
        except (OSError, subprocess.SubprocessError) as exc:  # not remembered: asked again next time
            raise BackendError(f"CBC could not be asked about option {key!r}: {exc}") from exc
        if why is not None:
            raise ValueError(f"CBC says: {why}")
        model.args += option

    def _observe(self, model: _CbcModel, program: Program, watch: SolverWatch) -> None:
        watch.refresh = _LogProgress(model.log_path, watch, program.obj_offset)
        model.line_buffered = True

    def _execute(self, model: _CbcModel, options: SolveOptions) -> tuple[_CbcRun, bool]:
        args = [*model.args, "-solve", "-printingOptions", "all", "-solution", model.sol]
        stdbuf = _line_buffering() if model.line_buffered else None
        t0 = time.monotonic()
        run = _run_cbc([stdbuf, "-oL", *args] if stdbuf is not None else args, model.log_path, options.time_limit)
        if run.crashed(model.sol):
            # CBC died of a signal we did not send: SIGSEGV three times on 2026-11-28 in full test
            # runs, with an empty log (CBC's output to a file is block-buffered), under and without
            # stdbuf, never again on the same program.  Once more, plainly, with the time left.
            left = None if options.time_limit is None else options.time_limit - (time.monotonic() - t0)
            if left is None or left > 0:
                _log.warning("CBC died of signal %d without a solution; solving once more%s", -run.returncode,
                             " without stdbuf" if stdbuf is not None else "")
                run = _run_cbc(_with_time_limit(args, left), model.log_path, left)
                run.crashes = 1 + run.crashed(model.sol)
            else:
                run.crashes = 1  # not run again: the answer is "no solution", as at the time limit
        return run, run.interrupted

    def _read(self, model: _CbcModel, raw: _CbcRun, program: Program, options: SolveOptions, seconds: float) -> Readout:
        import pulp

        run = raw
        with open(model.log_path, encoding="utf-8", errors="replace") as fh:
            model.log = log = fh.read()
        sol_status = pulp.LpSolutionNoSolutionFound
        lp_status = pulp.LpStatusNotSolved
        if run.returncode == 0 and os.path.exists(model.sol):
            vs, var_names, con_names, _ = model.mps
            lp_status, values_by_name, _, _, _, sol_status = model.cmd.readsol_MPS(model.sol, model.prob, vs, var_names, con_names)
            model.prob.assignVarsVals(values_by_name)
        elif run.crashed(model.sol):  # a crash of CBC is no solution, as HiGHS's is, not the end of pal-opt
            why = "twice" if run.crashes > 1 else "and no time was left to run it again"
            message = f"CBC died of {_signal_name(-run.returncode)} without a solution, {why}"
            _log.warning("%s; no solution from CBC", message)
            return Readout(SolverStatus.NO_SOLUTION, None, message, {"cbc_crashes": run.crashes})
        elif not run.stopped_by_us:
            tail = " ".join(log.split()[-40:])
            raise BackendError(f"CBC exited with status {run.returncode} and no solution file: {tail}")
        m = _VERSION.search(log)
        if m and CbcBackend.__dict__.get("_version") is None:
            CbcBackend._version = f"{m.group(1)} (PuLP {pulp.__version__})"
        values = None
        if sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
            values = np.asarray([x.varValue if x.varValue is not None else 0.0 for x in model.xs], dtype=np.float64)
        if sol_status == pulp.LpSolutionOptimal:
            status = SolverStatus.OPTIMAL
        elif sol_status == pulp.LpSolutionIntegerFeasible:
            status = SolverStatus.FEASIBLE
        elif lp_status == pulp.LpStatusInfeasible and not self._out_of_time(run, options, seconds):
            status = SolverStatus.INFEASIBLE
        else:
            status = SolverStatus.NO_SOLUTION
        result_line = next((ln for ln in log.splitlines() if ln.startswith("Result - ")), "")
        if "ctrl-c" in result_line.lower():  # CBC prints it once per SIGINT it received, run together
            result_line = "Result - Stopped on ctrl-c"
        message = run.describe(result_line[len("Result - "):] or pulp.LpStatus.get(lp_status, "unknown"))
        info: dict[str, Any] = {"cbc_stopped_by": run.stopped_by} if run.stopped_by else {}
        if run.crashes:
            info["cbc_crashes"] = run.crashes
            message = f"{message} (after CBC died of a signal on the first try)"
        return Readout(status, values, message, info)

    def _bound(self, model: _CbcModel, raw: _CbcRun, program: Program, options: SolveOptions, status: SolverStatus,
               objective: float | None) -> float | None:
        """``Lower bound:`` from CBC's log, lowered by one unit of its last printed digit; for a
        proven optimum without one, the objective less the allowed gap."""
        bound = None
        lb = _LOWER.search(model.log)
        if lb:
            try:
                bound = _conservative(lb.group(1)) + program.obj_offset
            except ValueError:
                bound = None
        if status == SolverStatus.OPTIMAL and bound is None and objective is not None:
            bound = objective - model.gap
        if bound is not None and objective is not None:
            bound = min(bound, objective)
        return bound

    def _release(self, model: _CbcModel) -> None:
        if model.workdir is not None:
            _remove_dir(model.workdir)

    @staticmethod
    def _out_of_time(run: _CbcRun, options: SolveOptions, seconds: float) -> bool:
        """Whether CBC ran out of time, in which case its "infeasible" is not believed: CBC 2.10.3
        stopped by its time limit during preprocessing prints "Pre-processing says infeasible or
        unbounded" and writes "Infeasible" for a feasible program (seen at a 1.8 s limit on
        large-256x8); stopped by SIGINT there it can do the same."""
        if run.stopped_by_us:
            return True
        return options.time_limit is not None and seconds >= 0.9 * options.time_limit
