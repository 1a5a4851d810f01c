"""Locality: a gang spanning servers or racks is slowed by the job's penalty for that level.

``d_j · ln(locality_j[level])``, with the level the GPU set spans (server, rack, cluster).
"""

from __future__ import annotations

import math

import numpy as np

from ..model import Job, RoundInstance
from .base import CostTerm

__all__ = ["Locality"]


class Locality(CostTerm):
    name = "locality"
    summary = "GPUs x ln(the job's penalty for the topology level its GPUs span)"

    def placed(self, instance: RoundInstance, job: Job, pos: np.ndarray, level: int, max_factor: float) -> float:
        return int(pos.size) * math.log(job.locality[level])  # its GPUs: the demand, or an allowed count

    def slots(self, instance: RoundInstance, perfclass: str, demand: int, locality: tuple[float, float, float],
              values: np.ndarray, span: np.ndarray) -> np.ndarray:
        return demand * np.log(np.asarray(locality, dtype=np.float64))[span]
