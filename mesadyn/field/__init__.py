"""Population-loss vector fields behind one interface (:class:`Field`).

Build a field with ``make_field(FieldSpec(kind, family, T, ...))``; it is reused within the
process (:func:`cache_stats`).  Capabilities are declared on :class:`Field`
(``has_exact_hessian``, ``has_jax_loss``).
"""

from __future__ import annotations

from ._base import CapabilityError as CapabilityError
from ._base import Field as Field
from ._base import JaxLoss as JaxLoss
from ._fd import FiniteDifferenceHessian as FiniteDifferenceHessian
from ._fd import fd_hessian as fd_hessian
from ._memory import MemoryBudget as MemoryBudget
from ._memory import memory_budget as memory_budget
from ._reuse import CacheStats as CacheStats
from ._reuse import cache_stats as cache_stats
from ._reuse import clear_cache as clear_cache
from ._reuse import make_field as make_field
from ._sampled import Form as Form
from ._sampled import FormChoice as FormChoice
from ._sampled import SampledField as SampledField
from ._sampled import choose_form as choose_form
from ._spec import FieldKind as FieldKind
from ._spec import FieldSpec as FieldSpec
from .exact import ExactField as ExactField
from .finite import FiniteField as FiniteField
from .montecarlo import Estimate as Estimate
from .montecarlo import MonteCarloField as MonteCarloField

__all__ = ["CacheStats", "CapabilityError", "Estimate", "ExactField", "Field", "FieldKind",
           "FieldSpec", "FiniteDifferenceHessian", "FiniteField", "Form", "FormChoice",
           "JaxLoss", "MemoryBudget", "MonteCarloField", "SampledField", "cache_stats",
           "choose_form", "clear_cache", "fd_hessian", "make_field", "memory_budget"]
