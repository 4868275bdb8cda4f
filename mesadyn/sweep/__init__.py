"""Parameter sweeps over mesadyn's workflows on a Dask cluster (``mesadyn sweep``).

:func:`load_spec` reads and validates a TOML spec, :func:`run_sweep` runs its points (a local
Dask cluster by default, or an existing scheduler), storing each point atomically as it
finishes and skipping points already done, and :func:`load_sweep` reads the merged Dataset.
"""

from __future__ import annotations

from .merge import load_sweep, merge_records
from .runner import SweepResult, read_records, run_point, run_sweep, scan_records
from .spec import Point, Spec, load_spec, parse_spec

__all__ = ["Point", "Spec", "SweepResult", "load_spec", "load_sweep", "merge_records",
           "parse_spec", "read_records", "run_point", "run_sweep", "scan_records"]
