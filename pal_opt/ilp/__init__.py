"""The exact round program: one solver-neutral formulation, three backends.

* :func:`build_formulation` builds the aggregated integer program of a round
  (:mod:`pal_opt.ilp.formulation`; the mathematics is in ``formulations/round_ilp.md``), a
  :class:`Program` (:mod:`pal_opt.ilp.program`) with the round's metadata;
* a backend (:func:`get_backend`: ``"highs"``, ``"cpsat"``, ``"cbc"``, or one added with
  :func:`register_backend`) translates and solves any :class:`Program`;
* :func:`round_program` is the program :func:`solve_ilp` builds for a round and its options
  (the jobs admitted, the factors binned), ready for :func:`write_lp`;
* :func:`solve_ilp` decodes the answer into GPU sets and prices it with :mod:`pal_opt.cost`;
  a round with pipeline jobs goes to the stage program (:mod:`pal_opt.ilp.stageround`,
  ``formulations/pipeline_round.md``), which places every stage;
* :func:`solve_partitioned` splits a very large round POP-style into parts of the same make-up,
  solves them in parallel and reports the gap against a whole-round LP bound;
* :class:`WarmStart` carries one round's LP basis and placement to the next
  (:mod:`pal_opt.ilp.warm`).
"""

from __future__ import annotations

from .backends import available_backends, get_backend, register_backend
from .decode import decode, encode
from .formulation import Formulation, build_formulation
from .lpwriter import write_lp
from .partition import solve_partitioned
from .program import Program
from .solve import round_program, solve_ilp
from .warm import WarmStart

__all__ = [
    "solve_ilp",
    "round_program",
    "WarmStart",
    "solve_partitioned",
    "build_formulation",
    "Formulation",
    "Program",
    "available_backends",
    "get_backend",
    "register_backend",
    "decode",
    "encode",
    "write_lp",
]
