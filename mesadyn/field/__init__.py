"""Population-loss vector fields behind one interface (:class:`Field`)."""

from ._base import Field
from .finite import FiniteField, SampledField
from .montecarlo import Estimate, MonteCarloField

__all__ = ["Estimate", "Field", "FiniteField", "MonteCarloField", "SampledField"]
