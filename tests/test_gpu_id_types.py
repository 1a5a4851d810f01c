"""GPU ids given to the Python API are integers: a Python ``int`` or a numpy integer.

A review found ``1.5``, ``True`` and ``"0"`` taken as GPUs 1, 1 and 0 where ids were looked up
through ``int()`` (``Cluster.positions``, so ``evaluate``, ``job_slowdown``, ``span_level``, the
placement figure's failed GPUs), and ``True`` taken as GPU 1 by ``Cluster.from_arrays`` (numpy
reads ``[0, True]`` as integers): a scheduler could act on the wrong GPU.  Each is now an
:class:`~pal_opt.errors.InstanceError` naming the argument (with the index) and the value.
Integral floats (``2.0``) are refused as well: a Python float is not an id, as ``Job``,
``from_arrays``, ``repair`` and ``check`` already held; only the JSON readers (instance and
placement files, ``make_instance``'s job mappings) read ``2.0`` as the integer 2, as JSON
Schema's ``integer`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pal_opt
from pal_opt import Cluster, Job, Pipeline, RoundInstance
from pal_opt.check import Kind, violations
from pal_opt.errors import InstanceError

#: Values that are not GPU ids, each with how its error quotes it.
BAD_IDS = [
    pytest.param(1.5, id="1.5"),
    pytest.param(True, id="True"),
    pytest.param("0", id="str-0"),
    pytest.param(2.0, id="2.0"),
    pytest.param(np.float64(2.0), id="np.float64-2.0"),
    pytest.param(np.bool_(True), id="np.bool_-True"),
]


def _round() -> RoundInstance:
    cl = Cluster.uniform(2, 4, {"classA": [1.0, 1.1, 1.2, 1.3, 1.0, 1.0, 1.0, 1.0]})
    return RoundInstance(cl, (Job("a", 2, "classA"), Job("b", 1, "classA")))


def _piped() -> RoundInstance:
    cl = Cluster.uniform(2, 4, {"classA": [1.0] * 8})
    return RoundInstance(cl, (Job("p", 2, "classA", pipeline=Pipeline((1.0, 2.0), (1, 1))),))


def _plot_failed(inst: RoundInstance, g: Any, tmp: Path) -> None:
    pytest.importorskip("matplotlib")
    pal_opt.plot_placement(inst, pal_opt.solve(inst, "pal"), tmp / "round.png", failed=[g])


#: (entry point called with a bad id first in a list of GPU ids, the field path its error names)
ENTRY_POINTS: list[tuple[str, Callable[[RoundInstance, Any, Path], Any], str]] = [
    ("evaluate", lambda i, g, _: pal_opt.evaluate(i, {"a": [g, 3], "b": [5]}, i.cluster.factors), "placements.a[0]"),
    ("job_slowdown", lambda i, g, _: pal_opt.job_slowdown(i, i.cluster.factors, i.job_by_id["a"], [g, 3]),
     "gpu_ids[0]"),
    ("Cluster.positions", lambda i, g, _: i.cluster.positions([g, 3]), "gpu_ids[0]"),
    ("Cluster.positions(array)", lambda i, g, _: i.cluster.positions(np.array([g, 3], dtype=object)), "gpu_ids[0]"),
    ("Cluster.span_level", lambda i, g, _: i.cluster.span_level((g, 3)), "gpu_ids[0]"),
    ("repair placement", lambda i, g, _: pal_opt.repair(i, {"a": [g, 3], "b": [5]}, [5]), "placements.a[0]"),
    ("plot_placement failed", _plot_failed, "failed[0]"),
]


@pytest.mark.parametrize("bad", BAD_IDS)
@pytest.mark.parametrize("name, call, path", ENTRY_POINTS, ids=[e[0] for e in ENTRY_POINTS])
def test_a_gpu_id_that_is_not_an_integer_is_an_error_naming_it(
        name: str, call: Callable[[RoundInstance, Any, Path], Any], path: str, bad: Any, tmp_path: Path) -> None:
    """``1.5``, ``True`` and ``np.bool_(True)`` were GPU 1, ``"0"`` GPU 0, ``2.0`` GPU 2
    (``evaluate`` priced them, ``positions`` found them, the figure drew them failed); the
    repair's placement in force refused them without saying which."""
    with pytest.raises(InstanceError) as err:
        call(_round(), bad, tmp_path)
    assert str(err.value) == f"{path}: must be a GPU id (integer), got {bad!r}"
    assert not (tmp_path / "round.png").exists()


@pytest.mark.parametrize("bad", BAD_IDS)
def test_a_pipeline_stage_of_ids_that_are_not_integers_is_named(bad: Any) -> None:
    """Was ``stages.p: must be a list of GPU id lists``, which neither named the stage nor the value."""
    inst = _piped()
    with pytest.raises(InstanceError) as err:
        pal_opt.repair(inst, {"placements": {"p": [2, 3]}, "stages": {"p": [[3], [bad]]}}, [5])
    assert str(err.value) == f"stages.p[1][0]: must be a GPU id (integer), got {bad!r}"


@pytest.mark.parametrize("bad", BAD_IDS)
def test_from_arrays_names_a_gpu_id_that_is_not_an_integer(bad: Any) -> None:
    """``True`` (and ``np.True_``) in a list of ids was GPU 1 (numpy reads ``[0, True]`` as
    integers); the others were refused without the value."""
    with pytest.raises(InstanceError) as err:
        Cluster.from_arrays([0, bad, 3, 4], [0, 0, 1, 1], {"classA": [1.0] * 4})
    assert str(err.value) == f"gpus[].id: GPU ids must be integers, got {bad!r} at index 1"


@pytest.mark.parametrize("ids, shown", [
    (np.array([0.0, 1.5]), "1.5 at index 1"), (np.array([0.0, 2.0]), "an array of float64"),
    (np.array([False, True]), "an array of bool"), (np.array(["0", "1"]), "an array of <U1"),
    (np.array([0, 2.0], dtype=object), "2.0 at index 1"),
])
def test_from_arrays_names_the_value_of_an_array_that_is_not_of_integers(ids: np.ndarray, shown: str) -> None:
    with pytest.raises(InstanceError) as err:
        Cluster.from_arrays(ids, [0, 0], {"classA": [1.0] * 2})
    assert str(err.value) == f"gpus[].id: GPU ids must be integers, got {shown}"


@pytest.mark.parametrize("bad", BAD_IDS)
def test_check_quotes_a_gpu_id_that_is_not_an_integer(bad: Any) -> None:
    """The checker reports it (a FORM violation) rather than raising; it said which job, not
    which GPU id."""
    found = violations(_round(), {"a": [3, bad], "b": [5]})
    assert [v.kind for v in found] == [Kind.FORM]
    assert found[0].message.startswith("job 'a': GPU list must be a list of integer ids, got ")
    assert found[0].message.endswith(" at [1]")


@pytest.mark.parametrize("states", [[True] + [False] * 7, [np.bool_(True)] + [0] * 7, np.zeros(8, dtype=bool)])
def test_gpu_states_are_not_booleans(states: Any) -> None:
    """A mask of failed GPUs given as the states marked them busy (``True`` is 1)."""
    inst = _round()
    with pytest.raises(InstanceError, match=r"^state: GPU states must be 0 \(free\), 1 \(busy\) or 2 \(failed\), "
                                            r"not booleans"):
        inst.cluster.with_state(states)
    with pytest.raises(InstanceError, match=r"^gpus\[\]\.state: .*not booleans"):
        Cluster.uniform(2, 4, {"classA": [1.0] * 8}, state=states)


@pytest.mark.parametrize("bad", [True, np.bool_(True)])
def test_device_numbers_are_not_booleans(bad: Any) -> None:
    """``True`` in a list of device numbers was device 1."""
    with pytest.raises(InstanceError) as err:
        Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0] * 4}, devices=[0, bad, 0, 1])
    assert str(err.value) == f"gpus[].device: device numbers must be integers >= 0, got {bad!r} (GPU 1)"


@pytest.mark.parametrize("kind", [np.int32, np.int64, np.uint16, np.intp])
def test_numpy_integer_gpu_ids_are_gpu_ids(kind: type, tmp_path: Path) -> None:
    """What a scheduler holding its ids in numpy arrays passes works everywhere, as the same
    Python ints do (a stage map of numpy integers was refused by the repair before)."""
    inst = _round()
    a, b = [kind(3), kind(2)], [kind(5)]
    ints = {"a": (3, 2), "b": (5,)}
    priced = pal_opt.evaluate(inst, ints, inst.cluster.factors)
    assert pal_opt.evaluate(inst, {"a": a, "b": b}, inst.cluster.factors) == priced
    assert pal_opt.evaluate(inst, {"a": np.array(a), "b": np.array(b)}, inst.cluster.factors) == priced
    assert pal_opt.job_slowdown(inst, inst.cluster.factors, inst.job_by_id["a"], a) == priced.slowdown["a"]
    assert inst.cluster.positions(np.array([5, 0], dtype=kind)).tolist() == [5, 0]
    assert pal_opt.check(inst, {"a": a, "b": b}) == []
    fixed = pal_opt.repair(inst, {"a": a, "b": b}, [kind(5)])
    assert fixed.info["repair"]["failed"] == [5] and fixed.placements["a"] == (3, 2)
    assert 5 not in fixed.placements.get("b", ())
    piped = _piped()
    kept = pal_opt.repair(piped, {"placements": {"p": [kind(2), kind(3)]}, "stages": {"p": [[kind(3)], [kind(2)]]}},
                          [kind(5)])
    assert kept.placements == {"p": (3, 2)}  # its stage map, as given
    cl = Cluster.from_arrays(np.array([7, 8, 9], dtype=kind), [0, 0, 1], {"classA": [1.0] * 3})
    assert cl.gpu_ids.tolist() == [7, 8, 9] and cl.span_level([kind(7), kind(8)]).name == "SERVER"
    assert Job("r", 2, "classA", placement=(kind(3), kind(2))).placement == (3, 2)
    pytest.importorskip("matplotlib")
    pal_opt.plot_placement(inst, pal_opt.solve(inst, "pal"), tmp_path / "round.png", failed=[kind(5)])
    assert (tmp_path / "round.png").stat().st_size > 0
