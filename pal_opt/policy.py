"""A placement policy that keeps state between rounds, for schedulers' round loops.

:func:`pal_opt.solve` places one round and forgets it.  A scheduler calls the same policy every
round, so :class:`RoundPolicy` keeps what is worth keeping:

* **the binning**: k-means binning depends only on the cluster's measurements, which rarely
  change between rounds; it is cached (keyed by GPU ids and factor values) and reused even
  though each round builds a new :class:`~pal_opt.model.Cluster`;
* **the last placement**: with ``track_running=True`` (the default), a queued job that the
  round's instance does not mark as running but that this policy placed last round, on GPUs
  that are still free, is treated as running there — so sticky methods keep it and restart
  costs apply;
* **the random stream**: ``method="random"`` draws from one seeded generator across rounds,
  so a whole run is reproducible from one seed.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import replace
from typing import Any

import numpy as np

from .binning import BINNING_MODES, binned_factors
from .errors import OptionError
from .model import GpuState, Job, JobId, RoundInstance
from .result import PlacementResult
from .seeds import SeedLike, make_rng
from .solve import _ILP_OPTIONS, METHODS, solve

__all__ = ["RoundPolicy"]

_CACHE_SIZE = 4


class RoundPolicy:
    """Place round after round with one method, keeping state between rounds.

    Parameters
    ----------
    method
        Any of :data:`pal_opt.solve.METHODS` (default ``"pal"``).
    binning
        Binning mode; defaults to each instance's own.
    seed
        Seed of the random stream (``method="random"``).
    track_running
        Carry the last placement into the next round (see module docstring).
    **options
        Method options, as for :func:`pal_opt.solve` (checked here, once).

    Examples
    --------
    >>> from pal_opt.generate import generate_instance
    >>> policy = RoundPolicy("pal")
    >>> first = policy.place(generate_instance(4, 4, 6, seed=1))
    >>> first.status.value, policy.rounds
    ('feasible', 1)
    """

    def __init__(
        self,
        method: str = "pal",
        *,
        binning: str | None = None,
        seed: SeedLike = None,
        track_running: bool = True,
        **options: Any,
    ) -> None:
        if method not in METHODS:
            raise OptionError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
        if binning is not None and binning not in BINNING_MODES:
            raise OptionError(f"unknown binning mode {binning!r}; choose one of {', '.join(BINNING_MODES)}")
        allowed = _ILP_OPTIONS if method == "ilp" else set()
        bad = set(options) - allowed
        if bad:
            raise OptionError(f"option(s) {', '.join(sorted(bad))} do not apply to method {method!r}")
        self.method = method
        self.binning = binning
        self.options = dict(options)
        self.track_running = track_running
        self._rng = make_rng(seed) if method == "random" else None
        self._bins: OrderedDict[tuple[bytes, str], Any] = OrderedDict()
        self.last: PlacementResult | None = None
        self.rounds = 0

    # ---------------------------------------------------------------- state helpers
    @staticmethod
    def _measurement_key(instance: RoundInstance) -> bytes:
        cl = instance.cluster
        h = hashlib.blake2b(digest_size=16)
        h.update(np.ascontiguousarray(cl.gpu_ids).tobytes())
        for c in sorted(cl.factors):
            h.update(c.encode())
            h.update(np.ascontiguousarray(cl.factors[c]).tobytes())
        return h.digest()

    def _reuse_binning(self, instance: RoundInstance) -> None:
        mode = self.binning or instance.params.binning
        key = (self._measurement_key(instance), mode)
        cache = instance.cluster._cache
        if key in self._bins:
            cache.setdefault(("binned", mode), self._bins[key])
            self._bins.move_to_end(key)
        else:
            self._bins[key] = binned_factors(instance.cluster, mode)
            if len(self._bins) > _CACHE_SIZE:
                self._bins.popitem(last=False)

    def _carry_running(self, instance: RoundInstance) -> RoundInstance:
        if not self.track_running or self.last is None:
            return instance
        cl = instance.cluster
        prev = self.last.placements
        taken = {g for j in instance.jobs if j.placement for g in j.placement}
        jobs: list[Job] = []
        changed = False
        for j in instance.jobs:
            gpus = prev.get(j.id)
            if j.placement is None and gpus is not None and len(gpus) == j.demand:
                pos = [cl.position.get(int(g)) for g in gpus]
                if all(p is not None and cl.state[p] == GpuState.FREE for p in pos) and not taken & set(gpus):
                    jobs.append(replace(j, placement=tuple(int(g) for g in gpus)))
                    taken |= set(gpus)
                    changed = True
                    continue
            jobs.append(j)
        return replace(instance, jobs=tuple(jobs)) if changed else instance

    # ---------------------------------------------------------------- the round
    def place(self, instance: RoundInstance) -> PlacementResult:
        """Place one round; remember it for the next."""
        instance = self._carry_running(instance)
        self._reuse_binning(instance)
        seed: SeedLike = self._rng if self._rng is not None else None
        result = solve(instance, self.method, binning=self.binning, seed=seed, **self.options)
        self.last = result
        self.rounds += 1
        return result

    def reset(self) -> None:
        """Forget the last placement (the binning cache and random stream are kept)."""
        self.last = None

    @property
    def last_placements(self) -> dict[JobId, tuple[int, ...]]:
        """The last round's placements (empty before the first round)."""
        return dict(self.last.placements) if self.last else {}

