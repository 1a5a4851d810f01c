"""Reading and writing pal-opt's files.

* :mod:`~pal_opt.io.instance` — the instance JSON format (:func:`load_instance`,
  :func:`save_instance`) and its schema ``instance.schema.json``;
* :mod:`~pal_opt.io.blox` — Blox ``gpu_df`` + job queue CSV importer (:func:`load_blox`), and the
  same from pandas DataFrames (:func:`instance_from_frames`);
* :mod:`~pal_opt.io.jobs` — job queue CSVs (:func:`load_jobs`);
* :mod:`~pal_opt.io.measurements` — PAL's per-run variability measurements;
* :mod:`~pal_opt.io.safe` — guarded reading and atomic writing.

Every reader turns bad input into :class:`~pal_opt.errors.InstanceError` naming the file, the
field path (or line and column) and what is wrong.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from .blox import instance_from_frames, load_blox, read_gpu_table
from .instance import (
    instance_from_dict,
    instance_to_dict,
    load_instance,
    load_placement_file,
    save_instance,
)
from .jobs import load_jobs
from .measurements import load_measurements, longhorn_paths, sample_factors
from .safe import atomic_write_text, load_json, read_text

__all__ = [
    "SCHEMA_PATH",
    "atomic_write_text",
    "instance_from_dict",
    "instance_from_frames",
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
    "sample_factors",
    "save_instance",
]

#: The instance format's JSON Schema (draft 2020-12), shipped with the package.
SCHEMA_PATH: Path = Path(str(files(__package__).joinpath("instance.schema.json")))
