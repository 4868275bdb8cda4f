"""The two forms of a sampled field and the cost model that chooses between them, with the
memory estimates of the draws (``docs/sampled-fields.md``).

A sampled field evaluates its loss in **polynomial** form (empirical moment tensors built once)
or **direct** form (the per-sequence loss, chunk by chunk); :func:`choose_form` estimates both
and picks the cheaper for a Hessian and a short run.  :func:`sequence_bytes` and
:func:`device_bytes` bound what the draws and one chunk of the direct path take
(:func:`~._sampled.check_draws_fit` refuses what does not fit, before anything is drawn).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..budget import chunk_size, sequence_bytes
from ._memory import memory_budget

__all__ = ["Form", "FormChoice", "choose_form", "default_chunk", "device_bytes",
           "sequence_bytes"]


class Form(enum.StrEnum):
    """How a sampled field evaluates its loss (see the module docstring)."""

    AUTO = "auto"
    POLYNOMIAL = "polynomial"
    DIRECT = "direct"


# ---- the cost model --------------------------------------------------------------------
#: Seconds on one core of the project's 2-core machine.  Per row ``(draw, t)``: a direct
#: loss+gradient costs ``COST_DIRECT_ROW + COST_DIRECT_D2·d²`` (the fused kernel,
#: :mod:`._fused`; fitted on 2026-11-30 to one-thread CPU seconds of
#: ``FiniteField(..., form="direct").loss_and_grad`` at d = 2..16, T = 20..100, within a factor
#: 2 of each, ``docs/sampled-fields.md``); a direct Hessian-vector product (double backward
#: through torch's batched path) costs :data:`HVP_GRADIENTS` of those.  The polynomial build
#: costs ``COST_BUILD_GEMM·n⁶`` (the product ``SᵀS``) ``+ COST_BUILD_ROWS·n³`` (forming the
#: rows), ``n = 2d``, and a polynomial loss+gradient ``COST_POLY_FIXED + COST_POLY·n⁶`` whatever
#: the draws; their ratios were fitted to ``benchmarks/bench_sampled.py`` under load and their
#: common scale re-measured on a lightly loaded machine.
_SCALE = 1 / 12
COST_DIRECT_ROW = 6.0e-8
COST_DIRECT_D2 = 6.0e-9
#: A direct HVP costs about this many direct loss+gradient evaluations: measured 12.5 at
#: (d, T, N) = (5, 100, 1000) and 15 at (4, 50, 5000).
HVP_GRADIENTS = 12
#: A draw with one nonzero entry of x_1 costs the direct path about this many rows (its closed
#: sum over t): 0.029 against 0.13 CPU-s per loss+gradient at d = 5, T = 100, m = 10⁴, i.e.
#: ≈ 14 of the 98 rows of a dense draw.
SINGLE_COORDINATE_ROWS = 14
COST_BUILD_GEMM = 7.0e-10 * _SCALE
COST_BUILD_ROWS = 6.5e-7 * _SCALE
COST_POLY = 2.0e-8 * _SCALE
COST_POLY_FIXED = 4.0e-4 * _SCALE
#: Besides one Hessian (6d² Hessian-vector products), the polynomial must pay for itself
#: within this many more evaluations (a short run).
PAYBACK_EXTRA = 100


@dataclass(frozen=True)
class FormChoice:
    """The cost model's estimates (seconds, bytes) and the form it chose, with why."""

    form: Form
    reason: str
    direct_eval_s: float
    poly_eval_s: float
    build_s: float
    build_bytes: int
    payback_evals: int


def choose_form(d: int, T: int, m: int, *, single: int = 0,
                budget_bytes: int | None = None) -> FormChoice:
    """Polynomial or direct for ``m`` draws at ``(d, T)``: the polynomial when its tensors fit in
    half the memory budget and it is the cheaper for one Hessian (6d² Hessian-vector products)
    and :data:`PAYBACK_EXTRA` more evaluations: its build plus ``12 d² + PAYBACK_EXTRA``
    polynomial evaluations against ``6 d² HVP_GRADIENTS + PAYBACK_EXTRA`` direct ones.

    The build and a direct evaluation both grow like ``m (T−2)``, so the break-even number of
    evaluations depends on ``d`` alone; the choice is direct where the tensors do not fit,
    where ``m (T−2)`` is so small that a direct evaluation is cheaper than a polynomial one, or
    for d >= 11 (``docs/sampled-fields.md``).  ``single`` of the draws have at most one nonzero
    entry of ``x_1`` (Example 4.1's sparse draws): the direct path sums their t in closed form
    (:class:`~._ar_kernels.ARBatch`), at about :data:`SINGLE_COORDINATE_ROWS` rows' cost each.
    """
    from ._empirical import build_bytes

    n = 2 * d
    rows = m * (T - 2)
    direct_rows = (m - single) * (T - 2) + single * min(T - 2, SINGLE_COORDINATE_ROWS)
    direct = direct_rows * (COST_DIRECT_ROW + COST_DIRECT_D2 * d * d)
    build = rows * (COST_BUILD_GEMM * n**6 + COST_BUILD_ROWS * n**3)
    poly = COST_POLY_FIXED + COST_POLY * n**6
    k = 12 * d * d + PAYBACK_EXTRA
    k_direct = 6 * d * d * HVP_GRADIENTS + PAYBACK_EXTRA
    need = build_bytes(d)
    limit = memory_budget().bytes if budget_bytes is None else int(budget_bytes)

    def choice(form: Form, reason: str) -> FormChoice:
        return FormChoice(form, reason, direct, poly, build, need, k)

    if need > limit // 2:
        return choice(Form.DIRECT, f"the tensors need about {need / 2**30:.2g} GiB, more than "
                      f"half the {limit / 2**30:.2g} GiB available")
    work = (f"a Hessian and {PAYBACK_EXTRA} evaluations ({direct:.3g} s per direct "
            f"loss+gradient, {poly:.3g} s per polynomial one)")
    if build + k * poly >= k_direct * direct:
        return choice(Form.DIRECT, f"the build ({build:.3g} s) does not pay back within {work}")
    return choice(Form.POLYNOMIAL, f"the build ({build:.3g} s) pays back within {work}")


#: Sequences per chunk of the direct path: at most 128 MiB of :func:`sequence_bytes` (the one
#: estimate of a sequence's bytes, :func:`mesadyn.budget.sequence_bytes`), one at least
#: (:func:`mesadyn.budget.chunk_size`).
default_chunk = chunk_size


def device_bytes(d: int, T: int, m: int, *, chunk: int, form: Form, cached: bool) -> int:
    """Bytes a sampled field of ``m`` draws holds on its device at once (an estimate): the
    draws (``24 m d``), every chunk's :class:`~._ar_kernels.ARBatch` if ``cached``, one chunk's
    batch and a working set of the same size for its backward pass, and in the polynomial form
    the build of Ĝ, Ĉ (:func:`~mesadyn.field._empirical.build_bytes`)."""
    from ._empirical import build_bytes

    per_seq = sequence_bytes(d, T)
    need = 24 * m * d + 2 * per_seq * chunk + (per_seq * m if cached else 0)
    return need + (build_bytes(d) if form is Form.POLYNOMIAL else 0)
