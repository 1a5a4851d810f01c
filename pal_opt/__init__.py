"""pal-opt: variability- and locality-aware placement of ML training jobs on GPU clusters."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pal-opt")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"
