"""The round loop's state: a placement policy that keeps state between rounds.

:func:`pal_opt.solve` places one round and forgets it.  A scheduler calls the same policy every
round, so :class:`RoundPolicy` keeps what is worth keeping.  The simulator
(:mod:`pal_opt.simulate`) and the Blox adapter (:mod:`pal_opt.adapters.blox`) run their rounds
through it too.

* **the binning**: k-means binning depends only on the cluster's measurements, which rarely
  change between rounds; :func:`pal_opt.binning.binned_factors` keeps the last few results
  keyed by the measurements' content, so it is reused even though each round builds a new
  :class:`~pal_opt.model.Cluster`;
* **the last placement**: with ``track_running=True`` (the default), a queued job that the
  round's instance does not mark as running but that this policy placed last round is treated
  as running there — so sticky methods keep it and restart costs apply; on a GPU that failed
  or was taken since, it must move, and the result lists it in ``jobs_to_terminate``.  A job
  whose GPUs left the cluster, that the caller marks another job running on, or whose GPU types
  no longer allow them is not carried (``result.info["not_carried"]`` says why), and a carried
  job that asks for another GPU count is an error (its demand cannot change while it runs).  The result is
  priced on that round, :attr:`RoundPolicy.last_round` ``.instance`` (check it there:
  ``check(policy.last_round.instance, result)``), and ``result.info["carried"]`` lists the jobs so
  treated.  Job ids name the same job from round to round.  A job under a carried id whose
  class or model differ from last round's, or that is a pipeline where it was a gang or the
  other way round, is taken for a new job that reuses the id:
  it is not carried, and ``result.info["reused_ids"]`` lists it.  A scheduler that gives a
  finished job's id to a new job of the same kind calls :meth:`RoundPolicy.forget` with the
  finished ids (or :meth:`RoundPolicy.reset`, or passes ``track_running=False``);
* **the GPUs out of service**: GPUs that fail between rounds are given to
  :meth:`RoundPolicy.repair`, which re-places the jobs that lost them, keeps the repair as the
  placement in force and *holds the GPUs out of service*: every later round is solved and
  checked with them marked ``state="failed"``, whatever the caller's cluster says (a caller
  whose monitoring lags a round does not get jobs put back on a dead GPU), until
  :meth:`RoundPolicy.restore` puts them back, as :class:`~pal_opt.hetero.scheduler.TypedScheduler`
  does between ``fail`` and ``restore``.  :attr:`RoundPolicy.held_out` lists them, and so does
  each result's ``info["held_out"]`` (the round's :attr:`~RoundPolicy.last_round` ``.instance``
  marks them failed).  A held GPU that a later round's cluster no longer has (the server was
  removed) leaves the held set without a word: if it comes back under the same id it is in
  service.  A GPU the caller marks failed in a round is that round's state only, as before: the
  policy holds only the GPUs given to :meth:`~RoundPolicy.repair`.  :meth:`RoundPolicy.reset`
  clears the held set with the last placement; :meth:`RoundPolicy.forget` (job ids) leaves it.
  :func:`pal_opt.repair` alone tells the policy nothing;
* **the random stream**: ``method="random"`` draws from one seeded generator across rounds,
  so a whole run is reproducible from one seed.  A round that drew from it records
  ``info["policy_seed"]`` (the seed the stream started from; None for a ``Generator``) and
  ``info["policy_round"]`` (how many rounds have drawn from the stream, this one included; a
  round given a seed of its own does not): replaying that many rounds from that seed gives it
  again.  The result's own ``seed`` is then null, as its draw is not that of one seed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np

from .errors import InputTypeError, InstanceError, NoRoundYet, OptionError, counted
from .methods import get_method
from .model import (
    GpuState,
    Job,
    JobId,
    RoundInstance,
    checked_gpu_ids,
    placement_type_error,
    require_instance,
)
from .options import SolveOptions, check_flag, check_seed, options_from
from .result import PlacementResult
from .seeds import SeedLike, make_rng

log = logging.getLogger(__name__)

__all__ = ["RoundPolicy", "LastRound"]


class LastRound(NamedTuple):
    """A policy's last round (:attr:`RoundPolicy.last_round`): the result and the round it was
    computed on (the caller's, with the jobs carried from the round before marked running), so
    that ``check(last.instance, last.result)`` holds."""

    result: PlacementResult
    instance: RoundInstance


class RoundPolicy:
    """Place round after round with one method, keeping state between rounds.

    Parameters
    ----------
    method
        A registered method name (:func:`pal_opt.methods.method_names`; default ``"pal"``).
    binning
        Binning mode; defaults to each instance's own.
    seed
        Seed of the random stream (``method="random"``): an integer >= 0, a
        ``numpy.random.Generator`` or None (0).  A method that takes no seed refuses one, as
        :func:`pal_opt.solve` does.
    track_running
        True (default): a job this policy placed last round that the next round does not mark
        running is treated as running there, so sticky methods keep it and restart costs apply
        (:meth:`place` says which jobs, ``result.info["carried"]``); a job id names one job
        across rounds, so :meth:`forget` a finished job's id before reusing it.  False: every
        round is taken as given.  The details: ``help(pal_opt.scheduler)``.
    options
        A :class:`~pal_opt.options.SolveOptions`; or give its fields as keyword arguments.
    **kwargs
        Method options, as for :func:`pal_opt.solve` (checked here, once: an option the method
        does not take, or a backend that is unknown or not installed, is an error now, not in
        the first round).  No time limit is set unless given: a loop passes ``time_limit=``
        (seconds per round; the Blox adapter and the simulators default to
        :data:`~pal_opt.options.DEFAULT_ILP_TIME_LIMIT`), and for rounds that are the same
        from run to run also a work limit in ``backend_params`` (README, "In a scheduler").

    Attributes
    ----------
    method, binning, track_running
        As given (``binning`` None: the round's own).
    options
        The method options that differ from their defaults, ``{name: value}``, however they
        were given (keywords or ``options=``); ``binning`` and the seed are apart.
    rounds
        Rounds placed so far.
    last_round
        The last round's result and the round it was computed on (a :class:`LastRound`:
        ``.result``, ``.instance``); an :class:`~pal_opt.errors.OptionError` before the first
        round (and after :meth:`reset`), so a round loop need not test for None.
    last, last_instance
        The same two, each None before the first round (and after :meth:`reset`).
    held_out
        The GPU ids held out of service since :meth:`repair` until :meth:`restore`, ascending.

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
        options: SolveOptions | None = None,
        **kwargs: Any,
    ) -> None:
        self._method = get_method(method)
        check_flag(track_running, "track_running")
        check_seed(seed)
        given = options
        options = options_from(options, {"binning": binning, **kwargs})
        if given is not None:
            if seed is not None and options.seed is not None:
                raise InputTypeError("give the seed as seed= or in options=, not both", path="seed")
            seed = options.seed if seed is None else seed
        one_round = sorted({"deadline", "jobs"} & options.given())
        if one_round:  # a moment, or job ids, hold for one round only: later rounds would fail or fall back
            verb, pronoun = ("applies", "it") if len(one_round) == 1 else ("apply", "them")
            raise OptionError(f"{' and '.join(one_round)} {verb} to one round: give {pronoun} to pal_opt.solve (a "
                              "policy places many rounds; time_limit= bounds each)")
        self._options = options
        self._method.validate_options(self._options)
        if seed is not None and "seed" not in self._method.options:  # as pal_opt.solve, not ignored
            raise OptionError(f"option(s) seed do not apply to method {method!r}")
        if options.warm is not None:  # not a WarmStart: now, not in the first round
            from .ilp.warm import check_warm

            check_warm(options.warm)
        if options.backend is not None:  # a name that is wrong or not installed: now, not in the first round
            from .ilp.backends import get_backend

            get_backend(options.backend, probe=False)
        if options.backend_params:  # and a parameter the solver refuses, not in the first round that runs it
            from .ilp.backends import check_backend_params

            check_backend_params(options.backend, options.backend_params)
        self.method = method
        self.binning = options.binning
        self.options = {n: getattr(options, n) for n in sorted(options.given()) if n not in ("binning", "seed")}
        self.track_running = track_running
        self._rng = make_rng(seed) if method == "random" else None
        self._stream_rounds = 0  # rounds that drew from the stream (a round given its own seed does not)
        #: the seed the random stream started from, as recorded in each result's info (None: a
        #: Generator was given, whose state is not recorded)
        self._stream_seed = (0 if seed is None else int(seed)) if self._rng is not None and not isinstance(
            seed, np.random.Generator) else None
        self.last: PlacementResult | None = None
        self.last_instance: RoundInstance | None = None
        self.rounds = 0
        #: ids forgotten since the last round (:meth:`forget`), as text: not carried
        self._forgotten: set[str] = set()
        #: never-placeable jobs already warned of for holding the queue back (:func:`_blocking`)
        self._warned: set[str] = set()
        #: GPU ids held out of service: failed in a repair, until restore() (module docstring)
        self._held: frozenset[int] = frozenset()

    @property
    def held_out(self) -> tuple[int, ...]:
        """The GPU ids this policy holds out of service (:meth:`repair` until :meth:`restore`),
        ascending: every round marks them failed."""
        return tuple(sorted(self._held))

    # ---------------------------------------------------------------- state helpers
    def _carry_running(self, instance: RoundInstance) -> tuple[RoundInstance, list[JobId], dict[JobId, str]]:
        """The round with last round's jobs carried (module docstring), the ids taken for new
        jobs that reuse a carried id, and the jobs that could not be carried, with why."""
        not_carried: dict[JobId, str] = {}
        if not self.track_running or self.last is None:
            return instance, [], not_carried
        cl = instance.cluster
        # ids as text, as forget() and a round match them: 7 and "7" are one job (a scheduler
        # that rebuilds its queue from a saved placement file gets string ids back)
        prev = {str(k): v for k, v in self.last_placements.items()}
        before = {str(j.id): j for j in self.last_instance.jobs} if self.last_instance is not None else {}
        taken = {g for j in instance.jobs if j.placement for g in j.placement}
        jobs: list[Job] = []
        changed = False
        reused: list[JobId] = []
        for j in instance.jobs:
            gpus = prev.get(str(j.id))
            if gpus is not None and str(j.id) in before and not _same_job(before[str(j.id)], j):
                reused.append(j.id)
                gpus = None
            if j.placement is None and gpus is not None:
                if len(gpus) not in j.counts:
                    raise InstanceError(f"job {j.id!r} ran on {counted(len(gpus), 'GPU')} last round and now asks for "
                                        f"{j.demand}: a running job's demand cannot change (policy.forget({j.id!r}) "
                                        "first if it is a new job)", path="jobs")
                kept = replace(j, placement=tuple(int(g) for g in gpus))
                why = _why_not_carried(cl, kept, taken)
                if why is None:
                    jobs.append(kept)
                    taken |= set(gpus)
                    changed = True
                    continue
                not_carried[j.id] = why
            jobs.append(j)
        return (replace(instance, jobs=tuple(jobs)) if changed else instance), reused, not_carried

    def _hold_out(self, instance: RoundInstance) -> tuple[RoundInstance, frozenset[int]]:
        """The round with the GPUs held out of service marked failed, and the held GPUs it has
        (those it no longer has leave the held set once the round is placed)."""
        cl = instance.cluster
        held = frozenset(g for g in self._held if g in cl.position)
        if not held:
            return instance, held
        pos = cl.positions(sorted(held))
        if (cl.state[pos] == GpuState.FAILED).all():  # the caller marks them failed too
            return instance, held
        state = cl.state.copy()
        state[pos] = GpuState.FAILED
        return replace(instance, cluster=cl.with_state(state)), held

    # ---------------------------------------------------------------- the round
    def place(self, instance: RoundInstance, *, seed: SeedLike = None) -> PlacementResult:
        """Place one round; remember it for the next.  ``seed`` overrides the policy's random
        stream for this round (a simulator that derives one seed per round passes it); a method
        that takes no seed refuses one, as at construction.

        Returns
        -------
        PlacementResult
            ``placements`` (``{job id: GPU ids}``: launch or keep), ``jobs_to_terminate``
            (running jobs that lose or change their GPUs), ``unplaceable`` (``{job id:
            reason}``), ``status``, ``bound``, ``gap`` and ``message``; priced on
            :attr:`last_round` ``.instance``, the round with the carried jobs marked running.
            In ``info``, what the policy did between rounds: ``"carried"`` (jobs treated as
            running where this policy placed them last round), ``"not_carried"`` (``{job id:
            why}``: jobs that ran last round where they cannot go on, taken as queued, so never
            in ``jobs_to_terminate``: stop them), ``"reused_ids"`` (a carried id now naming a
            job of another class, model or kind: taken for a new job), ``"held_out"`` (the GPU
            ids held out of service since a :meth:`repair`, marked failed in this round, until
            :meth:`restore`), ``"queue_held_by"`` (a
            job that can never be placed holding a prefix queue back) and, for
            ``method="random"``, ``"policy_seed"`` and ``"policy_round"``; each is absent when
            empty.

        Raises
        ------
        InstanceError
            A job carried from last round whose demand is now a count it cannot run on
            (:meth:`forget` it first if it is a new job under the old id).
        """
        require_instance(instance)
        if seed is not None and "seed" not in self._method.options:
            raise OptionError(f"option(s) seed do not apply to method {self.method!r}")
        if seed is not None:
            opts = replace(self._options, seed=seed)
        else:
            opts = replace(self._options, seed=self._rng) if self._rng is not None else self._options
        instance, held = self._hold_out(instance)
        given = instance
        instance, reused, not_carried = self._carry_running(instance)
        result = self._method.run(instance, opts)
        if instance is not given:
            result.info["carried"] = [j.id for j, k in zip(instance.jobs, given.jobs, strict=True)
                                      if j.placement is not None and k.placement is None]
        if seed is None and self._rng is not None:
            # the round drew from the policy's stream: its result's own "seed" cannot say so
            self._stream_rounds += 1
            result.info["policy_seed"] = self._stream_seed
            result.info["policy_round"] = self._stream_rounds
        if reused:
            result.info["reused_ids"] = reused
        if not_carried:
            result.info["not_carried"] = not_carried
        if held:
            result.info["held_out"] = sorted(held)
        self._note_blocking(instance, result)
        self._held = held
        self.last, self.last_instance = result, instance
        self._forgotten = set()
        self.rounds += 1
        return result

    def _note_blocking(self, instance: RoundInstance, result: PlacementResult) -> None:
        """A never-placeable job that holds queued jobs back (:func:`_blocking`): its id in
        ``result.info["queue_held_by"]``, and one warning per job for the policy's life (the PAL
        artifact's queue rule stops there, and a round loop that does not act on
        ``result.unplaceable`` would otherwise stall without a word)."""
        held = _blocking(instance, result)
        if held is None:
            return
        jid, waiting = held
        result.info["queue_held_by"] = jid
        if str(jid) not in self._warned:
            self._warned.add(str(jid))
            log.warning("job %r can never be placed (%s); %s's queue rule (%s) stops at it, so %d queued job%s "
                        "behind it wait%s: remove it from the queue, or use admission='backfill'", jid,
                        result.unplaceable[jid], self.method, result.admission, waiting, "s" * (waiting != 1),
                        "" if waiting != 1 else "s")

    def repair(
        self, failed: Any, *, allow_migration: float | None = None, options: SolveOptions | None = None, **kwargs: Any
    ) -> PlacementResult:
        """Repair the last round's placement after GPUs ``failed`` (:func:`pal_opt.repair`: the
        jobs that lost a GPU are re-placed, the rest keep theirs) and keep the repair as the
        placement in force, so that the next :meth:`place` carries the repaired jobs where they
        now run.  (:func:`pal_opt.repair` alone leaves this policy believing the jobs still run
        where the last round put them: next round it would move them again and hand their new
        GPUs to others.)  The failed GPUs are held out of service: every later round marks them
        failed, whatever its cluster says, until :meth:`restore` (as
        :class:`~pal_opt.hetero.scheduler.TypedScheduler` does between ``fail`` and ``restore``);
        :attr:`held_out` and the result's ``info["held_out"]`` list them.  Jobs :meth:`forget` was told of are not repaired.  The policy's own
        solver options that a repair takes (``backend``, ``time_limit``, ``gap``, ``threads``,
        ...) apply unless ``options`` or keywords give others.

        >>> from pal_opt.generate import generate_instance
        >>> policy = RoundPolicy("pal")
        >>> first = policy.place(generate_instance(8, 4, 12, seed=2))
        >>> fixed = policy.repair([0, 1])
        >>> policy.last is fixed, any(g in (0, 1) for gs in policy.last_placements.values() for g in gs)
        (True, False)
        >>> policy.held_out, fixed.info["held_out"]
        ((0, 1), [0, 1])
        """
        from .repair import REPAIR_OPTIONS, repair_with_round

        if self.last is None or self.last_instance is None:
            raise OptionError("nothing to repair: this policy has placed no round yet")
        if options is None:  # the policy's solver options, unless given here
            kwargs = {**{n: getattr(self._options, n) for n in sorted(self._options.given() & REPAIR_OPTIONS)},
                      **kwargs}
        result, rr = repair_with_round(self.last_instance, self.last_placements, failed,
                                       allow_migration=allow_migration, options=options, **kwargs)
        self._held |= frozenset(int(g) for g in result.info["repair"]["failed"])
        result.info["held_out"] = sorted(self._held)
        self.last, self.last_instance = result, rr
        self._forgotten = set()
        return result

    def restore(self, gpus: Iterable[Any]) -> None:
        """Put GPUs held out of service since a :meth:`repair` back: the next round may place
        jobs on them (unless its cluster marks them failed or busy).  A GPU of the last round's
        cluster that is not held is left as it is.

        >>> from pal_opt.generate import generate_instance
        >>> policy = RoundPolicy("pal")
        >>> _ = policy.place(generate_instance(8, 4, 12, seed=2))
        >>> _ = policy.repair([0, 1])
        >>> policy.restore([1])
        >>> policy.held_out
        (0,)

        Raises
        ------
        OptionError
            Before the first round (and after :meth:`reset`: nothing is held), ``gpus`` not an
            iterable of ids, or an id that is not a GPU of the last round's cluster (none is
            restored then).
        """
        if self.last_instance is None:
            raise OptionError("nothing to restore: this policy has placed no round yet (or was reset), so it holds "
                              "no GPU out of service")
        ids = checked_gpu_ids(gpus, self.last_instance.cluster.position, "restore", "the last round's cluster")
        self._held -= set(ids)

    def reset(self) -> None:
        """Forget the last placement and the GPUs held out of service (:meth:`restore`); the
        binning cache and random stream are kept."""
        self.last = self.last_instance = None
        self._held = frozenset()

    def forget(self, *job_ids: JobId) -> None:
        """Forget where the jobs ``job_ids`` ran: they finished (or left), so a job that reuses
        one of their ids next round is new, not carried.  Ids this policy did not place are
        ignored; the ids are given as arguments (``forget(*finished)``), not as one list.  The
        GPUs held out of service stay held (:meth:`restore`).

        >>> from pal_opt.generate import generate_instance
        >>> policy = RoundPolicy("pal")
        >>> result = policy.place(generate_instance(4, 4, 6, seed=1))
        >>> done = next(iter(result.placements))
        >>> policy.forget(done)
        >>> done in policy.last_placements
        False
        """
        bad = [j for j in job_ids if isinstance(j, bool) or not isinstance(j, int | str | np.integer)]
        if bad:  # forget(["a", "b"]) would fail later as an unhashable list, or forget nothing
            raise OptionError(f"forget takes job ids as arguments, forget(*ids): got {bad[0]!r}")
        # as text, as a round matches ids (7 and "7" are one job); ``last`` and ``last_instance``
        # stay the pair the last round computed, so that check(last_instance, last) still holds
        self._forgotten |= {str(int(j)) if isinstance(j, np.integer) else str(j) for j in job_ids}

    @property
    def last_round(self) -> LastRound:
        """The last round's result and the round it was computed on (:class:`LastRound`), for
        ``check(last.instance, last.result)``; :attr:`last` and :attr:`last_instance` without
        their None.

        Raises
        ------
        NoRoundYet
            Before the first round, and after :meth:`reset` (an :class:`OptionError` and an
            :class:`AttributeError`, so ``getattr(policy, "last_round", None)`` is None then).

        >>> from pal_opt.check import check
        >>> from pal_opt.generate import generate_instance
        >>> policy = RoundPolicy("pal")
        >>> result = policy.place(generate_instance(4, 4, 6, seed=1))
        >>> last = policy.last_round
        >>> last.result is result, check(last.instance, last.result)
        (True, [])
        """
        if self.last is None or self.last_instance is None:
            raise NoRoundYet("this policy has placed no round yet (or was reset): last_round exists after place()")
        return LastRound(self.last, self.last_instance)

    @property
    def last_placements(self) -> dict[JobId, tuple[int, ...]]:
        """The last round's placements (empty before the first round)."""
        if self.last is None:
            return {}
        return {k: v for k, v in self.last.placements.items() if str(k) not in self._forgotten}


def _why_not_carried(cl: Any, kept: Job, taken: set[int]) -> str | None:
    """Why running ``kept`` (on the GPUs it ran on last round) cannot be carried, or None.  A job
    on a GPU that failed or was taken since is carried all the same: it must move, and the result
    lists it in ``jobs_to_terminate``."""
    gpus = kept.placement or ()
    if any(g not in cl.position for g in gpus):
        return "a GPU it ran on is no longer in the cluster"
    if taken & set(gpus):
        return "the caller marked another job running on its GPUs"
    error = placement_type_error(cl, kept)  # (its types may have changed)
    return None if error is None else error.message


def _same_job(before: Job, now: Job) -> bool:
    """Whether ``now`` can be the job ``before`` under the same id a round later: demand, GPU
    types and stages may change between rounds; the class, the model and whether the job is a
    pipeline may not."""
    return (before.perfclass == now.perfclass and before.model == now.model
            and (before.pipeline is None) == (now.pipeline is None))


def _blocking(instance: RoundInstance, result: PlacementResult) -> tuple[JobId, int] | None:
    """``(id, waiting)``: the first queued job no round on this cluster can place (unplaceable
    with every GPU in service: not one waiting for failed GPUs to come back) that a queue rule
    stopping at it (prefix, PAL's order, queue order) held queued jobs back behind, and how many
    of them were not placed; None when none was."""
    if not result.unplaceable or result.admission not in ("prefix", "pal-order", "queue-order"):
        return None
    from .admission import unplaceable

    cl = instance.cluster
    never = unplaceable(replace(instance, cluster=cl.with_state(np.full(cl.num_gpus, GpuState.FREE))))
    queued = [j.id for j in instance.jobs if j.placement is None]
    first = next((k for k, jid in enumerate(queued) if jid in result.unplaceable and jid in never), None)
    if first is None:
        return None
    waiting = sum(1 for jid in queued[first + 1:] if jid not in result.placements and jid not in result.unplaceable)
    return (queued[first], waiting) if waiting else None
