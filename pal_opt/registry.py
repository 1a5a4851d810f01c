"""A name -> item registry, the one shape behind the registries of methods, cost terms and the
policies of the simulator of GPU types: registration in a fixed order, look-up with an error that
lists the known names.  (The solver backends' registry is a dict of classes,
:data:`pal_opt.ilp.backends.BACKENDS`, ordered by its preference list.)"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, TypeVar

from .errors import OptionError
from .options import require_type

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(dict[str, T], Generic[T]):
    """Registered items by name, in registration order.

    Examples
    --------
    >>> r = Registry[int]("widget", [("a", 1)])
    >>> r.register("b", 2)
    2
    >>> r.get_item("c")
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: unknown widget 'c'; choose one of a, b
    """

    def __init__(self, what: str, items: Iterable[tuple[str, T]] = ()):
        super().__init__()
        self.what = what
        for name, item in items:
            self.register(name, item)

    def register(self, name: str, item: T, *, replace: bool = False) -> T:
        """Add ``item`` as ``name``; an :class:`OptionError` if the name is taken and not ``replace``."""
        if not isinstance(name, str) or not name:
            raise OptionError(f"a {self.what} needs a non-empty name, got {name!r}")
        require_type(replace, bool, "replace")  # any object was taken as truthy
        if name in self and not replace:
            raise OptionError(f"a {self.what} named {name!r} is registered already")
        # a str enum member is stored as its plain value, so listings (argparse's choices, error
        # messages) show 'ilp' rather than <MethodName.ILP: 'ilp'>
        self[str(name)] = item
        return item

    def unregister(self, name: str) -> None:
        """Remove ``name`` (a no-op if it is not registered)."""
        if not isinstance(name, str):  # a list was a raw TypeError (unhashable), None a silent no-op
            raise OptionError(f"a {self.what} name must be a string, got {name!r}")
        self.pop(name, None)

    def get_item(self, name: object) -> T:
        """The item registered as ``name``; an :class:`OptionError` listing the names if none."""
        try:
            return self[name]  # type: ignore[index]
        except (KeyError, TypeError):
            raise OptionError(f"unknown {self.what} {name!r}; choose one of {', '.join(self)}") from None

    def names(self) -> tuple[str, ...]:
        """The registered names, in order."""
        return tuple(self)
