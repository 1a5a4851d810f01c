"""The simulator's named choices, importable without numpy (the CLI builds ``--help`` from them).

``DRAWS``: how GPUs draw their variability factors (:mod:`pal_opt.simulate.variability`):
``numpy`` (seeded by ``--seed``) or ``artifact`` (the PAL artifact's own draw, replayed).

The failure process's default rates and times (:mod:`pal_opt.simulate.failures` explains them)
live here too, so that ``pal-opt simulate --help`` can print them without importing numpy.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "DRAWS",
    "LLAMA3",
    "DEFAULT_GPU_MTBF_HOURS",
    "DEFAULT_SERVER_MTBF_HOURS",
    "DEFAULT_REPAIR_SECONDS",
    "DEFAULT_CHECKPOINT_INTERVAL",
]

DRAWS: tuple[str, ...] = ("numpy", "artifact")

#: The Llama 3 report's figures the default rates derive from (module docstring).
LLAMA3: Mapping[str, float] = {
    "gpus": 16384, "gpus_per_server": 8, "days": 54, "unexpected_interruptions": 419, "gpu_share": 0.587,
}


def _llama3_mtbf_hours(share: float, per: str) -> float:
    hours = LLAMA3["days"] * 24
    units = LLAMA3["gpus"] if per == "gpu" else LLAMA3["gpus"] / LLAMA3["gpus_per_server"]
    return units * hours / (share * LLAMA3["unexpected_interruptions"])


#: Mean hours between GPU-caused failures of one GPU: 16,384 × 1,296 / (0.587 × 419) ≈ 86,300.
DEFAULT_GPU_MTBF_HOURS: float = _llama3_mtbf_hours(LLAMA3["gpu_share"], "gpu")
#: Mean hours between host-caused failures of one server: 2,048 × 1,296 / (0.413 × 419) ≈ 15,300.
DEFAULT_SERVER_MTBF_HOURS: float = _llama3_mtbf_hours(1.0 - LLAMA3["gpu_share"], "server")
#: Seconds a failed GPU or server is out of service (an assumption, module docstring).
DEFAULT_REPAIR_SECONDS: float = 4 * 3600.0
#: Seconds of work between a job's periodic checkpoints (an assumption, module docstring).
DEFAULT_CHECKPOINT_INTERVAL: float = 3600.0
