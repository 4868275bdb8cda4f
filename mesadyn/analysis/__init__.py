"""Analyses that take a field or a trained θ and a point, and measure something the paper states.

One module per analysis; its public names are its own ``__all__`` (``from
mesadyn.analysis.continuation import follow``).  The modules are listed here and imported on
first use (``mesadyn.analysis.spectrum`` works after ``import mesadyn.analysis``), because
every one of them needs torch and importing this package must stay cheap:

- :mod:`mesadyn.analysis.assumption42` — Assumption 4.2 for any family, exactly (rademacher
  satisfies it, uniform does not).
- :mod:`mesadyn.analysis.continuation` — fixed points followed through a data parameter
  (pseudo-arclength transverse to the scaling symmetries): folds, branch points, the branches
  that emerge there, and the spectrum along every branch.
- :mod:`mesadyn.analysis.ensemble` — ensembles of full-flow runs: where the flow goes, with
  what frequency, and when it leaves the saddle.
- :mod:`mesadyn.analysis.fixedpoint` — Newton refinement of fixed points, the scaling-symmetry
  direction ``(P, −A)``, the balanced point of Theorems 4.1/4.3, the flow to a fixed point.
- :mod:`mesadyn.analysis.gd_flow` — gradient descent against the gradient flow it discretises
  and its modified flow (backward error analysis).
- :mod:`mesadyn.analysis.central_flow` — the central flow of GD at the edge of stability
  (Cohen et al. 2025), with exact third derivatives.
- :mod:`mesadyn.analysis.gd_batch` — GD regimes for many starts and step sizes at once (the
  reduced map vectorised, the exact field batched).
- :mod:`mesadyn.analysis.gd_landing` — where GD lands on the minimiser set against η.
- :mod:`mesadyn.analysis.gd_limits` — GD's stability limits over the minimiser set: the
  full-space critical step against the reduced one, the deciding mode, the stable part.
- :mod:`mesadyn.analysis.gd_map` — gradient descent at a finite step size as a map: its
  Jacobian, linear stability and the critical step ``η* = 2/λ_max``.
- :mod:`mesadyn.analysis.gd_orbits` — period-k orbits of the GD map by Newton, the flip
  (period-doubling) point and the period-2 branch.
- :mod:`mesadyn.analysis.gd_regime` — a GD run's trace and its regime.
- :mod:`mesadyn.analysis.gd_fit` — the k (preconditioned) GD steps on the in-context least
  squares closest to a prediction (von Oswald et al.; Ahn et al.).
- :mod:`mesadyn.analysis.gd_iterates` — those steps, ``W_{j+1} = W_j − Λ_j ∇L_OLS Γ_j/(t−1)``,
  by autodiff and in closed form with its exact Jacobian.
- :mod:`mesadyn.analysis.horizon` — how long to integrate the full flow when no ``t_end`` is
  given (the reduced system's settling times, Proposition 4.2's factor).
- :mod:`mesadyn.analysis.incontext` — in-context evaluation of a trained θ: the Proposition 4.1
  ratio ``E[(ŷ_{T_te})_j / (W x_{T_te})_j]`` with a standard error, and the test MSE against the
  test context length ``T_te`` (Theorem 4.2).
- :mod:`mesadyn.analysis.mesa` — the trained transformer as a mesa-optimizer (Corollary 4.1).
- :mod:`mesadyn.analysis.model_mesa` — every model of :mod:`mesadyn.models` as a
  mesa-optimizer: the k-step GD fit of its prediction, Proposition 4.1's ratio and the MSE.
- :mod:`mesadyn.analysis.model_ensemble` — where an ensemble of any model ends: the verdict
  at a stop, the model's own geometry, the end points grouped into fixed points by their loss.
- :mod:`mesadyn.analysis.model_fixedpoint` — Newton's method and the curvature verdict (minimum
  or saddle) of any model, its declared symmetries projected out.
- :mod:`mesadyn.analysis.model_spectrum` — the spectrum of ``−∇²L`` at a point of any model,
  its zero modes explained by the inactive entries, the unused ones and the model's symmetries.
- :mod:`mesadyn.analysis.pl` — Lemma 5.4's PL ratio along a trajectory, measured vs linearised
  convergence rates.
- :mod:`mesadyn.analysis.spectrum` — spectra of the Jacobian ``−∇²L`` (reduced closed form and
  full θ) with zero/stable/unstable classification and the zero modes explained.
- :mod:`mesadyn.analysis.stability` — the stability report of a fixed point, and Proposition
  4.2's released dense point.
- :mod:`mesadyn.analysis.steady` — where a flow stopped: a minimum, a saddle, or no fixed
  point at all (a small gradient is not a minimum).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import assumption42 as assumption42
    from . import central_flow as central_flow
    from . import continuation as continuation
    from . import ensemble as ensemble
    from . import fixedpoint as fixedpoint
    from . import gd_batch as gd_batch
    from . import gd_fit as gd_fit
    from . import gd_flow as gd_flow
    from . import gd_iterates as gd_iterates
    from . import gd_landing as gd_landing
    from . import gd_limits as gd_limits
    from . import gd_map as gd_map
    from . import gd_orbits as gd_orbits
    from . import gd_regime as gd_regime
    from . import horizon as horizon
    from . import incontext as incontext
    from . import mesa as mesa
    from . import model_ensemble as model_ensemble
    from . import model_fixedpoint as model_fixedpoint
    from . import model_mesa as model_mesa
    from . import model_spectrum as model_spectrum
    from . import pl as pl
    from . import spectrum as spectrum
    from . import stability as stability
    from . import steady as steady

__all__ = ["assumption42", "central_flow", "continuation", "ensemble", "fixedpoint",
           "gd_batch", "gd_fit", "gd_flow", "gd_iterates", "gd_landing", "gd_limits", "gd_map",
           "gd_orbits", "gd_regime", "horizon", "incontext", "mesa", "model_ensemble",
           "model_fixedpoint", "model_mesa", "model_spectrum", "pl", "spectrum", "stability",
           "steady"]


def __getattr__(name: str) -> ModuleType:
    if name in __all__:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
