"""Variability: a gang runs at the pace of its slowest GPU.

``d_j · ln(max factor of j's class over its GPUs)`` — the factors are the round's binned ones.
"""

from __future__ import annotations

import math

import numpy as np

from ..model import Job, RoundInstance
from .base import CostTerm

__all__ = ["Variability"]


class Variability(CostTerm):
    name = "variability"
    summary = "GPUs x ln(slowest GPU's factor for the job's class)"

    def placed(self, instance: RoundInstance, job: Job, pos: np.ndarray, level: int, max_factor: float) -> float:
        return int(pos.size) * math.log(max_factor)  # its GPUs: the demand, or an allowed count

    def slots(self, instance: RoundInstance, perfclass: str, demand: int, locality: tuple[float, float, float],
              values: np.ndarray, span: np.ndarray) -> np.ndarray:
        return demand * np.log(values)
