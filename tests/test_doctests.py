"""The Examples sections of the API reference (numpydoc docstrings) run as doctests."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import pal_opt

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(pal_opt.__path__, prefix="pal_opt.")
    if not m.name.endswith("__main__")
)


def test_public_api_is_documented() -> None:
    for name in pal_opt.__all__:
        if name.startswith("__"):
            continue
        obj = getattr(pal_opt, name)
        if callable(obj):
            assert obj.__doc__ and obj.__doc__.strip(), f"pal_opt.{name} has no docstring"


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"
