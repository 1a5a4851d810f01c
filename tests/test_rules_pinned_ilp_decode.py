"""Rules of pal_opt/ilp/decode.py that no test held: each test here fails on a one-rule change (a mutation review, 2026-12-06) that the rest of the suite let pass."""

from __future__ import annotations

import numpy as np
import pytest

from pal_opt.errors import BackendError
from pal_opt.ilp.decode import decode, encode
from pal_opt.ilp.formulation import build_formulation
from pal_opt.model import Cluster, Job, RoundInstance


def test_a_solution_far_from_integral_is_refused() -> None:
    c = Cluster.uniform(2, 2, {"classA": [1.0, 1.1, 1.0, 1.2]})
    inst = RoundInstance(c, (Job("a", 2, "classA"), Job("b", 1, "classA")))
    form = build_formulation(inst)
    x = encode(form, {"a": (0, 1), "b": (2,)})
    assert set(decode(form, x)) == {"a", "b"}
    k = int(np.flatnonzero(form.integrality & (x > 0))[0])
    y = x.copy()
    y[k] -= 0.3  # 0.7 for a variable that must be 0 or 1
    with pytest.raises(BackendError, match="not integral"):
        decode(form, y)
