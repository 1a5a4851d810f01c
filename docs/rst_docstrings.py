"""A Griffe extension: pal-opt's numpydoc docstrings, written in reStructuredText, read as Markdown.

mkdocstrings renders a docstring's text as Markdown; the package's docstrings are numpydoc, whose
markup is reStructuredText (and are shown by ``help()`` and checked as doctests in that form).
This extension rewrites the few constructs that read differently, in the documentation only:

* roles (``:func:`solve```, ``:class:`~pal_opt.model.Cluster```) become code spans (``solve``,
  ``Cluster``);
* interactive sessions (``>>>``) outside an ``Examples`` section, literal blocks (a paragraph
  ending in ``::``) and ``.. code-block::`` directives become fenced code blocks;
* definition lists (a term line, its definition indented below it) become Markdown definition
  lists (the ``def_list`` extension).

Sections that Griffe parses itself (Parameters, Returns, Examples, ...) keep their layout; only
their roles are rewritten.  Loaded by ``mkdocs.yml``; not part of the package.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:[a-z]+:)?[a-z]+:`(?P<target>[^`]+)`")
#: Section titles Griffe's numpydoc parser reads as structured sections.
STRUCTURED = frozenset({
    "deprecated", "parameters", "other parameters", "type parameters", "returns", "yields", "receives",
    "raises", "warns", "examples", "attributes", "functions", "methods", "classes", "type aliases",
    "modules",
})
BULLET = re.compile(r"^(?:[*+-]|\d+[.)])\s")


def role_text(match: re.Match[str]) -> str:
    """The code span a role stands for: its title, or its target (``~``: the last component)."""
    target = match["target"]
    titled = re.fullmatch(r"(?P<title>.+?)\s*<(?P<ref>[^>]+)>", target)
    if titled:
        return f"`{titled['title']}`"
    if target.startswith("~"):
        target = target[1:].rsplit(".", 1)[-1]
    return f"`{target}`"


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def is_dash_line(line: str) -> bool:
    return "-" in line and not line.replace("-", "").strip()


def block_end(lines: list[str], start: int, indent: int) -> int:
    """The index after the block that starts at ``start`` and is indented more than ``indent``
    (blank lines inside it belong to it)."""
    end = start
    i = start
    while i < len(lines):
        if lines[i].strip():
            if indent_of(lines[i]) <= indent:
                break
            end = i + 1
        i += 1
    return end


def fenced(body: list[str], lang: str, indent: int) -> list[str]:
    """``body`` (dedented) inside a code fence at ``indent``."""
    base = min((indent_of(line) for line in body if line.strip()), default=0)
    pad = " " * indent
    return [f"{pad}```{lang}", *(pad + line[base:] if line.strip() else "" for line in body), f"{pad}```"]


def rewrite_text(lines: list[str], i: int, out: list[str]) -> int:
    """Rewrite the construct starting at ``lines[i]`` (in a text section) into ``out``; the next index."""
    line = lines[i]
    stripped = line.strip()
    k = indent_of(line)
    if stripped.startswith(">>>"):
        end = i
        while end < len(lines) and lines[end].strip():
            end += 1
        out.extend(fenced(lines[i:end], "pycon", k))
        return end
    directive = re.fullmatch(r"\.\. code-block::\s*(?P<lang>\S*)", stripped)
    if directive or (stripped.endswith("::") and not stripped.startswith("..")):
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        end = block_end(lines, j, k)
        if end > j:
            if not directive and stripped != "::":
                out.append(line[: line.rstrip().rfind("::")] + ":")
            out.append("")
            out.extend(fenced(lines[j:end], directive["lang"] if directive else "text", k))
            return end
    nxt = lines[i + 1] if i + 1 < len(lines) else ""
    starts_item = i == 0 or not lines[i - 1].strip() or is_dash_line(lines[i - 1]) or out[-1:] == [""]
    if (starts_item and nxt.strip() and indent_of(nxt) > k and not BULLET.match(stripped)
            and not is_dash_line(nxt)):
        end = block_end(lines, i + 1, k)
        body = lines[i + 1:end]
        base = min(indent_of(b) for b in body if b.strip())
        out.append(line)
        for n, b in enumerate(body):
            text = b[base:] if b.strip() else ""
            out.append(" " * k + (":   " if n == 0 else "    ") + text if text else "")
        out.append("")
        return end
    out.append(line)
    return i + 1


def to_markdown(text: str) -> str:
    """The docstring ``text`` with its reStructuredText constructs rewritten as Markdown."""
    lines = ROLE.sub(role_text, text).splitlines()
    out: list[str] = []
    section = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() and i + 1 < len(lines) and is_dash_line(lines[i + 1]) and not is_dash_line(line):
            section = line.strip().lower()
            out.extend(lines[i:i + 2])
            i += 2
            continue
        if section in STRUCTURED or not line.strip():
            out.append(line)
            i += 1
            continue
        i = rewrite_text(lines, i, out)
    return "\n".join(out)


class RstDocstrings(griffe.Extension):
    """Rewrite every docstring of the loaded package with :func:`to_markdown`."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)
