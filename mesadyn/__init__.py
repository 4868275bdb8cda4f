"""mesadyn: the training dynamics of autoregressively trained linear transformers.

The public API is listed here (and in the ``__all__`` of :mod:`mesadyn.field`,
:mod:`mesadyn.flow`, :mod:`mesadyn.workflows` and :mod:`mesadyn.plots`); implementation modules
are not part of it.  Type checkers and IDEs see every name through the ``TYPE_CHECKING``
imports below; at run time names load on first use, so ``import mesadyn`` stays cheap (no
torch, no scipy).  The analyses as typed ``Config -> run -> Result`` calls are in
:mod:`mesadyn.workflows`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import MesadynError

#: The package version: its one source (pyproject.toml reads it through ``[tool.hatch.version]``).
__version__ = "0.3.0.dev0"

if TYPE_CHECKING:
    from . import workflows as workflows

    # fixed points
    from .analysis.fixedpoint import balanced_point as balanced_point
    from .analysis.fixedpoint import flow_to_fixed_point as flow_to_fixed_point
    from .analysis.fixedpoint import symmetry_direction as symmetry_direction

    # gradient descent against the gradient flow (backward error analysis)
    from .analysis.gd_flow import GDFlowComparison as GDFlowComparison
    from .analysis.gd_flow import GDFlowGap as GDFlowGap
    from .analysis.gd_flow import ModifiedField as ModifiedField
    from .analysis.gd_flow import PowerFit as PowerFit
    from .analysis.gd_flow import compare_gd_flow as compare_gd_flow
    from .analysis.gd_flow import endpoint_spread as endpoint_spread
    from .analysis.gd_flow import fit_power_law as fit_power_law
    from .analysis.gd_flow import gd_iterates as gd_iterates

    # the PL inequality (Lemma 5.4)
    from .analysis.pl import pl_trace as pl_trace

    # spectra of −∇²L
    from .analysis.spectrum import Spectrum as Spectrum
    from .analysis.spectrum import classify as classify
    from .analysis.spectrum import reduced_spectrum as reduced_spectrum
    from .analysis.spectrum import reduced_spectrum_analytic as reduced_spectrum_analytic

    # where tensors live: the one device policy (the CPU unless asked), seeded generators
    from .device import make_generator as make_generator
    from .device import resolve_device as resolve_device

    # vector fields: one way to build them (FieldSpec, make_field)
    from .field import Estimate as Estimate
    from .field import ExactField as ExactField
    from .field import Field as Field
    from .field import FieldKind as FieldKind
    from .field import FieldSpec as FieldSpec
    from .field import FiniteDifferenceHessian as FiniteDifferenceHessian
    from .field import FiniteField as FiniteField
    from .field import FiniteSequenceField as FiniteSequenceField
    from .field import MonteCarloField as MonteCarloField
    from .field import MonteCarloSequenceField as MonteCarloSequenceField
    from .field import SampledField as SampledField
    from .field import cache_stats as cache_stats
    from .field import clear_cache as clear_cache
    from .field import make_field as make_field

    # the gradient flow dθ/dτ = −∇L
    from .flow import BatchFlowResult as BatchFlowResult
    from .flow import FlowOptions as FlowOptions
    from .flow import FlowResult as FlowResult
    from .flow import ReducedFlowResult as ReducedFlowResult
    from .flow import SolverStats as SolverStats
    from .flow import default_solver as default_solver
    from .flow import integrate as integrate
    from .flow import integrate_batch as integrate_batch
    from .flow import integrate_reduced as integrate_reduced
    from .flow import solver_names as solver_names

    # runs on disk
    from .io import load_run as load_run
    from .io import save_run as save_run

    # the model of Section 3.2: θ layout, blocks, masks, inits, geometry
    from .model import Mask as Mask
    from .model import P_and_A as P_and_A
    from .model import ab as ab
    from .model import active_mask as active_mask
    from .model import block_labels as block_labels
    from .model import diagonal_entries as diagonal_entries
    from .model import diagonal_init as diagonal_init
    from .model import diagonal_mask as diagonal_mask
    from .model import free_mask as free_mask
    from .model import gaussian_init as gaussian_init
    from .model import invariant as invariant
    from .model import n_params as n_params
    from .model import pack as pack
    from .model import predict as predict
    from .model import predict_ar as predict_ar
    from .model import predict_ar_at as predict_ar_at
    from .model import unpack as unpack

    # how runs end: the one outcome vocabulary
    from .outcome import Outcome as Outcome

    # figures (each returns (Figure, Axes))
    from .plots import ab_convergence as ab_convergence
    from .plots import incontext_curves as incontext_curves
    from .plots import jacobian_spectrum as jacobian_spectrum
    from .plots import loss_curves as loss_curves
    from .plots import portrait as portrait
    from .plots import spectra_panels as spectra_panels
    from .plots import weight_heatmaps as weight_heatmaps

    # the paper's process (Section 3.1) and the data models beyond it
    from .process import FAMILIES as FAMILIES
    from .process import Family as Family
    from .process import FamilyName as FamilyName
    from .process import Rotation as Rotation
    from .process import family as family
    from .process import fixed as fixed
    from .process import gaussian as gaussian
    from .process import iid as iid
    from .process import mixture as mixture
    from .process import moments as moments
    from .process import ones as ones
    from .process import rademacher as rademacher
    from .process import sample as sample
    from .process import sample_sequences as sample_sequences
    from .process import sampled as sampled
    from .process import sequences as sequences
    from .process import shifted as shifted
    from .process import sparse as sparse
    from .process import uniform as uniform

    # the reduced 2-D system of Lemma 5.2
    from .reduced import ReducedSystem as ReducedSystem

    # parameter sweeps on Dask
    from .sweep import load_spec as load_spec
    from .sweep import load_sweep as load_sweep
    from .sweep import run_sweep as run_sweep

    # closed-form theory (Lemmas 5.2-5.4, Theorems 4.1, 4.3)
    from .theory import Constants as Constants
    from .theory import constants as constants
    from .theory import harmonic as harmonic
    from .theory import predicted_ratio as predicted_ratio

    # the paper's GD protocol (Section 6)
    from .train import TABLE1 as TABLE1
    from .train import TrainingDiverged as TrainingDiverged
    from .train import TrainResult as TrainResult
    from .train import train as train
    from .train import train_batch as train_batch

#: Public name -> the module (relative to ``mesadyn``) that defines it.
_EXPORTS: dict[str, str] = {
    "workflows": "",
    # the paper's process (Section 3.1) and the data models beyond it
    "FAMILIES": "process", "Family": "process", "FamilyName": "process", "Rotation": "process",
    "family": "process", "fixed": "process", "gaussian": "process", "iid": "process",
    "mixture": "process", "moments": "process", "ones": "process", "rademacher": "process",
    "sample": "process", "sample_sequences": "process", "sampled": "process",
    "sequences": "process", "shifted": "process", "sparse": "process", "uniform": "process",
    # where tensors live: the one device policy (the CPU unless asked), seeded generators
    "make_generator": "device", "resolve_device": "device",
    # the model of Section 3.2: θ layout, blocks, masks, inits, geometry
    "Mask": "model", "P_and_A": "model", "ab": "model", "active_mask": "model",
    "block_labels": "model", "diagonal_entries": "model", "diagonal_init": "model",
    "diagonal_mask": "model", "free_mask": "model", "gaussian_init": "model", "invariant": "model",
    "n_params": "model", "pack": "model", "predict": "model", "predict_ar": "model",
    "predict_ar_at": "model", "unpack": "model",
    # closed-form theory (Lemmas 5.2-5.4, Theorems 4.1, 4.3)
    "Constants": "theory", "constants": "theory", "harmonic": "theory",
    "predicted_ratio": "theory",
    # the reduced 2-D system of Lemma 5.2
    "ReducedSystem": "reduced",
    # vector fields: one way to build them (FieldSpec, make_field)
    "Estimate": "field", "ExactField": "field", "Field": "field", "FieldKind": "field",
    "FieldSpec": "field", "FiniteDifferenceHessian": "field", "FiniteField": "field",
    "FiniteSequenceField": "field", "MonteCarloField": "field",
    "MonteCarloSequenceField": "field", "SampledField": "field", "cache_stats": "field",
    "clear_cache": "field", "make_field": "field",
    # the gradient flow dθ/dτ = −∇L
    "BatchFlowResult": "flow", "FlowOptions": "flow", "FlowResult": "flow",
    "ReducedFlowResult": "flow", "SolverStats": "flow", "default_solver": "flow",
    "integrate": "flow", "integrate_batch": "flow", "integrate_reduced": "flow",
    "solver_names": "flow",
    # the paper's GD protocol (Section 6)
    "TABLE1": "train", "TrainResult": "train", "TrainingDiverged": "train", "train": "train",
    "train_batch": "train",
    # fixed points
    "balanced_point": "analysis.fixedpoint", "flow_to_fixed_point": "analysis.fixedpoint",
    "symmetry_direction": "analysis.fixedpoint",
    # spectra of −∇²L
    "Spectrum": "analysis.spectrum", "classify": "analysis.spectrum",
    "reduced_spectrum": "analysis.spectrum", "reduced_spectrum_analytic": "analysis.spectrum",
    # gradient descent against the gradient flow (backward error analysis)
    "GDFlowComparison": "analysis.gd_flow", "GDFlowGap": "analysis.gd_flow",
    "ModifiedField": "analysis.gd_flow", "PowerFit": "analysis.gd_flow",
    "compare_gd_flow": "analysis.gd_flow", "endpoint_spread": "analysis.gd_flow",
    "fit_power_law": "analysis.gd_flow", "gd_iterates": "analysis.gd_flow",
    # the PL inequality (Lemma 5.4)
    "pl_trace": "analysis.pl",
    # how runs end: the one outcome vocabulary
    "Outcome": "outcome",
    # runs on disk
    "load_run": "io", "save_run": "io",
    # figures (each returns (Figure, Axes))
    "ab_convergence": "plots", "incontext_curves": "plots", "jacobian_spectrum": "plots",
    "loss_curves": "plots", "portrait": "plots", "spectra_panels": "plots",
    "weight_heatmaps": "plots",
    # parameter sweeps on Dask
    "load_spec": "sweep", "load_sweep": "sweep", "run_sweep": "sweep",
}

__all__ = ["MesadynError", "__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mesadyn' has no attribute {name!r}")
    if not module:  # a subpackage
        value: Any = importlib.import_module(f".{name}", __name__)
    else:
        value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
