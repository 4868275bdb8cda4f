"""One batched step of the Rosenbrock method RODAS 4(3) (E. Hairer and G. Wanner, *Solving
Ordinary Differential Equations II*, 2nd ed., Springer 1996; the coefficients of their code
``rodas.f``, ``METH = 1``): L-stable and stiffly accurate, with one batched LU of
``I/(hγ) − J`` per step and row.  :func:`~mesadyn.flow.integrate_batch` drives it
(``method="rodas4"``) with per-row error control.  torch (the batched LU) is imported when a
step runs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# RODAS (Hairer & Wanner, rodas.f, METH = 1) in the form without Jacobian–vector products:
# (I/(hγ) − J) k_i = f(y + Σ_j a_ij k_j) + Σ_j (c_ij / h) k_j, y_new = y + Σ m_i k_i with
# m = (a_51, …, a_54, 1, 1) (stiffly accurate: stage 6's argument plus k_6), error k_6.
_R_GAMMA = 0.25
_R_A = [np.array([]), np.array([1.544]),
        np.array([0.9466785280815826, 0.2557011698983284]),
        np.array([3.314825187068521, 2.896124015972201, 0.9986419139977817]),
        np.array([1.221224509226641, 6.019134481288629, 12.53708332932087,
                  -0.6878860361058950]),
        np.array([1.221224509226641, 6.019134481288629, 12.53708332932087,
                  -0.6878860361058950, 1.0])]
_R_C = [np.array([]), np.array([-5.6688]),
        np.array([-2.430093356833875, -0.2063599157091915]),
        np.array([-0.1073529058151375, -9.594562251023355, -20.47028614809616]),
        np.array([7.496443313967647, -10.24680431464352, -33.99990352819905,
                  11.70890893206160]),
        np.array([8.083246795921522, -7.981132988064893, -31.52159432874371,
                  16.31930543123136, -6.058818238834054])]
#: The step-size factor bounds and the error exponent of :func:`~._batched.integrate_batch`'s
#: rodas4 control (step factors ``0.9·err^(−1/4)`` clipped to [0.2, 6]).
R_MIN_FACTOR, R_MAX_FACTOR, R_EXPONENT = 0.2, 6.0, -1 / 4


def rodas4_step(fun: Callable[[FloatArray], FloatArray], y: FloatArray, f: FloatArray,
                jac: FloatArray, h: FloatArray) -> tuple[FloatArray, FloatArray]:
    """One RODAS 4(3) step for a batch of rows (autonomous ``y' = fun(y)``).

    # Arguments
    - `fun`: the batched right-hand side, (M, k) → (M, k).
    - `y`, `f`: the rows (M, k) and ``fun(y)``.
    - `jac`: the Jacobians ``∂fun/∂y`` (M, k, k) at `y`.
    - `h`: the step sizes (M,).

    # Returns
    ``(y_new, err)``: the order-4 solution and the embedded error estimate ``k_6`` (the order-4
    minus the order-3 solution), both (M, k); a row whose matrix ``I/(hγ) − J`` is singular
    gets non-finite values (the caller rejects the step).
    """
    import torch

    M, k = y.shape
    E = -jac
    r = np.arange(k)
    E[:, r, r] += (1.0 / (h * _R_GAMMA))[:, None]
    LU, piv, _info = torch.linalg.lu_factor_ex(torch.from_numpy(E))

    def solve(b: FloatArray) -> FloatArray:
        x = torch.linalg.lu_solve(LU, piv, torch.from_numpy(b[:, :, None]))
        out: FloatArray = x[:, :, 0].numpy()
        return out

    ks = [solve(f)]
    hinv = (1.0 / h)[:, None]
    arg = y
    for s in range(1, 6):
        arg = y.copy()
        lin = np.zeros_like(y)
        for j in range(s):
            arg += _R_A[s][j] * ks[j]
            lin += _R_C[s][j] * ks[j]
        ks.append(solve(fun(arg) + hinv * lin))
    y_new: FloatArray = arg + ks[5]
    return y_new, ks[5]
