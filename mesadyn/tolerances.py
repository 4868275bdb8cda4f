"""Numerical policies that several layers share, each declared once here.

- :data:`ZERO_RTOL` — an eigenvalue of ``∇²L`` with ``|μ| <= ZERO_RTOL · max|μ|`` is a zero
  mode (a flat direction of the loss's symmetries, or a parameter the loss ignores).  At the
  fixed points of Theorems 4.1 and 4.3 the symmetry modes sit at rounding level (~1e-15
  relative) and the smallest genuine curvature at ~1e-4 relative (d = 5, T = 100), so 1e-8
  separates them with room on both sides (``docs/stability.md``).  Used by the spectrum
  classifier, the stiffness ratio, continuation's stability signature and the flow's
  relaxation time; ``mesadyn stability --zero-rtol`` overrides it for one run.
"""

from __future__ import annotations

__all__ = ["ZERO_RTOL"]

#: Zero-mode threshold relative to the largest |eigenvalue| of the Hessian.
ZERO_RTOL = 1e-8
