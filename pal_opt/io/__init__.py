"""Reading and writing pal-opt's files.

* :mod:`~pal_opt.io.instance` — the instance JSON format (:func:`load_instance`), validated
  against its JSON Schema (:mod:`~pal_opt.io.schema`, ``instance.schema.json``) by
  :mod:`~pal_opt.io.validation`; written by :mod:`~pal_opt.io.instance_write`
  (:func:`save_instance`);
* :mod:`~pal_opt.io.placements` — placement files (:func:`load_placement_file`);
* :mod:`~pal_opt.io.blox` — Blox ``gpu_df`` + job queue CSV importer (:func:`load_blox`), and the
  same from pandas DataFrames (:func:`instance_from_frames`);
* :mod:`~pal_opt.io.jobs` — job queue CSVs (:func:`load_jobs`);
* :mod:`~pal_opt.io.measurements` — PAL's per-run variability measurements;
* :mod:`~pal_opt.io.traces` — Sia-Philly workload traces;
* :mod:`~pal_opt.io.textfile`, :mod:`~pal_opt.io.jsonfile`, :mod:`~pal_opt.io.csvfile` —
  guarded reading (size, encoding, syntax, limits); :mod:`~pal_opt.io.atomic` — atomic writing
  (one file, or a command's outputs all or none).

Every reader turns bad input into :class:`~pal_opt.errors.InstanceError` naming the file, the
field path (or line and column) and what is wrong.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_attributes

# The names load on first use (PEP 562): reading an instance file needs neither pandas nor the
# CSV importers, and a small ``pal-opt solve`` would otherwise spend a third of its time on them.
_EXPORTS: dict[str, str] = {
    "atomic_write_files": ".atomic",
    "atomic_write_json": ".atomic",
    "atomic_write_text": ".atomic",
    "instance_from_frames": ".blox",
    "load_blox": ".blox",
    "read_gpu_table": ".blox",
    "instance_from_dict": ".instance",
    "load_instance": ".instance",
    "instance_to_dict": ".instance_write",
    "save_instance": ".instance_write",
    "load_jobs": ".jobs",
    "load_json": ".jsonfile",
    "load_measurements": ".measurements",
    "longhorn_paths": ".measurements",
    "sample_factors": ".measurements",
    "load_placement_file": ".placements",
    "SCHEMA_PATH": ".schema",
    "instance_schema": ".schema",
    "register_param_schema": ".schema",
    "read_text": ".textfile",
}

if TYPE_CHECKING:
    from .atomic import atomic_write_files, atomic_write_json, atomic_write_text
    from .blox import instance_from_frames, load_blox, read_gpu_table
    from .instance import instance_from_dict, load_instance
    from .instance_write import instance_to_dict, save_instance
    from .jobs import load_jobs
    from .jsonfile import load_json
    from .measurements import load_measurements, longhorn_paths, sample_factors
    from .placements import load_placement_file
    from .schema import SCHEMA_PATH, instance_schema, register_param_schema
    from .textfile import read_text

__all__ = [
    "SCHEMA_PATH",
    "atomic_write_files",
    "atomic_write_json",
    "atomic_write_text",
    "instance_from_dict",
    "instance_from_frames",
    "instance_schema",
    "instance_to_dict",
    "load_blox",
    "load_instance",
    "load_jobs",
    "load_json",
    "load_measurements",
    "load_placement_file",
    "longhorn_paths",
    "read_gpu_table",
    "read_text",
    "register_param_schema",
    "sample_factors",
    "save_instance",
]


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
