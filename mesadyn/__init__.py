"""mesadyn: the training dynamics of autoregressively trained linear transformers.

The public API is re-exported here; implementation modules are not part of it.  Names are
loaded lazily so that ``import mesadyn`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import MesadynError

#: The package version: its one source (pyproject.toml reads it through ``[tool.hatch.version]``).
__version__ = "0.2.0.dev0"

_EXPORTS: dict[str, str] = {
    # process (Section 3.1)
    "Family": "process", "family": "process", "gaussian": "process", "sparse": "process",
    "rademacher": "process", "uniform": "process", "ones": "process", "fixed": "process",
    "iid": "process", "sampled": "process", "sample": "process", "sequences": "process",
    "make_generator": "process", "default_device": "process", "FAMILIES": "process",
    # model (Section 3.2)
    "diagonal_init": "model", "gaussian_init": "model", "predict": "model",
    "predict_ar": "model", "pack": "model", "unpack": "model", "P_and_A": "model",
    "ab": "model", "block_labels": "model", "active_mask": "model", "diagonal_mask": "model",
    "n_params": "model",
    # closed-form theory (Lemmas 5.2-5.4, Theorems 4.1, 4.3)
    "constants": "theory", "Constants": "theory", "harmonic": "theory",
    "predicted_ratio": "theory",
    # vector fields
    "Field": "field", "FiniteField": "field", "MonteCarloField": "field",
    "ExactField": "field", "make_field": "field", "Estimate": "field",
    # reduced system and flow
    "ReducedSystem": "reduced", "integrate": "flow", "FlowResult": "flow",
    "integrate_reduced": "flow", "ReducedFlowResult": "flow",
    # training protocol (Section 6)
    "train": "train", "TrainResult": "train", "TrainingDiverged": "train", "TABLE1": "train",
    # stability analysis (mesadyn stability)
    "balanced_point": "analysis.fixedpoint", "symmetry_direction": "analysis.fixedpoint",
    "flow_to_fixed_point": "analysis.fixedpoint", "Spectrum": "analysis.spectrum",
    "reduced_spectrum": "analysis.spectrum", "reduced_spectrum_analytic": "analysis.spectrum",
    "pl_trace": "analysis.pl",
    # runs on disk
    "save_run": "io", "load_run": "io",
    # figures (mesadyn.plots; each returns (Figure, Axes))
    "portrait": "plots", "ab_convergence": "plots", "loss_curves": "plots",
    "weight_heatmaps": "plots", "jacobian_spectrum": "plots", "incontext_curves": "plots",
    # parameter sweeps on Dask (mesadyn sweep)
    "run_sweep": "sweep", "load_spec": "sweep", "load_sweep": "sweep",
}

__all__ = ["MesadynError", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mesadyn' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
