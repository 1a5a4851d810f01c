"""The names the architecture pages cite in backticks exist, and ARCHITECTURE.md names every module.

``ARCHITECTURE.md``, ``formulations/README.md`` and ``docs/index.md`` cite modules, functions,
classes, files and commands in backticks; a rename left them citing names that were gone (the
seventeenth session's audit).  Each code span (outside fenced blocks, which
``test_docs_snippets.py`` runs) is checked by its shape:

* a path (``ilp/scale.py``, ``tests/conformance.py``, ``golden/*.lp``, ``ilp/scale.py::name``):
  a file or directory of the repository, from its root, ``pal_opt/`` or the page's own directory
  (a bare ``name.py``: a module somewhere under ``pal_opt/``); after ``::``, a name of that module;
* a dotted name or a call (``stageround.alone_bound``, ``RoundPolicy.restore``,
  ``solve_ilp(warm=...)``): its first part a ``pal_opt`` module (by its last component), a name
  defined in one, a builtin or a standard module, and each further part an attribute of it;
* a bare identifier (``place_claimed``, ``FreeGpus``): a module, a name defined in a module, a
  class attribute or field, or a parameter of a ``pal_opt`` function (``warm``);
* a command (``pal-opt solve --help``, ``solve --write-lp``, ``--cluster FILE.json``): its
  sub-command and flags exist in ``pal-opt``'s parser; a hyphenated name (``ilp-preempt``): a
  method, a sub-command or a policy of the simulator of GPU types.

Spans of other shapes (``KEY=VALUE``, ``{parameter: default}``, placeholders ``<name>``,
``../shared``) are not checked; :data:`NOT_CODE` lists the spans that look like code and are not
pal-opt's (a Slurm keyword, an option of HiGHS).
"""

from __future__ import annotations

import argparse
import builtins
import functools
import importlib
import importlib.util
import inspect
import pkgutil
import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PAGES = ("ARCHITECTURE.md", "formulations/README.md", "docs/index.md")

#: Spans shaped like code that name no part of pal-opt, with why.
NOT_CODE: dict[str, str] = {
    "Include": "a Slurm configuration keyword",
    "Gres=": "a slurm.conf key",
    "slurm.conf": "Slurm's file", "gres.conf": "Slurm's file", "topology.conf": "Slurm's file",
    "KMeans": "scikit-learn's class, reproduced by kmeans.py",
    "NAME_unchecked": "a naming pattern",
    "TAKES_ANY": "a table of tests/test_public_api_sweep.py",
    "nav": "mkdocs.yml's key",
    "docs": "the optional dependencies' name",
    "params.costs": "a field path of the instance file",
    "mip_rel_gap": "a HiGHS option",
    "--update": "the golden tests' own flag",
}
PATH_SUFFIXES = (".py", ".md", ".yml", ".json", ".lp", ".toml")
IDENT = r"[A-Za-z_]\w*"
DOTTED = re.compile(rf"{IDENT}(?:\.{IDENT})*")


def code_spans(path: Path) -> list[str]:
    """The page's inline code spans outside fenced blocks, whitespace collapsed."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    return [" ".join(s.split()) for s in re.findall(r"`([^`]+)`", text)]


@functools.cache
def package() -> dict[str, Any]:
    """Every module of pal_opt by dotted name (``__main__``, which runs the command, left out)."""
    import pal_opt

    names = [m.name for m in pkgutil.walk_packages(pal_opt.__path__, "pal_opt.") if not m.name.endswith("__main__")]
    return {"pal_opt": pal_opt, **{n: importlib.import_module(n) for n in names}}


@functools.cache
def defined() -> tuple[dict[str, list[Any]], frozenset[str]]:
    """Module-level names of pal_opt (name -> objects), and the names of class attributes, fields
    and parameters of its classes and functions."""
    top: dict[str, list[Any]] = {}
    members: set[str] = set()
    for module in package().values():
        for name, value in vars(module).items():
            top.setdefault(name, []).append(value)
            if inspect.isclass(value) and value.__module__.startswith("pal_opt"):
                for klass in value.__mro__[:-1]:
                    members.update(vars(klass))
                    members.update(getattr(klass, "__dataclass_fields__", {}))
                    members.update(p for f in vars(klass).values() for p in parameters(getattr(f, "__func__", f)))
            elif callable(value) and getattr(value, "__module__", "").startswith("pal_opt"):
                members.update(parameters(value))
    return top, frozenset(members)


def parameters(f: Any) -> list[str]:
    if not callable(f):
        return []
    try:
        return list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        return []


def has_chain(obj: Any, parts: list[str]) -> bool:
    for part in parts:
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def name_exists(dotted: str) -> bool:
    """Whether a dotted name resolves (see the module's docstring)."""
    parts = dotted.split(".")
    modules = package()
    if parts[0] == "pal_opt":
        prefix = next(i for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in modules or i == 1)
        return has_chain(modules[".".join(parts[:prefix])], parts[prefix:])
    top, members = defined()
    starts = [m for n, m in modules.items() if n.rsplit(".", 1)[-1] == parts[0]] + top.get(parts[0], [])
    for namespace in (modules["pal_opt"], builtins):  # pal_opt's lazy names (``__version__``) too
        if hasattr(namespace, parts[0]):
            starts.append(getattr(namespace, parts[0]))
    if any(has_chain(s, parts[1:]) for s in starts):
        return True
    if len(parts) == 1:  # also a sub-command (``export``) or a library (``jsonschema``)
        return parts[0] in members or parts[0] in parsers() or importlib.util.find_spec(parts[0]) is not None
    if parts[0] == "self":
        return parts[-1] in members
    try:
        return has_chain(importlib.import_module(parts[0]), parts[1:])
    except ImportError:
        return False


def path_exists(span: str, page: Path) -> bool:
    rel, _, attr = span.partition("::")
    found = [p for base in (REPO, REPO / "pal_opt", page.parent) for p in base.glob(rel.rstrip("/"))]
    if not found and "/" not in rel:  # a bare file name: a module, or a file below the page's directory
        found = sorted((REPO / "pal_opt").rglob(rel)) + (sorted(page.parent.rglob(rel)) if page.parent != REPO else [])
    if not found or not attr:
        return bool(found)
    module = ".".join(found[0].relative_to(REPO).with_suffix("").parts)
    return hasattr(importlib.import_module(module), attr)


@functools.cache
def parsers() -> dict[str, argparse.ArgumentParser]:
    """``pal-opt``'s sub-command parsers by name (those of ``import`` and ``export`` too)."""
    from pal_opt.cli import build_parser

    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found.setdefault(name, sub)
                    walk(sub)

    walk(build_parser())
    return found


def flags(parser: argparse.ArgumentParser) -> set[str]:
    own = {o for a in parser._actions for o in a.option_strings}
    subs = [s for a in parser._actions if isinstance(a, argparse._SubParsersAction) for s in a.choices.values()]
    return own.union(*(flags(s) for s in subs))


def command_problem(words: list[str]) -> str | None:
    """What is wrong with a cited command line (``pal-opt`` dropped), or None."""
    subs = parsers()
    if words[0].startswith("--"):
        if not any(words[0] in flags(p) for p in subs.values()):
            return f"no sub-command of pal-opt has the flag {words[0]}"
        return None
    if words[0] not in subs:
        return f"pal-opt has no sub-command {words[0]!r}"
    bad = [w for w in words[1:] if w.startswith("--") and w not in flags(subs[words[0]])]
    return f"pal-opt {words[0]} has no flag {', '.join(bad)}" if bad else None


def span_problem(span: str, page: Path) -> str | None:
    """What is wrong with one code span of ``page``, or None (also for spans not checked)."""
    if span in NOT_CODE or "<" in span or span.startswith("../"):
        return None
    if re.fullmatch(r"[\w./*-]+(::\w+)?", span) and ("/" in span or span.partition("::")[0].endswith(PATH_SUFFIXES)):
        return None if path_exists(span, page) else "no such file (or, after ::, no such name in it)"
    words = span.split()
    if words[0] == "pal-opt" and len(words) > 1 and words[1] != "...":
        return command_problem(words[1:])
    if words[0].startswith("--") or (len(words) > 1 and words[1].startswith("--") and words[0] in parsers()):
        return command_problem(words)
    if re.fullmatch(r"[a-z]+(-[a-z]+)+", span):
        from pal_opt.hetero.methods import HETERO_POLICIES
        from pal_opt.methods import method_names

        known = {*method_names(), *parsers(), *HETERO_POLICIES, "pal-opt"}
        return None if span in known else "not a method, sub-command or policy"
    call = re.fullmatch(rf"({DOTTED.pattern})\(.*\)", span)
    names = re.findall(rf"({DOTTED.pattern})\(", span) if call else [span] if DOTTED.fullmatch(span) else []
    keyword = re.fullmatch(r"([a-z_]\w*)=.*", span)
    if keyword:
        names = [] if keyword[1] in NOT_CODE else [keyword[1]]
    missing = [n for n in names if not name_exists(n)]
    return f"{', '.join(missing)} not found" if missing else None


def test_cited_names_exist() -> None:
    problems = [f"{page}: `{span}`: {why}" for page in PAGES for span in sorted(set(code_spans(REPO / page)))
                if (why := span_problem(span, REPO / page))]
    assert problems == [], "\n".join(problems)


def test_the_check_finds_wrong_names() -> None:
    """Each shape of span is checked: a wrong one of each is reported."""
    page = REPO / "ARCHITECTURE.md"
    wrong = ["pal_opt/ilp/nosuch.py", "nosuch.py", "ilp/scale.py::nosuch", "stageround.nosuch",
             "pal_opt.cost.NoSuchTerm", "RoundPolicy.nosuch", "NoSuchClass", "no_such_function(x)",
             "pal-opt nosuch", "pal-opt solve --nosuch", "solve --nosuch", "--nosuch", "ilp-nosuch",
             "nosuch_keyword=True"]
    assert [s for s in wrong if span_problem(s, page) is None] == []
    right = ["pal_opt/ilp/scale.py", "scale.py", "ilp/scale.py::relaxation_solver", "stageround.alone_bound",
             "pal_opt.cost.CostTerm", "RoundPolicy.restore", "FreeGpus", "solve_ilp(warm=...)",
             "pal-opt solve --help", "solve --write-lp", "--cluster FILE.json", "ilp-preempt", "canonical=True"]
    assert {s: span_problem(s, page) for s in right} == dict.fromkeys(right)


def module_named(module: str, spans: set[str], tokens: set[str]) -> bool:
    """Whether ARCHITECTURE.md's spans name ``module`` (a package by its directory ``name/``)."""
    parts = module.split(".")[1:]
    if not parts:
        return True
    if (REPO / "pal_opt" / Path(*parts) / "__init__.py").exists():
        return any(s.rstrip("/").endswith("/".join(parts)) and s.endswith("/") for s in spans)
    return f"{parts[-1]}.py" in tokens or parts[-1] in tokens


def test_every_module_is_named() -> None:
    page = "ARCHITECTURE.md"
    spans = set(code_spans(REPO / page))
    tokens = {t for s in spans for t in re.split(r"[/\s(),:]+", s)} | {s.split(".")[0] for s in spans}
    unnamed = [m for m in sorted(package()) if not module_named(m, spans, tokens)]
    assert unnamed == [], f"{page} names no module file or package directory of these: {unnamed}"
