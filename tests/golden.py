"""What the golden LP export tests share: the committed files' folder, the comparison of a
regenerated export with its file, and the ``--update`` entry point that rewrites them."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path

GOLDEN = Path(__file__).resolve().parents[1] / "formulations" / "golden"


def assert_unchanged(name: str, text: str, script: str) -> None:
    """``text`` (the regenerated export of ``name``) equals ``formulations/golden/<name>.lp``;
    the messages say to run ``python tests/<script> --update``."""
    path = GOLDEN / f"{name}.lp"
    assert path.is_file(), f"missing {path}; run: python tests/{script} --update"
    assert text == path.read_text(encoding="utf-8"), (
        f"{path.name} differs from the regenerated export; if the change is intended run "
        f"python tests/{script} --update and review the diff"
    )


def main(names: Iterable[str], golden_text: Callable[[str], str], doc: str | None) -> None:
    """``python tests/<script> --update``: rewrite every named export; otherwise print ``doc``."""
    if sys.argv[1:] != ["--update"]:
        print(doc)
        return
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name in sorted(names):
        (GOLDEN / f"{name}.lp").write_text(golden_text(name), encoding="utf-8", newline="\n")
        print(f"wrote {GOLDEN / (name + '.lp')}")
