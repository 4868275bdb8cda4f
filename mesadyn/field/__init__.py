"""Population-loss vector fields behind one interface (:class:`Field`).

Build a field with ``make_field(FieldSpec(kind, family, T, ...))``; it is reused within the
process (:func:`cache_stats`).  Capabilities are declared on :class:`Field`
(``has_exact_hessian``, ``has_jax_loss``).  Every kind runs on the CPU unless its ``device``
asks for another (:func:`mesadyn.device.resolve_device`: the one device policy, resolved once
by :class:`FieldSpec`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._spec import FieldKind as FieldKind
from ._spec import FieldSpec as FieldSpec
from ._spec import check_samples as check_samples

if TYPE_CHECKING:
    from ._base import CapabilityError as CapabilityError
    from ._base import Field as Field
    from ._base import JaxLoss as JaxLoss
    from ._device import check_device as check_device
    from ._device import check_fits as check_fits
    from ._device import device_free_bytes as device_free_bytes
    from ._direct_cost import DirectCost as DirectCost
    from ._direct_cost import direct_cost as direct_cost
    from ._fd import FiniteDifferenceHessian as FiniteDifferenceHessian
    from ._fd import fd_hessian as fd_hessian
    from ._forms import Form as Form
    from ._forms import FormChoice as FormChoice
    from ._forms import choose_form as choose_form
    from ._memory import MemoryBudget as MemoryBudget
    from ._memory import memory_budget as memory_budget
    from ._model_fields import FiniteModelField as FiniteModelField
    from ._model_fields import MonteCarloModelField as MonteCarloModelField
    from ._quadrature_field import QuadratureField as QuadratureField
    from ._quadrature_field import quadrature_plan as quadrature_plan
    from ._reuse import CacheStats as CacheStats
    from ._reuse import cache_stats as cache_stats
    from ._reuse import clear_cache as clear_cache
    from ._reuse import make_field as make_field
    from ._sampled import MonteCarloDraws as MonteCarloDraws
    from ._sampled import SampledField as SampledField
    from ._sequences import FiniteSequenceField as FiniteSequenceField
    from ._sequences import MonteCarloSequenceField as MonteCarloSequenceField
    from ._sequences import SequenceField as SequenceField
    from .exact import ExactField as ExactField
    from .finite import FiniteField as FiniteField
    from .montecarlo import Estimate as Estimate
    from .montecarlo import MonteCarloField as MonteCarloField

#: Public name -> its module in this package, imported on first use: a ``FieldSpec`` is cheap to
#: build and check (the CLI validates one before any work), while the fields need torch.
_LAZY: dict[str, str] = {
    "CapabilityError": "_base",
    "Field": "_base",
    "JaxLoss": "_base",
    "check_device": "_device",
    "check_fits": "_device",
    "device_free_bytes": "_device",
    "DirectCost": "_direct_cost",
    "direct_cost": "_direct_cost",
    "FiniteDifferenceHessian": "_fd",
    "fd_hessian": "_fd",
    "MemoryBudget": "_memory",
    "FiniteModelField": "_model_fields",
    "MonteCarloModelField": "_model_fields",
    "QuadratureField": "_quadrature_field",
    "quadrature_plan": "_quadrature_field",
    "memory_budget": "_memory",
    "CacheStats": "_reuse",
    "cache_stats": "_reuse",
    "clear_cache": "_reuse",
    "make_field": "_reuse",
    "Form": "_forms",
    "FormChoice": "_forms",
    "MonteCarloDraws": "_sampled",
    "SampledField": "_sampled",
    "choose_form": "_forms",
    "FiniteSequenceField": "_sequences",
    "MonteCarloSequenceField": "_sequences",
    "SequenceField": "_sequences",
    "ExactField": "exact",
    "FiniteField": "finite",
    "Estimate": "montecarlo",
    "MonteCarloField": "montecarlo",
}

__all__ = ["CacheStats", "CapabilityError", "DirectCost", "Estimate", "ExactField", "Field",
           "FieldKind",
           "FieldSpec", "FiniteDifferenceHessian", "FiniteField", "FiniteModelField",
           "FiniteSequenceField", "Form", "FormChoice", "JaxLoss", "MemoryBudget",
           "MonteCarloDraws", "MonteCarloField", "MonteCarloModelField", "MonteCarloSequenceField",
           "QuadratureField", "SampledField", "SequenceField", "cache_stats", "check_device",
           "check_fits", "check_samples", "choose_form", "clear_cache", "device_free_bytes",
           "direct_cost",
           "fd_hessian", "make_field", "memory_budget", "quadrature_plan"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
