"""The backend conformance suite (``conformance.py``) over every registered backend.

One test class per name in :data:`pal_opt.ilp.backends.BACKENDS`, made when this module is
collected (a backend whose solver is not installed is skipped with its import error), and one
for a backend defined here, outside pal-opt, registered with
:func:`~pal_opt.ilp.backends.register_backend` for its class and unregistered afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import ClassVar

import pytest
from conformance import BackendConformance

from pal_opt.errors import OptionError
from pal_opt.ilp import solve_ilp
from pal_opt.ilp.backends import (
    BACKENDS,
    PREFERENCE,
    Backend,
    available_backends,
    get_backend,
    register_backend,
    unregister_backend,
)
from pal_opt.ilp.backends.highs import HighsBackend


def _class_name(backend: str) -> str:
    return "TestConformance" + "".join(part.title() for part in re.split(r"[^0-9A-Za-z]+", backend))


for _name in list(BACKENDS):
    globals()[_class_name(_name)] = type(_class_name(_name), (BackendConformance,),
                                         {"backend": _name, "__module__": __name__})


class ThrowawayHighs(HighsBackend):
    """HiGHS under another name: a backend written outside pal-opt."""

    name: ClassVar[str] = "highs-throwaway"


@pytest.fixture
def throwaway() -> Iterator[type[Backend]]:
    register_backend(ThrowawayHighs)
    try:
        yield ThrowawayHighs
    finally:
        unregister_backend(ThrowawayHighs.name)


class TestThrowawayBackend(BackendConformance):
    """The whole suite on :class:`ThrowawayHighs`, registered for this class only."""

    backend = ThrowawayHighs.name

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _registered(cls) -> Iterator[None]:
        register_backend(ThrowawayHighs)
        try:
            yield
        finally:
            unregister_backend(ThrowawayHighs.name)

    def test_comes_after_the_built_ins(self) -> None:
        avail = available_backends()
        assert avail[-1] == self.backend
        assert avail[:-1] == [n for n in PREFERENCE if n in avail]
        assert get_backend() is not ThrowawayHighs


# --------------------------------------------------------------------------- the registry
def test_registering_and_unregistering(throwaway: type[Backend]) -> None:
    assert BACKENDS[throwaway.name] is throwaway and get_backend(throwaway.name) is throwaway
    register_backend(throwaway)  # the same class again: nothing changes
    r = solve_ilp(_small(), backend=throwaway.name)
    assert r.backend == throwaway.name and r.status.value == "optimal"
    assert unregister_backend(throwaway.name) is throwaway
    assert throwaway.name not in BACKENDS and throwaway.name not in available_backends()
    with pytest.raises(OptionError, match="unknown backend 'highs-throwaway'"):
        get_backend(throwaway.name)
    with pytest.raises(OptionError, match="no backend named 'highs-throwaway'"):
        unregister_backend(throwaway.name)
    register_backend(throwaway)  # for the fixture to remove


def test_a_name_is_taken_once_unless_replaced(throwaway: type[Backend]) -> None:
    class Other(HighsBackend):
        name: ClassVar[str] = throwaway.name

    with pytest.raises(OptionError, match="already registered"):
        register_backend(Other)
    assert BACKENDS[throwaway.name] is throwaway
    assert register_backend(Other, replace=True) is Other and get_backend(throwaway.name) is Other
    register_backend(throwaway, replace=True)


def test_register_backend_refuses_what_is_not_a_backend() -> None:
    class Nameless(HighsBackend):
        name: ClassVar[str] = ""

    class Abstract(Backend):
        name: ClassVar[str] = "abstract"

    for bad, match in ((object, "subclass of Backend"), (Nameless, "no name"), (Abstract, "does not implement")):
        with pytest.raises(OptionError, match=match):
            register_backend(bad)  # type: ignore[arg-type]
    with pytest.raises(OptionError, match="no backend named"):
        unregister_backend("no-such-backend")
    assert "abstract" not in BACKENDS


def test_unknown_backend_names_registered_ones(throwaway: type[Backend]) -> None:
    with pytest.raises(OptionError, match="highs, cpsat, cbc, highs-throwaway"):
        get_backend("gurobi")


def _small():  # type: ignore[no-untyped-def]
    from pal_opt.generate import generate_instance

    return generate_instance(4, 4, 8, seed=1)
