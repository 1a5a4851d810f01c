"""Rules of pal_opt/io/ that no test held: each test here fails on a one-rule change (a mutation review, 2026-12-06) that the rest of the suite let pass."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pal_opt.io.measurements import sample_factors


def test_classes_sharing_a_file_get_equal_but_separate_arrays(tmp_path: Path) -> None:
    f = tmp_path / "bert.csv"
    f.write_text("uuid,perf\na,1.0\nb,1.1\nc,0.95\n")
    out = sample_factors({"classB": f, "classC": f}, 4, rng=0)
    assert np.array_equal(out["classB"], out["classC"])
    out["classB"][0] = 9.0  # editing one class's factors leaves the other's alone
    assert out["classC"][0] != 9.0
