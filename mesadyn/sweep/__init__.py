"""Parameter sweeps over mesadyn's workflows (``mesadyn sweep``).

:func:`load_spec` reads and validates a TOML spec (:mod:`~mesadyn.sweep.spec`: the grammar;
its targets are the workflows of :data:`mesadyn.workflows.REGISTRY`), :func:`run_sweep` runs
its points (a local Dask cluster by default, or an existing scheduler), storing each point
atomically as it finishes and skipping points already done, and :func:`load_sweep` reads the
merged Dataset.  :func:`sweep_sigma` is the ensemble's own small sweep, one ensemble per σ_w
in this process (``mesadyn ensemble --sigma-w 1e-2,1e-4``).
"""

from __future__ import annotations

from .merge import load_sweep as load_sweep
from .merge import merge_records as merge_records
from .records import read_records as read_records
from .records import scan_records as scan_records
from .runner import SweepResult as SweepResult
from .runner import local_cluster as local_cluster
from .runner import run_point as run_point
from .runner import run_sweep as run_sweep
from .sigma import SigmaSweep as SigmaSweep
from .sigma import sigma_out as sigma_out
from .sigma import sigma_values as sigma_values
from .sigma import sweep_sigma as sweep_sigma
from .spec import Point as Point
from .spec import Spec as Spec
from .spec import load_spec as load_spec
from .spec import parse_spec as parse_spec

__all__ = ["Point", "SigmaSweep", "Spec", "SweepResult", "load_spec", "load_sweep",
           "local_cluster", "merge_records", "parse_spec", "read_records", "run_point",
           "run_sweep", "scan_records", "sigma_out", "sigma_values", "sweep_sigma"]
