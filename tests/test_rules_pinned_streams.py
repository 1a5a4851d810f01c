"""Rules of :mod:`pal_opt.streams` that a mutation audit (eighteenth session) found unpinned
(the subprocess tests of ``test_cli.py`` and ``test_examples.py`` see only whole commands): each
test fails on the one-rule change its docstring names.  The streams here are objects without a
file descriptor, so a reader gone away redirects nothing."""

from __future__ import annotations

import errno
import sys

import pytest

from pal_opt.streams import PipeSafe, ReaderMayLeave


class Sink:
    """A stream that keeps what is written, returns ``count`` from ``write``, and raises
    ``errors`` (one per call, in order) from ``write`` and ``flush`` while it has any."""

    def __init__(self, *errors: OSError, count: int | None = None) -> None:
        self.text: list[str] = []
        self.errors = list(errors)
        self.count = count

    def write(self, text: str) -> int | None:
        if self.errors:
            raise self.errors.pop(0)
        self.text.append(text)
        return self.count

    def flush(self) -> None:
        if self.errors:
            raise self.errors.pop(0)


def _full() -> OSError:
    return OSError(errno.ENOSPC, "No space left on device")


def test_write_returns_what_the_stream_wrote_or_all_of_it() -> None:
    """The stream's own count, when it gives one (it was always the text's length); the text's
    length when it gives None or the write failed (it was 0 after a failure)."""
    assert ReaderMayLeave(Sink(count=3)).write("hello") == 3
    assert ReaderMayLeave(Sink()).write("hello") == 5
    assert ReaderMayLeave(Sink(_full())).write("hello") == 5


def test_writelines_writes_every_line() -> None:
    sink = Sink()
    ReaderMayLeave(sink).writelines(["a\n", "b\n"])
    assert sink.text == ["a\n", "b\n"]


def test_the_first_write_error_is_the_one_kept() -> None:
    wrapped = ReaderMayLeave(Sink(_full(), OSError(errno.EIO, "Input/output error")))
    wrapped.write("a")
    wrapped.write("b")
    assert wrapped.lost is not None and wrapped.lost.errno == errno.ENOSPC


def test_a_reader_gone_at_the_flush_is_no_lost_output() -> None:
    """A ``BrokenPipeError`` from ``flush`` is a reader gone (the rest dropped quietly), not a
    write that failed (kept in ``lost``, then an error and exit 2)."""
    wrapped = ReaderMayLeave(Sink(BrokenPipeError(errno.EPIPE, "Broken pipe")))
    wrapped.flush()
    assert wrapped.lost is None
    wrapped = ReaderMayLeave(Sink(_full()))
    wrapped.flush()
    assert wrapped.lost is not None and wrapped.lost.errno == errno.ENOSPC


def test_a_block_that_failed_keeps_its_error_over_the_lost_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdout", Sink(_full()))
    with pytest.raises(ValueError, match="the block's own"), PipeSafe():
        print("lost")
        raise ValueError("the block's own")


@pytest.mark.parametrize("code", [0, None])
def test_a_block_that_exits_with_success_raises_the_lost_output(
    monkeypatch: pytest.MonkeyPatch, code: int | None
) -> None:
    """``sys.exit()`` and ``sys.exit(0)`` are successes: the lost output is raised (for
    ``sys.exit()`` it was not), naming standard output."""
    monkeypatch.setattr(sys, "stdout", Sink(_full()))
    with pytest.raises(OSError, match="cannot write: No space left on device") as err, PipeSafe():
        print("lost")
        sys.exit(code)
    assert err.value.filename == "standard output"
    monkeypatch.setattr(sys, "stdout", Sink(_full()))
    with pytest.raises(SystemExit), PipeSafe():
        print("lost")
        sys.exit(1)


def test_the_streams_are_put_back_and_a_closed_one_stays_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """At the block's end both streams are the ones before (standard error was left wrapped);
    a stream that is None (started with ``>&-``) stays None inside (it was wrapped, and the
    first print raised ``AttributeError``)."""
    out, err = Sink(), Sink()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    with PipeSafe():
        assert isinstance(sys.stdout, ReaderMayLeave) and isinstance(sys.stderr, ReaderMayLeave)
    assert sys.stdout is out and sys.stderr is err
    monkeypatch.setattr(sys, "stdout", None)
    with PipeSafe():
        assert sys.stdout is None
        print("nowhere")
    assert sys.stdout is None and sys.stderr is err
