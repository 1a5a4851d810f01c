"""The policies of the simulator of GPU types, by name (``--policy`` of ``pal-opt simulate`` on a
Sia trace and of ``pal-opt simulate-sia``), importable without numpy (the CLI builds ``--help``
from it).

Each entry names the function that builds the policy object from the cluster and the
:class:`~pal_opt.hetero.simulate.SimConfig` (``"module:function"`` under :mod:`pal_opt.hetero`,
imported on first use) and whether the simulator runs every job as a rigid one (requested
count and batch, whatever the workload's category).  A new policy registers here with
:meth:`~pal_opt.registry.Registry.register`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..options import require_type
from ..registry import Registry

__all__ = ["HeteroPolicy", "HETERO_POLICIES", "hetero_policy_names"]


@dataclass(frozen=True)
class HeteroPolicy:
    """A policy of the simulator of GPU types.

    Attributes
    ----------
    summary
        One line for ``--help``.
    factory
        ``"module:function"`` under :mod:`pal_opt.hetero`: ``function(cluster, config, on_round)``
        returns an object with ``allocate(active jobs, now)`` and ``stats``.
    rigid
        The simulator runs every job as rigid (the workload's GPU count and batch).
    program
        It solves an integer program by a solver backend each round (``--backend``,
        ``--time-limit`` and Sia's parameters apply to it).
    """

    summary: str
    factory: str
    rigid: bool = False
    program: bool = False

    def __post_init__(self) -> None:
        require_type(self.rigid, bool, "rigid")  # any object was taken as truthy
        require_type(self.program, bool, "program")

    def builder(self) -> Callable[..., Any]:
        """The factory function (its module imported now)."""
        module, name = self.factory.split(":")
        return getattr(importlib.import_module(f".{module}", __package__), name)  # type: ignore[no-any-return]


HETERO_POLICIES: Registry[HeteroPolicy] = Registry(
    "policy for a cluster of GPU types",
    [
        ("sia", HeteroPolicy("Sia (SOSP'23): goodput-driven type, count and batch", "simulate:sia_policy",
                                   program=True)),
        ("ilp", HeteroPolicy("pal-opt's round program with types (Sia's program, then GPUs)", "simulate:ilp_policy",
                                   program=True)),
        ("pal", HeteroPolicy("PAL ignoring types (requested count, kept until done)", "simulate:typeblind_policy")),
        ("packed", HeteroPolicy("Packed ignoring types (requested count, kept until done)", "simulate:typeblind_policy")),
        ("gavel", HeteroPolicy("Gavel-like (OSDI'20): max-min fair type shares by throughput, rigid jobs, "
                               "no placement", "gavel:gavel_policy", rigid=True)),
    ],
)


def hetero_policy_names() -> tuple[str, ...]:
    """The registered policy names, in registration order."""
    return HETERO_POLICIES.names()
