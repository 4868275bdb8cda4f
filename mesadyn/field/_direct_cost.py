"""What a model's direct-form field costs to evaluate, stated before anything is built.

Every field of a model other than the paper's is a weighted sum over sequences
(:class:`~._direct.WeightedSequences`: the exact field by quadrature, the Monte-Carlo and the
finite-sample fields), so one rule prices them all: a loss and gradient, or one Hessian-vector
product, costs about

    c · rows · (T − 1) · layers · max(1, d²/4)   seconds on one thread,

``rows`` the weighted sequences (quadrature points, samples or training sequences).  ``c`` is
:data:`FUSED_UNIT` for the gradient of k-layer linear attention on the CPU (the fused kernel,
:mod:`._deep_fused`), :data:`AUTOGRAD_UNIT` for every other model's gradient (autograd through
its forward pass) and :data:`HVP_UNIT` for a Hessian-vector product (autograd, batched over
directions: one Hessian is one product per active entry).  The constants are the largest
per-unit CPU seconds measured, one thread, on the project's 2-core machine for one to three
layers at d = 1, 2, 3, 5 and T = 4 to 100 (``python benchmarks/bench_models.py --calibrate``):
an estimate errs towards the longer side.  Importing this module loads no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import check_int
from ..theory import check_T

if TYPE_CHECKING:
    from ..models import Model

__all__ = ["AUTOGRAD_UNIT", "FUSED_UNIT", "HVP_UNIT", "DirectCost", "direct_cost"]

#: CPU seconds of a gradient of the fused kernel per unit (measured 0.50–1.98e-7 over two
#: calibrations: two layers at d = 5, T = 100 1.0–1.4e-7, three layers at d = 2, T = 6
#: 1.5–2.0e-7).
FUSED_UNIT = 2.0e-7
#: CPU seconds of an autograd gradient per unit (softmax attention: 0.79e-6 at d = 3, T = 20,
#: 1.31e-6 at d = 5, T = 100).
AUTOGRAD_UNIT = 1.4e-6
#: CPU seconds of one Hessian-vector product per unit (batched over directions; 0.80–2.79e-6,
#: the most for three layers at d = 2 and 3).
HVP_UNIT = 3.3e-6


@dataclass(frozen=True)
class DirectCost:
    """Expected CPU seconds of one ``gradient`` (loss and gradient) and one ``hvp`` of a
    direct-form field (:func:`direct_cost`)."""

    gradient: float
    hvp: float

    def hessian(self, n_active: int) -> float:
        """A Hessian: one product per active entry (every other row is exactly 0)."""
        return n_active * self.hvp


def direct_cost(model: Model, d: int, T: int, rows: int) -> DirectCost:
    """The :class:`DirectCost` of ``model``'s direct-form field over ``rows`` weighted sequences
    of length ``T`` at dimension ``d`` (module docstring)."""
    from ..models import DeepLinearAttention

    d, T, rows = check_int("d", d, 1), check_T(T), check_int("rows", rows, 0)
    units = rows * (T - 1) * model.layers * max(1.0, d * d / 4)
    fused = isinstance(model, DeepLinearAttention)
    return DirectCost(gradient=(FUSED_UNIT if fused else AUTOGRAD_UNIT) * units,
                      hvp=HVP_UNIT * units)
