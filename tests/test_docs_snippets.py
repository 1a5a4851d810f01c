"""Every fenced code block of the README and the docs runs, or is marked as not meant to run.

Collected from ``README.md``, ``ARCHITECTURE.md``, ``docs/**/*.md``, ``examples/*.md``,
``instances/README.md`` and ``formulations/*.md``; one test per block, named ``FILE:LINE``.

* ``python`` blocks run in order, each file's blocks in one namespace; a block written as an
  interactive session (``>>>`` prompts) runs as a doctest, so the output it shows is checked.
* ``bash``/``sh``/``shell``/``console`` blocks run each command (``console``: the lines after
  ``$``) as a subprocess: ``pal-opt ...`` as ``sys.executable -m pal_opt.cli ...`` and
  ``python ...``/``python3 ...`` with ``sys.executable``.  A command must exit 0, or with the
  status a trailing ``# exit N`` comment documents.  A command that is neither, or that needs a
  shell (pipes, ``&&``, redirections), fails the test: such a block must be marked.
* ``json`` blocks must parse (they are samples, not run).
* Any other language tag (``text``, ``csv``, ``mermaid``, ...) marks a block that is not code to
  run; a block without a tag fails (say what it is).
* ``<!-- not-run: REASON -->`` on the line before a fence marks a block that is not run (the test
  is skipped with that reason): pseudo-code, commands that install or rewrite committed files.

All blocks of one file share one fresh working directory (under pytest's ``tmp_path_factory``)
holding copies of ``examples/data/`` and ``instances/``, so paths are written as from the
repository root and nothing is written into the repository.  ``../shared`` there is the
repository's ``../shared``; when that is absent, a python block or shell command that mentions
it is not run (a block all of whose commands do is skipped).

Running one block alone (``-k``) first runs the blocks before it in its file.  A block fails on
its own error; the report names any earlier block of the file that failed too.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
DOC_PATTERNS = ("README.md", "ARCHITECTURE.md", "docs/**/*.md", "examples/*.md", "instances/README.md",
                "formulations/*.md")
#: Copied into each file's working directory, so that documented paths resolve there.
DATA_DIRS = ("examples/data", "instances")
PYTHON_TAGS = frozenset({"python", "py"})
SHELL_TAGS = frozenset({"bash", "sh", "shell", "console"})
#: Seconds one documented command may take.
COMMAND_TIMEOUT = 60

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<tag>[^\s`]*)")
NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(?P<reason>.*?)\s*-->\s*$")
EXIT_STATUS = re.compile(r"#\s*exit\s+(?P<status>\d+)\b")
SHELL_OPERATORS = frozenset("|&;<>()")


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language tag, its text, its not-run reason."""

    path: Path
    line: int
    tag: str
    text: str
    not_run: str | None

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(REPO).as_posix()}:{self.line}"


def doc_files() -> list[Path]:
    """The Markdown files whose code blocks are checked, in a stable order."""
    found = {p for pattern in DOC_PATTERNS for p in REPO.glob(pattern) if p.is_file() and not p.is_symlink()}  # docs/guide.md: the README
    return sorted(found)


def blocks_of(path: Path) -> list[Block]:
    """The fenced code blocks of one Markdown file, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][min(indent, len(lines[j]) - len(lines[j].lstrip(" "))):])
            j += 1
        marker = NOT_RUN.match(lines[i - 1]) if i > 0 else None
        blocks.append(Block(path, i + 1, opening["tag"].lower(), "\n".join(body) + "\n",
                            marker["reason"] if marker else None))
        i = j + 1
    return blocks


BLOCKS = [b for path in doc_files() for b in blocks_of(path)]


def test_the_docs_have_runnable_blocks() -> None:
    runnable = [b for b in BLOCKS if b.not_run is None and (b.tag in PYTHON_TAGS or b.tag in SHELL_TAGS)]
    assert len({b.path for b in runnable}) >= 3, "the collector found (almost) no runnable blocks"


def test_api_reference_lists_every_export() -> None:
    """``docs/api/index.md`` links every name of ``pal_opt.__all__`` to its documentation (the
    strict docs build in ``.ci/run`` checks that each link resolves)."""
    import pal_opt

    index = (REPO / "docs" / "api" / "index.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| \[`(\w+)`\]\[[\w.]+\]", index, flags=re.M))
    exported = {name for name in pal_opt.__all__ if not name.startswith("__")}
    assert exported - listed == set(), "add these to docs/api/index.md"
    assert listed - exported == set(), "no longer exported: remove them from docs/api/index.md"


# --- shell commands ---------------------------------------------------------------------------


def shell_commands(block: Block) -> list[str]:
    """The command lines of a shell block (continuation lines joined, comments kept)."""
    raw = block.text.splitlines()
    if block.tag == "console":
        raw = [line.strip()[1:].strip() for line in raw if line.strip().startswith("$")]
    commands: list[str] = []
    pending = ""
    for line in raw:
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        if pending.strip() and not pending.strip().startswith("#"):
            commands.append(pending.strip())
        pending = ""
    return commands


def argv_of(command: str) -> tuple[list[str], int]:
    """The argument vector a documented command runs as, and the exit status it should give.

    Fails the test when the command cannot be run without a shell or is not ``pal-opt`` or
    ``python``: the block has to be marked ``not-run`` then.
    """
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words = list(lexer)
    if any(w and set(w) <= SHELL_OPERATORS for w in words):
        pytest.fail(f"{command!r} needs a shell (pipes, &&, redirections): rewrite it or mark the block "
                    "<!-- not-run: REASON -->")
    status = EXIT_STATUS.search(command)
    expected = int(status["status"]) if status else 0
    if words[0] == "pal-opt":
        return [sys.executable, "-m", "pal_opt.cli", *words[1:]], expected
    if words[0] in ("python", "python3"):
        return [sys.executable, *words[1:]], expected
    pytest.fail(f"cannot run {command!r} (only pal-opt and python commands are run): mark the block "
                "<!-- not-run: REASON -->")


def needs_missing_shared(text: str) -> bool:
    """Whether a block or command reads ``../shared`` and that is absent (it is then not run)."""
    return "../shared" in text and not SHARED.is_dir()


def run_shell_block(block: Block, cwd: Path) -> None:
    commands = shell_commands(block)
    assert commands, f"{block.id}: a shell block without commands"
    env = {**os.environ, "MPLBACKEND": "Agg"}
    for command in commands:
        if needs_missing_shared(command):
            continue
        argv, expected = argv_of(command)
        try:
            proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=COMMAND_TIMEOUT, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{command!r} took more than {COMMAND_TIMEOUT} s: document a smaller example")
        if proc.returncode != expected or "Traceback" in proc.stderr:
            pytest.fail(f"{command!r} exited {proc.returncode} (documented: {expected})\n"
                        f"stdout:\n{proc.stdout[-2000:]}\nstderr:\n{proc.stderr[-4000:]}", pytrace=False)


# --- one working directory and namespace per file ---------------------------------------------


@dataclass
class DocSession:
    """The state the blocks of one file share: a working directory, a namespace, and what ran."""

    cwd: Path
    namespace: dict[str, Any] = field(default_factory=lambda: {"__name__": "__doc_snippet__"})
    outcome: dict[int, str | None] = field(default_factory=dict)  # block line -> None (passed) or error


@contextlib.contextmanager
def working_dir(path: Path) -> Iterator[None]:
    previous = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def new_session(root: Path) -> DocSession:
    """A working directory laid out like the repository: data copies, ``../shared`` beside it."""
    cwd = root / "repo"
    for rel in DATA_DIRS:
        shutil.copytree(REPO / rel, cwd / rel, ignore=shutil.ignore_patterns("*.md"))
    if SHARED.is_dir():
        (root / "shared").symlink_to(SHARED, target_is_directory=True)
    return DocSession(cwd)


def run_python_block(block: Block, namespace: dict[str, Any]) -> None:
    """Execute a block; one written as an interactive session (``>>>``) runs as a doctest."""
    if not block.text.lstrip().startswith(">>>"):
        exec(compile(block.text, block.id, "exec"), namespace)
        return
    test = doctest.DocTestParser().get_doctest(block.text, namespace, block.id, str(block.path), block.line)
    report = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    failed, _ = runner.run(test, out=report.write, clear_globs=False)
    if failed:
        pytest.fail(report.getvalue(), pytrace=False)


def run_block(block: Block, session: DocSession) -> None:
    if block.tag in PYTHON_TAGS:
        with working_dir(session.cwd):
            run_python_block(block, session.namespace)
    else:
        run_shell_block(block, session.cwd)


def skip_reason(block: Block) -> str | None:
    """Why the block is not run here; ``None``: it runs."""
    if block.not_run is not None:
        return f"not run: {block.not_run}"
    if block.tag in PYTHON_TAGS and needs_missing_shared(block.text):
        return f"shared data not available at {SHARED}"
    if block.tag in SHELL_TAGS and all(needs_missing_shared(c) for c in shell_commands(block)):
        return f"shared data not available at {SHARED}"
    if block.tag in PYTHON_TAGS or block.tag in SHELL_TAGS:
        return None
    return f"{block.tag or 'untagged'} block (not code to run)"


@pytest.fixture(scope="module")
def sessions() -> dict[Path, DocSession]:
    """The sessions of the files whose blocks ran so far (one module run)."""
    return {}


def session_for(path: Path, sessions: dict[Path, DocSession], tmp_path_factory: pytest.TempPathFactory,
                ) -> DocSession:
    if path not in sessions:
        sessions[path] = new_session(tmp_path_factory.mktemp(path.stem))
    return sessions[path]


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_doc_block(block: Block, sessions: dict[Path, DocSession],
                   tmp_path_factory: pytest.TempPathFactory) -> None:
    if block.not_run == "":
        pytest.fail(f"{block.id}: a not-run marker needs a reason", pytrace=False)
    if not block.tag and block.not_run is None:
        pytest.fail(f"{block.id}: a block without a language tag: tag it (python, bash, text, json, ...)",
                    pytrace=False)
    if block.tag == "json" and block.not_run is None:
        json.loads(block.text)  # a sample: it must at least be JSON
    reason = skip_reason(block)
    if reason is not None:
        pytest.skip(reason)
    session = session_for(block.path, sessions, tmp_path_factory)
    earlier = [b for b in BLOCKS if b.path == block.path and b.line < block.line and skip_reason(b) is None]
    for b in earlier:
        if b.line not in session.outcome:
            run_and_record(b, session)
    if block.line not in session.outcome:
        run_and_record(block, session)
    error = session.outcome[block.line]
    if error:
        failed_before = [b.id for b in earlier if session.outcome[b.line]]
        if failed_before:
            error += f"\n(earlier blocks of this file failed: {', '.join(failed_before)}; this one may build on them)"
        pytest.fail(error, pytrace=False)


def run_and_record(block: Block, session: DocSession) -> None:
    """Run a block and record how it went (a block that failed is reported by its own test)."""
    try:
        run_block(block, session)
    except pytest.fail.Exception as exc:
        session.outcome[block.line] = f"{block.id}: {exc}"
    except Exception:
        session.outcome[block.line] = f"{block.id}:\n{traceback.format_exc()}"
    else:
        session.outcome[block.line] = None
