"""Rules of pal_opt/cliargs.py (argument types of the ``pal-opt`` commands) that no test held
(mutation review round 5, 2026-12-06): each test fails on a one-rule change of cliargs.py
that the rest of the suite let pass."""

from __future__ import annotations

import argparse

import pytest

from pal_opt.cliargs import (
    cost_param,
    gpu_ids,
    job_ids,
    nonneg_float,
    output_file,
    penalty,
    positive_float,
    refuse_overwriting_inputs,
    resolve_job_ids,
)
from pal_opt.errors import OptionError
from pal_opt.model import FACTOR_RANGE


def test_positive_float_refuses_zero_and_non_finite_numbers() -> None:
    """``positive_float`` is > 0 (C1 let 0 through) and finite (C2 let inf and nan through);
    ``nonneg_float`` takes 0."""
    assert positive_float("0.5") == 0.5 and nonneg_float("0") == 0.0
    for bad in ("0", "inf", "nan", "-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            positive_float(bad)


def test_a_penalty_may_be_the_largest_factor() -> None:
    """A locality penalty runs from 1 to the largest factor a round holds, both included (C3
    refused the largest)."""
    top = FACTOR_RANGE[1]
    assert penalty("1") == 1.0 and penalty(repr(float(top))) == top
    with pytest.raises(argparse.ArgumentTypeError, match="at most"):
        penalty(repr(float(top) * 2))


def test_an_output_file_is_not_standard_output_nor_a_directory(tmp_path) -> None:
    """``-`` (C4) and an existing directory (C5) are refused as output files before any work."""
    assert output_file(str(tmp_path / "out.json")) == str(tmp_path / "out.json")
    with pytest.raises(argparse.ArgumentTypeError, match="standard output"):
        output_file("-")
    with pytest.raises(argparse.ArgumentTypeError, match="is a directory"):
        output_file(str(tmp_path))


def test_two_outputs_to_one_file_are_refused(tmp_path) -> None:
    """Two outputs naming one file are refused (C6 compared each output with the inputs only)."""
    out = tmp_path / "a.json"
    with pytest.raises(OptionError, match="the same file as --out"):
        refuse_overwriting_inputs({"--out": str(out), "--csv": str(tmp_path / "." / "a.json")}, [])
    refuse_overwriting_inputs({"--out": str(out), "--csv": str(tmp_path / "b.json")}, [])


def test_job_ids_match_the_rounds_ids_as_written() -> None:
    """``--jobs 007,7`` names the job ``"007"`` when the round has one, and job 7 (C7 read both
    as the integer 7)."""
    assert resolve_job_ids(job_ids("007,7"), ["007", 7]) == ["007", 7]
    assert resolve_job_ids(job_ids("007"), [7]) == [7]


def test_gpu_ids_are_ascii_integers_each_once() -> None:
    """``--failed 3,٤`` is refused (C8 read the Arabic-Indic digit as GPU 4), and so is a GPU
    given twice (C9)."""
    assert gpu_ids("3, 17,4") == [3, 17, 4]
    with pytest.raises(argparse.ArgumentTypeError, match="must be integers"):
        gpu_ids("3,\u0664")
    with pytest.raises(argparse.ArgumentTypeError, match="given twice"):
        gpu_ids("3,4,3")


def test_a_cost_parameter_must_be_a_number_not_a_boolean() -> None:
    """``--cost migration.per_gpu=true`` is refused (C10 read it as 1.0)."""
    assert cost_param("migration.per_gpu=2") == ("migration", "per_gpu", 2.0)
    with pytest.raises(argparse.ArgumentTypeError, match="expected a finite number"):
        cost_param("migration.per_gpu=true")


def test_ids_are_integers_only_in_ascii_digits() -> None:
    """int() reads '٤' (Arabic-Indic four) as 4 and '1_0' as 10: --jobs selected job 4 with the
    first, and --failed took GPU 10 for the second."""
    assert resolve_job_ids(job_ids("\u0664"), [4, 5]) == ["\u0664"]  # a name, which the solve reports unknown
    assert job_ids("1_0") == ["1_0"] and job_ids(" 7,-3") == [7, -3]
    for text in ("1_0", "\u0664"):
        with pytest.raises(argparse.ArgumentTypeError, match="GPU ids must be integers"):
            gpu_ids(text)
