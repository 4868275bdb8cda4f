"""The exact field's loss and gradient for a batch of θ at once (one vectorised contraction).

The closed forms of :meth:`ExactField.loss_and_grad` (``∇_P = P R_s − C·a``,
``∇_A = Kᵀq − C:P`` with ``q = vec(PᵀP)``, ``K = G a``, ``R = K a``), written over a leading
batch axis: the sparse moment tensor ``G`` multiplies all N vectors ``a`` in one sparse–dense
product.  Used by the batched flow (:mod:`mesadyn.flow._batched`) for ensembles (issue 15).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ..errors import MesadynError
from ._base import Field
from .exact import ExactField

FloatArray = npt.NDArray[np.float64]


def batched_loss_and_grad(field: Field, thetas: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """``(L(θ_k), ∇L(θ_k))`` for every row θ_k of ``thetas`` (N, 18d²).

    # Arguments
    - `field`: the exact field (vectorised closed form); any other field is evaluated row by
      row through its own :meth:`Field.loss_and_grad`.
    - `thetas`: the batch, float64 (N, 18d²).

    # Returns
    Losses (N,) and gradients (N, 18d²) as float64 numpy arrays.

    # Raises
    `MesadynError` if the rows do not have the field's length.
    """
    th = np.asarray(thetas, dtype=np.float64)
    if th.ndim != 2 or th.shape[1] != field.n_params:
        raise MesadynError(f"thetas must have shape (N, {field.n_params}), got {th.shape}")
    if not isinstance(field, ExactField) or field.device.type != "cpu":
        import torch

        out = [field.loss_and_grad(torch.from_numpy(row.copy())) for row in th]
        return (np.array([float(v) for v, _ in out]),
                np.stack([g.numpy() for _, g in out]) if out else np.zeros_like(th))
    return _exact(field, th)


def _exact(field: ExactField, th: FloatArray) -> tuple[FloatArray, FloatArray]:
    N = th.shape[0]
    d, n = field.family.d, field._n
    n2 = n * n
    iP, iA, C = field._iPnp, field._iAnp, field._Cnp
    P = th[:, iP].reshape(N, d, n)
    a = th[:, iA]  # (N, n²)
    q = (P.transpose(0, 2, 1) @ P).reshape(N, n2)
    K = np.asarray(field._G1 @ a.T).T.reshape(N, n2, n2)  # K[k, q, i1] = Σ G[q, i1, i2] a_k[i2]
    R = (K @ a[:, :, None])[:, :, 0]
    Rm = R.reshape(N, n, n)
    Rs = 0.5 * (Rm + Rm.transpose(0, 2, 1))
    Cp = P.reshape(N, d * n) @ C  # (N, n²)
    Ca = (a @ C.T).reshape(N, d, n)
    value = 0.5 * np.einsum("kq,kq->k", q, R) - np.einsum("kq,kq->k", Cp, a) + field.const
    g = np.zeros_like(th)
    g[:, iP] = (P @ Rs - Ca).reshape(N, d * n)
    g[:, iA] = (q[:, None, :] @ K)[:, 0, :] - Cp
    return value, g
