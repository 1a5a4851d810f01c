"""The simulator's named choices, importable without numpy (the CLI builds ``--help`` from them).

``DRAWS``: how GPUs draw their variability factors (:mod:`pal_opt.simulate.variability`):
``numpy`` (seeded by ``--seed``) or ``artifact`` (the PAL artifact's own draw, replayed).
"""

from __future__ import annotations

__all__ = ["DRAWS"]

DRAWS: tuple[str, ...] = ("numpy", "artifact")
