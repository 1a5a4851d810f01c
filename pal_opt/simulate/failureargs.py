"""The failure flags of the simulators (``pal-opt simulate`` and ``simulate-sia``), importable
without numpy: :func:`add_failure_arguments` registers them, :func:`failure_config` reads them
into a :class:`~pal_opt.simulate.failures.FailureConfig` (or None without ``--failures``)."""

from __future__ import annotations

import argparse
import math
from typing import Any

from ..cliargs import nonneg_int, positive_float
from ..errors import OptionError

__all__ = ["FAILURE_FLAGS", "add_failure_arguments", "failure_config", "positive_or_inf"]


#: The failure flags: (flag, FailureConfig field).
FAILURE_FLAGS = (("--gpu-mtbf", "gpu_mtbf_hours"), ("--server-mtbf", "server_mtbf_hours"),
                  ("--repair-time", "repair_time"), ("--checkpoint-interval", "checkpoint_interval"),
                  ("--failure-scale", "scale"), ("--failure-seed", "seed"))


def positive_or_inf(text: str) -> float:
    """A number > 0, or ``inf``."""
    if text.strip().lower() in ("inf", "infinity"):
        return math.inf
    return positive_float(text)


def add_failure_arguments(p: argparse.ArgumentParser, seed_default: str = "--seed") -> None:
    """The ``failures`` group of ``pal-opt simulate`` (and of ``simulate-sia``)."""
    from .choices import (
        DEFAULT_CHECKPOINT_INTERVAL,
        DEFAULT_GPU_MTBF_HOURS,
        DEFAULT_REPAIR_SECONDS,
        DEFAULT_SERVER_MTBF_HOURS,
    )

    g = p.add_argument_group("failures", "GPU and server failures from a seeded process (off unless --failures)")
    g.add_argument("--failures", action=argparse.BooleanOptionalAction, default=False,
                   help="inject failures (default: off; a run without them is unchanged)")
    g.add_argument("--gpu-mtbf", type=positive_or_inf, default=None, metavar="HOURS",
                   help=f"mean hours between failures of one GPU (default {DEFAULT_GPU_MTBF_HOURS:,.0f}, from "
                        "Llama 3's GPU-caused interruptions; inf: never)")
    g.add_argument("--server-mtbf", type=positive_or_inf, default=None, metavar="HOURS",
                   help=f"mean hours between failures of one server (default {DEFAULT_SERVER_MTBF_HOURS:,.0f}, from "
                        "Llama 3's other interruptions; inf: never)")
    g.add_argument("--failure-scale", type=positive_float, default=None, metavar="K",
                   help="divide both MTBFs by K (failures K times as often; default 1)")
    g.add_argument("--repair-time", type=positive_float, default=None, metavar="S",
                   help=f"seconds a failed GPU or server is out of service (default {DEFAULT_REPAIR_SECONDS:g})")
    g.add_argument("--checkpoint-interval", type=positive_or_inf, default=None, metavar="S",
                   help=f"seconds of work between a job's checkpoints; a failure loses the work since the last "
                        f"(default {DEFAULT_CHECKPOINT_INTERVAL:g}; inf: only planned stops checkpoint)")
    g.add_argument("--failure-seed", type=nonneg_int, default=None, metavar="N",
                   help=f"seed of the failure process (default: {seed_default})")


def failure_config(args: argparse.Namespace) -> Any:
    """The :class:`~pal_opt.simulate.failures.FailureConfig` of ``--failures``, or None."""
    from .failures import FailureConfig

    given = {field: getattr(args, flag[2:].replace("-", "_")) for flag, field in FAILURE_FLAGS}
    given = {k: v for k, v in given.items() if v is not None}
    if not args.failures:
        if given:
            flag = next(f for f, field in FAILURE_FLAGS if field in given)
            raise OptionError(f"{flag} needs --failures (failures are off by default)")
        return None
    return FailureConfig(**given)  # checked with the rest when the SimConfig is built
