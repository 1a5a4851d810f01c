"""Shared fixtures.

``shared_dir``
    ``../shared`` beside the repository (real measurements, traces and reference rounds); tests
    that use it skip when it is absent.
``tiny_instance``
    A hand-built round: three servers of uneven sizes (4, 2 and 3 GPUs), GPU 2 busy and GPU 7
    failed, four jobs whose total demand (8) exceeds the 7 free GPUs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pal_opt.model import Cluster, GpuState, Job, RoundInstance, RoundParams, pal_locality

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared``; skips the test when it is absent."""
    if not SHARED.is_dir():
        pytest.skip(f"shared data not available at {SHARED}")
    return SHARED


def _tiny() -> RoundInstance:
    F, B, X = GpuState.FREE, GpuState.BUSY, GpuState.FAILED
    cluster = Cluster.from_arrays(
        gpu_ids=[0, 1, 2, 3, 4, 5, 6, 7, 8],
        server=[0, 0, 0, 0, 1, 1, 2, 2, 2],
        factors={
            "classA": [1.00, 1.12, 0.97, 1.05, 0.95, 1.30, 1.02, 1.00, 0.99],
            "classB": [1.01, 1.03, 1.00, 0.99, 1.00, 1.06, 1.02, 1.00, 0.98],
            "classD": [1.00, 1.00, 1.00, 1.001, 0.999, 1.00, 1.002, 1.00, 1.00],
        },
        state=[F, F, B, F, F, F, F, X, F],
    )
    lam = 1.7
    jobs = (
        Job(id=0, demand=2, perfclass="classA", position=0, locality=pal_locality(lam), model="resnet50"),
        Job(id=1, demand=3, perfclass="classB", position=1, locality=pal_locality(lam), model="BERT"),
        Job(id=2, demand=1, perfclass="classD", position=2, locality=pal_locality(lam), model="PointNet"),
        Job(id=3, demand=2, perfclass="classA", position=3, locality=pal_locality(lam), model="resnet50"),
    )
    return RoundInstance(cluster=cluster, jobs=jobs, params=RoundParams(locality_penalty=lam), name="tiny")


@pytest.fixture
def tiny_instance() -> RoundInstance:
    """Three uneven servers, one busy and one failed GPU, four jobs (see module docstring)."""
    return _tiny()
