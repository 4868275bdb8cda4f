"""The loss, gradient and Hessian of a field for a batch of θ at once.

The exact field's closed forms (:class:`~mesadyn.field.ExactField`, module docstring):
``∇_P = P R_s − C·a``, ``∇_A = Kᵀq − C:P`` with ``q = vec(PᵀP)``, ``K = G a``, ``R = K a``, and
the Hessian blocks ``∇²_AA = Σ_q q_q G_q``, ``∇²_PP = I_d ⊗ R_s``,
``∇²_PA[jα, i] = Σ_β P_jβ (K[αβ, i] + K[βα, i]) − C[jα, i]``, written over a leading batch
axis: the sparse moment tensor ``G`` multiplies all N vectors ``a`` (or ``q``) in one
sparse–dense product.  A field with a radius r ≠ 1 stores its own ``G``, ``C`` and constant, so
the same contractions hold.  A sampled field in polynomial form delegates to its empirical
polynomial (the same closed forms); in direct form to its own
the sampled fields' ``batch_loss_and_grad``.  Used by the batched flow
(:mod:`mesadyn.flow._batched`) for ensembles.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ..errors import MesadynError
from ._base import Field
from ._forms import Form
from ._sampled import DrawnField
from .exact import ExactField

FloatArray = npt.NDArray[np.float64]
IndexArray = npt.NDArray[np.intp]


def _check(field: Field, thetas: npt.ArrayLike) -> FloatArray:
    th = np.asarray(thetas, dtype=np.float64)
    if th.ndim != 2 or th.shape[1] != field.n_params:
        raise MesadynError(f"thetas must have shape (N, {field.n_params}), got {th.shape}")
    return th


def _closed_form(field: Field) -> ExactField | None:
    """The exact-field contractions behind ``field`` on the host, if it has them: an
    :class:`ExactField` on the CPU, or a sampled field's polynomial form (built on demand)."""
    if isinstance(field, ExactField):
        return field if field.device.type == "cpu" else None
    if isinstance(field, DrawnField) and field.form is Form.POLYNOMIAL:
        return field.build()
    return None


def batched_loss_and_grad(field: Field, thetas: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """``(L(θ_k), ∇L(θ_k))`` for every row θ_k of ``thetas`` (N, 18d²).

    # Arguments
    - `field`: the exact field or a sampled field in polynomial form (vectorised closed form);
      a sampled field in direct form uses its own batch method; any other field is evaluated row
      by row through its own :meth:`Field.loss_and_grad`.
    - `thetas`: the batch, float64 (N, 18d²).

    # Returns
    Losses (N,) and gradients (N, 18d²) as float64 numpy arrays.

    # Raises
    `MesadynError` if the rows do not have the field's length.
    """
    th = _check(field, thetas)
    exact = _closed_form(field)
    if exact is not None:
        return _exact(exact, th)
    import torch

    if th.shape[0] == 0:
        return np.zeros(0), np.zeros_like(th)
    if isinstance(field, DrawnField):
        v, g = field.batch_loss_and_grad(torch.from_numpy(th.copy()))
        return v.detach().cpu().numpy().astype(np.float64), g.detach().cpu().numpy()
    out = [field.loss_and_grad(torch.from_numpy(row.copy())) for row in th]
    return (np.array([float(v) for v, _ in out]),
            np.stack([g.detach().cpu().numpy() for _, g in out]))


def batched_hessian(field: Field, thetas: npt.ArrayLike,
                    index: npt.ArrayLike | None = None) -> FloatArray:
    """``∇²L(θ_k)`` for every row of ``thetas`` (N, 18d²), restricted to ``index``.

    # Arguments
    - `field`: the exact field or a sampled field in polynomial form (vectorised closed-form
      blocks); any other field is evaluated row by row through its own :meth:`Field.hessian`.
    - `thetas`: the batch, float64 (N, 18d²).
    - `index`: the entries of θ to keep (integer indices or a boolean mask of length 18d²);
      ``None``: all of them.

    # Returns
    The Hessians ``H[k][np.ix_(index, index)]``, float64 (N, k, k), symmetric; rows and
    columns of inactive entries are 0.

    # Raises
    `MesadynError` if the rows do not have the field's length or ``index`` is out of range.
    """
    th = _check(field, thetas)
    p = field.n_params
    if index is None:
        idx: IndexArray = np.arange(p)
    else:
        raw = np.asarray(index)
        if raw.dtype == bool:
            if raw.shape != (p,):
                raise MesadynError(f"a boolean index must have length {p}, got {raw.shape}")
            idx = np.flatnonzero(raw)
        else:
            idx = raw.astype(np.intp).ravel()
            if idx.size and (idx.min() < 0 or idx.max() >= p):
                raise MesadynError(f"index must lie in [0, {p}), got {raw.min()}..{raw.max()}")
    exact = _closed_form(field)
    if exact is None:
        import torch

        out = np.zeros((th.shape[0], idx.size, idx.size))
        for k, row in enumerate(th):
            out[k] = field.hessian(torch.from_numpy(row.copy())).detach().cpu().numpy()[
                np.ix_(idx, idx)]
        return out
    iP, iA = exact._iPnp, exact._iAnp
    # position of every kept entry in the active ordering (iP then iA); -1: inactive
    where = np.full(p, -1, dtype=np.intp)
    where[iP] = np.arange(iP.size)
    where[iA] = iP.size + np.arange(iA.size)
    pos = where[idx]
    act = pos >= 0
    H = _exact_hessian(exact, th)
    if act.all():
        out_all: FloatArray = H[:, pos[:, None], pos[None, :]]
        return out_all
    out = np.zeros((th.shape[0], idx.size, idx.size))
    ka = np.flatnonzero(act)
    out[:, ka[:, None], ka[None, :]] = H[:, pos[ka][:, None], pos[ka][None, :]]
    return out


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


def closed_form(field: Field) -> ExactField | None:
    """The exact-field contractions behind ``field`` on the host, if it has them (an
    :class:`ExactField` on the CPU, or a sampled field's polynomial form); else ``None``."""
    return _closed_form(field)


def active_index(field: ExactField) -> IndexArray:
    """The θ indices of the active coordinates ``z = (vec P, vec A)`` (length dn + n²)."""
    out: IndexArray = np.concatenate([field._iPnp, field._iAnp])
    return out


def active_grad(field: ExactField, z: FloatArray) -> FloatArray:
    """``∇L`` in the active coordinates ``z = (vec P, vec A)`` (N, dn + n²) → (N, dn + n²):
    the gradient of :func:`batched_loss_and_grad` without the scatter to and from θ."""
    N = z.shape[0]
    d, n = field.family.d, field._n
    dn = d * n
    C = field._Cnp
    P = z[:, :dn].reshape(N, d, n)
    a = z[:, dn:]
    q = (P.transpose(0, 2, 1) @ P).reshape(N, n * n)
    K = np.asarray(field._G1 @ a.T).T.reshape(N, n * n, n * n)
    Rm = (K @ a[:, :, None]).reshape(N, n, n)
    Rs = 0.5 * (Rm + Rm.transpose(0, 2, 1))
    g = np.empty_like(z)
    g[:, :dn] = (P @ Rs).reshape(N, dn) - a @ C.T
    g[:, dn:] = (q[:, None, :] @ K)[:, 0, :] - P.reshape(N, dn) @ C
    return g


def active_hessian(field: ExactField, z: FloatArray) -> FloatArray:
    """``∇²L`` in the active coordinates ``z = (vec P, vec A)``, (N, dn + n², dn + n²):
    ``∇²_PP = I_d ⊗ R_s``, ``∇²_AA = sym(mat(G q))``,
    ``∇²_PA[jα, i] = Σ_β P_jβ (K[αβ, i] + K[βα, i]) − C[jα, i]`` (as
    :meth:`ExactField.hessian`, row by row)."""
    N = z.shape[0]
    d, n = field.family.d, field._n
    n2, dn = n * n, d * n
    C = field._Cnp
    P = z[:, :dn].reshape(N, d, n)
    a = z[:, dn:]
    q = (P.transpose(0, 2, 1) @ P).reshape(N, n2)
    K = np.asarray(field._G1 @ a.T).T.reshape(N, n2, n2)
    Rm = (K @ a[:, :, None])[:, :, 0].reshape(N, n, n)
    Rs = 0.5 * (Rm + Rm.transpose(0, 2, 1))
    HAA = np.asarray(field._G2 @ q.T).T.reshape(N, n2, n2)
    K4 = K.reshape(N, n, n, n2)
    # Σ_β P_jβ K[αβ, i] and Σ_β P_jβ K[βα, i], as batched matrix products
    S1 = (K4.reshape(N, n, n, n2).transpose(0, 1, 3, 2).reshape(N, n * n2, n)
          @ P.transpose(0, 2, 1)).reshape(N, n, n2, d).transpose(0, 3, 1, 2)
    S2 = (P @ K4.reshape(N, n, n * n2)).reshape(N, d, n, n2)
    HPA = (S1 + S2).reshape(N, dn, n2) - C
    H = np.zeros((N, dn + n2, dn + n2))
    for j in range(d):
        H[:, j * n:(j + 1) * n, j * n:(j + 1) * n] = Rs
    H[:, dn:, dn:] = 0.5 * (HAA + HAA.transpose(0, 2, 1))
    H[:, :dn, dn:] = HPA
    H[:, dn:, :dn] = HPA.transpose(0, 2, 1)
    return H


def _exact_hessian(field: ExactField, th: FloatArray) -> FloatArray:
    """The active block of ``∇²L`` for every row, ordered as ``(vec P, vec A)``."""
    return active_hessian(field, th[:, active_index(field)])
