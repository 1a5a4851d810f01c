"""Package attributes loaded on first use (PEP 562), the one way pal-opt's packages do it.

A package lists ``{public name: submodule}`` and sets
``__getattr__, __dir__ = lazy_attributes(__name__, EXPORTS)``: ``import pal_opt.io`` then
costs nothing until a name is used, so a command imports only what it runs (``pal-opt --help``
in a tenth of a second; a JSON instance without pandas).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` for names ``exports`` maps to their
    (relative) submodules; a name, once loaded, is kept in the package's namespace."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
