"""The token families the exact fields are checked on (every family with an exact rule, at
parameters away from the paper's defaults), and the relative difference they are compared
by."""

from __future__ import annotations

import torch

from mesadyn.process import gaussian, mixture, ones, rademacher, shifted, sparse, uniform

FAMILIES = {
    "gaussian": lambda d: gaussian(d, 0.9),
    "rademacher": rademacher,
    "uniform": uniform,
    "sparse": lambda d: sparse(d, 1.2),
    "ones": ones,
    "shifted": lambda d: shifted(d, 0.4, 0.8),
    "mixture": lambda d: mixture([(0.3, ones(d)), (0.7, gaussian(d, 0.8))]),
}


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """``max|a − b| / max|b|``."""
    return float((a - b).abs().max() / b.abs().max())
