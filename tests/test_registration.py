"""Extending pal-opt through its public API: a method or a solver backend registered from outside
the package is one like any other — in ``pal-opt solve --help``, accepted by ``solve`` and
``RoundPolicy``, and held to its conformance suite — with no edit anywhere else.  (The backend
conformance suite runs on a throwaway backend in ``tests/test_backend_conformance.py``.)"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import pytest
from method_conformance import MethodConformance

import pal_opt
from pal_opt.cli import build_parser
from pal_opt.errors import OptionError
from pal_opt.model import RoundInstance
from pal_opt.policies.base import GreedyPlacement, in_pal_order, place_in_order


def _widest_first(
    instance: RoundInstance, factors: Mapping[str, np.ndarray], *, seed: object = None, backfill: bool = False
) -> GreedyPlacement:
    """A throwaway greedy policy: each job on the first free GPUs, in GPU order."""

    def sequence(inst: RoundInstance, f: Mapping[str, np.ndarray], order: list[int], backfill: bool = False) -> dict:
        return place_in_order(inst, f, order, lambda state, i: (
            np.flatnonzero(state.free)[: inst.jobs[i].demand]
            if state.num_free >= inst.jobs[i].demand else None), backfill=backfill)

    return in_pal_order(instance, factors, sequence, backfill=backfill)


THROWAWAY = "first-free"


@pytest.fixture(scope="module", autouse=True)
def registered() -> Iterator[None]:
    pal_opt.register_method(pal_opt.greedy_method(THROWAWAY, _widest_first, "first free GPUs (a test's method)"))
    yield
    from pal_opt.methods import unregister_method

    unregister_method(THROWAWAY)


def test_the_method_is_in_solve_help(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["solve", "--help"])
    out = capsys.readouterr().out
    assert THROWAWAY in out and "first free GPUs (a test's method)" in out


def test_the_method_is_accepted_everywhere() -> None:
    inst = pal_opt.generate_instance(4, 4, 6, seed=2)
    assert pal_opt.solve(inst, THROWAWAY).method == THROWAWAY
    assert pal_opt.RoundPolicy(THROWAWAY).place(inst).method == THROWAWAY
    assert THROWAWAY in pal_opt.method_names()


def test_registering_a_taken_name_is_an_error() -> None:
    with pytest.raises(pal_opt.OptionError, match="registered already"):
        pal_opt.register_method(pal_opt.greedy_method("pal", _widest_first, "again"))


class TestThrowawayConforms(MethodConformance):
    method = THROWAWAY


def test_a_registered_backend_is_in_solve_help_and_solves(capsys: pytest.CaptureFixture[str]) -> None:
    from pal_opt.ilp.backends import unregister_backend
    from pal_opt.ilp.backends.highs import HighsBackend

    class Spare(HighsBackend):
        name = "spare-highs"

    pal_opt.register_backend(Spare)
    try:
        with pytest.raises(SystemExit):
            build_parser().parse_args(["solve", "--help"])
        assert "spare-highs" in capsys.readouterr().out
        inst = pal_opt.generate_instance(4, 4, 6, seed=2)
        res = pal_opt.solve(inst, "ilp", backend="spare-highs")
        assert res.backend == "spare-highs" and res.status.value == "optimal"
    finally:
        unregister_backend("spare-highs")



def test_enum_named_methods_are_listed_as_plain_names() -> None:
    from pal_opt.methods import method_names

    assert all(type(n) is str for n in method_names())
    assert "<" not in " ".join(method_names())


@pytest.mark.parametrize(("spec", "at", "says"), [
    ("no_such_module_xyz:place", "register", "cannot import its policy 'no_such_module_xyz:place': no module named "
                                             "'no_such_module_xyz'"),
    ("pal_opt.no_such_module:place", "register", "no module named 'pal_opt.no_such_module'"),
    ("pal_opt.policies.pal", "define", "a policy given by name must be 'module:function', got 'pal_opt.policies.pal'"),
    ("pal_opt.policies.pal:no_such_function", "solve",
     "its policy 'pal_opt.policies.pal:no_such_function' names no function of module 'pal_opt.policies.pal'"),
])
def test_a_lazy_policy_that_cannot_be_imported_is_an_option_error_naming_it(spec: str, at: str, says: str) -> None:
    """``greedy_method("m", "missing_module:place", ...)`` registered, and the first solve raised
    ``ModuleNotFoundError``: the spec is checked when the method is defined (its form) and
    registered (its module found, not imported), and resolved with pal-opt's error."""
    name = "lazy-" + at
    try:
        with pytest.raises(OptionError) as err:
            method = pal_opt.greedy_method(name, spec, "a policy given by name")
            pal_opt.register_method(method)
            assert at == "solve"
            pal_opt.solve(pal_opt.generate_instance(2, 4, 3, seed=0), name)
        assert f"method {name!r}: " in str(err.value) and says in str(err.value)
        assert (name in pal_opt.method_names()) == (at == "solve")
    finally:
        from pal_opt.methods import unregister_method

        unregister_method(name)

