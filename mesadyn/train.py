"""The paper's simulation protocol (Section 6, Appendix B): full-batch gradient descent.

GD ``θ_{k+1} = θ_k − η ∇L_m(θ_k)`` on the finite-sample loss ``L_m`` of Eq. 2 over ``m``
training sequences (:class:`mesadyn.field.FiniteField`, drawn from ``seed``), with a held-out
test set of ``m_test`` sequences drawn from a separate stream (:func:`test_seed`).  Defaults
are the paper's: d = 5, T = 100, m = 10 000, 200 steps, seed 1, Table 1's step size.

Every step k = 0..steps records, at ``θ_k``: the per-coordinate ``ab = diag(W^KQ_32) ⊙
diag(W^PV_12)`` and its mean, the diagonals of ``W^KQ_32`` and ``W^PV_12``, the train loss, the
test loss, the max-norm of the gradient, Proposition 4.1's ratio on the test set at ``T_te = T``
(:mod:`mesadyn.analysis.incontext`) and the full θ.

**Divergence.**  The run stops at the first step k whose train loss is not finite, or exceeds
``blowup × max(L_m(θ_0), L_m(0))`` (``blowup = 1e6`` by default; ``L_m(0) = ½ Σ_t mean‖x_{t+1}‖²``
is the loss of predicting 0), or whose update makes θ non-finite.  :func:`train` then raises
:class:`TrainingDiverged`, which carries the partial :class:`TrainResult` (rows 0..k).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .budget import check as check_size
from .budget import train as train_estimate
from .device import resolve_device
from .errors import MesadynError, check_finite, check_int, check_positive
from .model import ab as ab_of
from .model import block, diagonal_init, diagonal_mask, dim_of, unpack
from .process import Family
from .progress import ProgressCallback
from .theory import check_T, constants, predicted_ratio

if TYPE_CHECKING:
    import xarray as xr

#: Table 1 (Appendix B.2): GD step sizes of the paper's simulations, keyed by (family, σ or c).
TABLE1: dict[tuple[str, float | None], float] = {
    ("gaussian", 0.5): 1e-3,
    ("gaussian", 1.0): 1e-4,
    ("gaussian", 2.0): 2e-6,
    ("sparse", 0.5): 3e-2,
    ("sparse", 1.0): 1e-3,
    ("sparse", 2.0): 1e-4,
    ("ones", None): 5e-4,
}

#: Default divergence threshold, a multiple of ``max(L_m(θ_0), L_m(0))``.
BLOWUP = 1e6


def table1_lr(fam: Family) -> float:
    """Table 1's step size for ``fam``, or an error naming the missing entry."""
    if fam.name == "ones":
        return TABLE1[("ones", None)]
    if fam.name in ("gaussian", "sparse"):
        key = "sigma" if fam.name == "gaussian" else "scale"
        value = float(fam.params[key])
        for (name, v), lr in TABLE1.items():
            if name == fam.name and v is not None and math.isclose(v, value, rel_tol=1e-12):
                return lr
        known = ", ".join(str(v) for (name, v) in TABLE1 if name == fam.name)
        raise MesadynError(
            f"Table 1 has no step size for {fam.name} with {key}={value:g} (it lists {key} = "
            f"{known}); give one with --lr"
        )
    raise MesadynError(
        f"Table 1 has no step size for the {fam.name!r} family; give one with --lr"
    )


def test_seed(seed: int) -> int:
    """The seed of the test set's stream, distinct from any training seed's stream."""
    return int(np.random.SeedSequence([int(seed), 0x7E57]).generate_state(1, np.uint64)[0] >> 1)


test_seed.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


class TrainingDiverged(MesadynError):
    """GD diverged; ``.result`` is the partial run up to and including the failing step."""

    def __init__(self, message: str, result: TrainResult):
        super().__init__(message)
        self.result = result


@dataclass
class TrainResult:
    """One GD run.  Per-step arrays have one row per recorded step ``k = 0..`` (θ_k)."""

    step: np.ndarray  # (K,)
    ab: np.ndarray  # (K, d) per-coordinate diag(W^KQ_32) ⊙ diag(W^PV_12)
    kq_diag: np.ndarray  # (K, d) diag(W^KQ_32)
    pv_diag: np.ndarray  # (K, d) diag(W^PV_12)
    train_loss: np.ndarray  # (K,)
    test_loss: np.ndarray  # (K,) NaN where not evaluated
    ratio: np.ndarray  # (K,) Proposition 4.1 on the test set, NaN where not evaluated
    ratio_se: np.ndarray  # (K,)
    grad_max: np.ndarray  # (K,) max |∂L/∂θ_i|
    theta: np.ndarray  # (K, 18d²)
    lr: float
    config: dict[str, Any]
    ab_theory: float
    ab_limit: float
    ratio_theory: float
    wall_s: float = 0.0
    diverged: bool = False
    diverged_step: int | None = None
    message: str = ""
    ratio_info: dict[str, Any] = field(default_factory=dict)

    @property
    def ab_mean(self) -> np.ndarray:
        """Per-step mean over coordinates of ``ab`` (the paper's plotted ab)."""
        return self.ab.mean(axis=1)

    @property
    def kq_mean(self) -> np.ndarray:
        """Per-step mean of ``diag(W^KQ_32)`` (the paper's a)."""
        return self.kq_diag.mean(axis=1)

    @property
    def pv_mean(self) -> np.ndarray:
        """Per-step mean of ``diag(W^PV_12)`` (the paper's b)."""
        return self.pv_diag.mean(axis=1)

    @property
    def steps(self) -> int:
        """GD steps taken (rows − 1)."""
        return int(self.step[-1])

    @property
    def final_theta(self) -> np.ndarray:
        return self.theta[-1]

    def _last_finite(self, arr: np.ndarray) -> float:
        ok = np.isfinite(arr)
        return float(arr[ok][-1]) if ok.any() else math.nan

    def summary(self) -> dict[str, Any]:
        """The ``mesadyn train --json`` object."""
        return {
            "family": self.config["family"]["family"],
            "d": self.config["d"],
            "T": self.config["T"],
            "m": self.config["m"],
            "seed": self.config["seed"],
            "lr": self.lr,
            "steps": self.steps,
            "ab": float(self.ab_mean[-1]),
            "ab_coords": [float(v) for v in self.ab[-1]],
            "ab_theory": self.ab_theory,
            "ab_limit": self.ab_limit,
            "ab_rel_err": float(self.ab_mean[-1] / self.ab_theory - 1),
            "train_loss": float(self.train_loss[-1]),
            "test_loss": self._last_finite(self.test_loss),
            "ratio": self._last_finite(self.ratio),
            "ratio_se": self._last_finite(self.ratio_se),
            "ratio_theory": self.ratio_theory,
            **{f"ratio_{k}": v for k, v in self.ratio_info.items()},
            "diverged": self.diverged,
            "diverged_step": self.diverged_step,
            "wall_s": self.wall_s,
        }

    def to_dataset(self) -> xr.Dataset:
        """The run as an :class:`xarray.Dataset` over ``step`` (for :func:`mesadyn.io.save_run`)."""
        import xarray as xr

        from .io import to_json

        d = self.ab.shape[1]
        W_KQ, W_PV = unpack(torch.as_tensor(self.final_theta))
        ds = xr.Dataset(
            {
                "ab": (("step", "coord"), self.ab),
                "ab_mean": ("step", self.ab_mean),
                "kq_diag": (("step", "coord"), self.kq_diag),
                "pv_diag": (("step", "coord"), self.pv_diag),
                "kq_mean": ("step", self.kq_mean),
                "pv_mean": ("step", self.pv_mean),
                "train_loss": ("step", self.train_loss),
                "test_loss": ("step", self.test_loss),
                "ratio": ("step", self.ratio),
                "ratio_se": ("step", self.ratio_se),
                "grad_max": ("step", self.grad_max),
                "theta": (("step", "param"), self.theta),
                "W_KQ": (("row", "col"), W_KQ.numpy()),
                "W_PV": (("row", "col"), W_PV.numpy()),
            },
            coords={"step": self.step, "coord": np.arange(d), "param": np.arange(18 * d * d),
                    "row": np.arange(3 * d), "col": np.arange(3 * d)},
        )
        ds["ab_theory"] = self.ab_theory
        ds["ab_limit"] = self.ab_limit
        ds["ratio_theory"] = self.ratio_theory
        ds.attrs.update(lr=self.lr, wall_s=self.wall_s, diverged=int(self.diverged),
                        diverged_step=-1 if self.diverged_step is None else self.diverged_step,
                        message=self.message, train_config=to_json(self.config))
        return ds

    @classmethod
    def from_dataset(cls, ds: xr.Dataset) -> TrainResult:
        """Rebuild a result from a dataset written by :meth:`to_dataset` (e.g. a loaded run)."""
        import json

        # the run's own description (``train_config``); a file written before it was kept
        # apart from the workflow's configuration holds it as ``config``
        raw = ds.attrs.get("train_config", ds.attrs.get("config"))
        cfg = json.loads(raw) if raw is not None else {}
        ds_step = int(ds.attrs.get("diverged_step", -1))
        return cls(
            step=ds["step"].values, ab=ds["ab"].values, kq_diag=ds["kq_diag"].values,
            pv_diag=ds["pv_diag"].values, train_loss=ds["train_loss"].values,
            test_loss=ds["test_loss"].values, ratio=ds["ratio"].values,
            ratio_se=ds["ratio_se"].values, grad_max=ds["grad_max"].values,
            theta=ds["theta"].values, lr=float(ds.attrs["lr"]), config=cfg,
            ab_theory=float(ds["ab_theory"]), ab_limit=float(ds["ab_limit"]),
            ratio_theory=float(ds["ratio_theory"]), wall_s=float(ds.attrs.get("wall_s", 0.0)),
            diverged=bool(ds.attrs.get("diverged", 0)),
            diverged_step=None if ds_step < 0 else ds_step,
            message=str(ds.attrs.get("message", "")),
        )


#: ``callback(step, record)`` after each recorded step; return True to stop early.
Callback = Callable[[int, dict[str, float]], bool | None]


def _initial(theta0: torch.Tensor | None, d: int, a0: float, b0: float
             ) -> tuple[torch.Tensor, dict[str, Any]]:
    """θ_0 (the diagonal init of Assumption 3.1 when ``theta0`` is None) and its description."""
    if theta0 is None:
        return diagonal_init(d, a0, b0), {"init": "diagonal", "a0": check_finite("a0", a0),
                                          "b0": check_finite("b0", b0)}
    theta0 = torch.as_tensor(theta0, dtype=torch.float64).detach().clone()
    if theta0.ndim != 1 or dim_of(theta0) != d:
        raise MesadynError(f"theta0 must be a flat vector of length {18 * d * d} (d={d})")
    if not torch.isfinite(theta0).all():
        raise MesadynError("theta0 has non-finite entries")
    return theta0, {"init": "given"}


def train(
    family: Family,
    T: int = 100,
    *,
    m: int = 10_000,
    steps: int = 200,
    lr: float | None = None,
    theta0: torch.Tensor | None = None,
    a0: float = 0.1,
    b0: float = 0.1,
    seed: int = 1,
    m_test: int | None = None,
    mask: str = "none",
    eval_every: int = 1,
    blowup: float = BLOWUP,
    device: torch.device | str | None = None,
    callback: Callback | None = None,
    radius: float = 1.0,
    rotation: str = "diagonal",
    noise: float = 0.0,
    progress: ProgressCallback | None = None,
) -> TrainResult:
    """Full-batch GD on ``m`` training sequences (Section 6); see the module docstring.

    ``theta0`` defaults to the diagonal init (Assumption 3.1) with ``a0, b0``.  ``lr`` defaults
    to Table 1's entry (:func:`table1_lr`).  ``mask="diagonal"`` trains only the diagonals of
    ``W^KQ_32`` and ``W^PV_12`` (Theorem 4.3's clipping); ``"none"`` trains all of θ.
    Test loss and ratio are evaluated every ``eval_every`` steps and at the last step.
    ``radius``, ``rotation``, ``noise``: the process beyond the paper's (docs/design.md §6; see
    :func:`train_batch`).  ``progress`` is called with the step number after each step (e.g.
    :func:`mesadyn.cli.progress_bar` in a notebook); ``callback`` sees each step's record and
    may stop the run.
    Raises :class:`TrainingDiverged` (with the partial result) on divergence.
    """
    theta, init = _initial(theta0, family.d, a0, b0)
    batch_cb: BatchCallback | None = None
    if callback is not None:
        user_cb = callback

        def batch_cb(k: int, records: list[dict[str, float] | None]) -> bool | None:
            record = records[0]
            return None if record is None else user_cb(k, record)

    (result,) = train_batch(family, T, [theta], inits=[init], m=m, steps=steps, lr=lr,
                            seed=seed, m_test=m_test, mask=mask, eval_every=eval_every,
                            blowup=blowup, device=device, callback=batch_cb, radius=radius,
                            rotation=rotation, noise=noise, progress=progress)
    if result.diverged:
        raise TrainingDiverged(result.message, result)
    return result


#: ``callback(step, records)`` after each step of a batch (a record per run; None for runs
#: that have stopped); return True to stop every run.
BatchCallback = Callable[[int, "list[dict[str, float] | None]"], bool | None]


@dataclass
class _Run:
    """The state of one GD run inside :func:`train_batch`."""

    theta: torch.Tensor
    rows: dict[str, list[Any]]
    limit: float = math.nan
    diverged_at: int | None = None
    message: str = ""
    done: bool = False
    wall_s: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


def train_batch(
    family: Family,
    T: int,
    theta0s: Sequence[torch.Tensor],
    *,
    inits: Sequence[dict[str, Any]] | None = None,
    m: int = 10_000,
    steps: int = 200,
    lr: float | None = None,
    seed: int = 1,
    m_test: int | None = None,
    mask: str = "none",
    eval_every: int = 1,
    blowup: float = BLOWUP,
    device: torch.device | str | None = None,
    callback: BatchCallback | None = None,
    radius: float = 1.0,
    rotation: str = "diagonal",
    noise: float = 0.0,
    progress: ProgressCallback | None = None,
) -> list[TrainResult]:
    """Several GD runs (Section 6) on ONE training set, stepped together.

    The runs differ only in θ_0 (the paper's three diagonal inits, or several Gaussian inits);
    they share one training set and one test set, whose draws and θ-independent prefix Grams
    are built once for all runs (:meth:`mesadyn.field.SampledField.batch_loss_and_grad`).
    Result ``i`` has the same numbers as :func:`train` with ``theta0=theta0s[i]`` (tested bit
    for bit), except ``wall_s``, which is the wall time of the whole batch up to the run's
    last step.  A run that diverges stops (its result has ``diverged=True``; nothing is
    raised) and the others go on.  ``inits`` describes each θ_0 for the run's configuration.
    Both fields are in direct form (:class:`mesadyn.field.Form`): GD needs ``steps + 1``
    gradients and no Hessian, which never pays for the polynomial form's build here.  The run
    is priced before anything is drawn (:func:`mesadyn.budget.train`: the fields and the trace
    of every step) and refused if it does not fit (:func:`mesadyn.budget.check`).

    The process (docs/design.md §6): ``W = radius·diag(λ)`` by default (the AR fast path of
    :class:`~mesadyn.field.FiniteField`, any radius); a ``rotation`` other than ``diagonal``
    (``real``, ``haar``) or ``noise > 0`` trains on whole drawn sequences
    (:class:`~mesadyn.field.FiniteSequenceField`).  Theorem 4.1's ab* is reported where the
    reduced system exists (diagonal W, at this radius; NaN otherwise) and Proposition 4.1's
    ratio only for the paper's process (r = 1, diagonal, no noise; NaN otherwise).
    """
    from .analysis.incontext import ContextBatch
    from .field import FiniteField, FiniteSequenceField, Form
    from .process import Rotation, check_noise, check_radius, check_rotation

    T = check_T(T)
    d = family.d
    m = check_int("m", m, 1)
    steps = check_int("steps", steps, 0)
    m_test = m if m_test is None else check_int("m_test", m_test, 1)
    seed = check_int("seed", seed, 0)
    eval_every = check_int("eval_every", eval_every, 1)
    blowup = check_positive("blowup", blowup)
    lr = table1_lr(family) if lr is None else check_positive("lr", lr)
    if mask not in ("none", "diagonal"):
        raise MesadynError(f"unknown mask {mask!r}; choose none or diagonal")
    if len(theta0s) < 1:
        raise MesadynError("train_batch needs at least one initial θ")
    starts = [_initial(t, d, 0.0, 0.0)[0] for t in theta0s]
    inits = [{"init": "given"}] * len(starts) if inits is None else list(inits)
    if len(inits) != len(starts):
        raise MesadynError(f"got {len(inits)} init descriptions for {len(starts)} runs")
    radius = check_radius(radius)
    rot = check_rotation(rotation)
    noise = check_noise(noise)
    diagonal = rot is Rotation.DIAGONAL and noise == 0
    paper = diagonal and radius == 1
    if rot is Rotation.REAL and d % 2:
        raise MesadynError(f"real rotations need an even d, got d={d}")
    device = torch.device(resolve_device(device))  # None: the CPU, the one device policy
    check_size(train_estimate(d, T, m, m_test, steps, runs=len(starts), device=str(device)))
    ab_theory = ab_limit = r_theory = math.nan
    if diagonal:
        c = constants(family, T, radius=radius)
        ab_theory, ab_limit = c.ab_star, c.ab_limit
    if paper:
        try:
            r_theory = predicted_ratio(family, T)
        except MesadynError:
            r_theory = math.nan

    def finite(m_: int, seed_: int) -> FiniteField | FiniteSequenceField:
        # direct form: GD needs only 1 + steps losses and gradients (no Hessian), which never
        # pay back the polynomial form's build at the paper's m (minutes per set at m = 10⁴)
        if diagonal:
            return FiniteField(family, T, m_, seed=seed_, device=device, form=Form.DIRECT,
                               radius=radius)
        return FiniteSequenceField(family, T, m_, seed_, radius=radius, rotation=rot,
                                   noise=noise, device=device, form=Form.DIRECT)

    train_field = finite(m, seed)
    tseed = test_seed(seed)
    test_field = finite(m_test, tseed)  # = sample(family, m_test, T, seed tseed)
    # Proposition 4.1's ratio needs x_{T+1} = λ^T x_1 with |λ| = 1 (the paper's process)
    test_ctx = (ContextBatch(test_field.x1, test_field.lam, T)
                if isinstance(test_field, FiniteField) and paper else None)
    gmask = (torch.as_tensor(diagonal_mask(d), device=device).to(torch.float64)
             if mask == "diagonal" else None)
    base = {
        "family": family.describe(), "d": d, "T": T, "m": m, "m_test": m_test, "steps": steps,
        "lr": lr, "seed": seed, "test_seed": tseed, "mask": mask, "eval_every": eval_every,
        "blowup": blowup, "T_te": T, "device": str(device),
    }
    if radius != 1:
        base["radius"] = radius
    if not diagonal:
        base.update(rotation=str(rot), noise=noise)
    keys = ("step", "ab", "kq", "pv", "train", "test", "ratio", "ratio_se", "gmax", "theta")
    runs = [_Run(theta=t.to(device), rows={k: [] for k in keys}) for t in starts]
    if isinstance(train_field, FiniteField) and radius == 1:
        zero_loss = 0.5 * float(
            (train_field.x1.abs() ** 2).sum(1).mean()) * (T - 2)  # L_m(0): |x_t| = |x_1|
    else:  # L_m(0) = ½ Σ_t mean‖x_{t+1}‖², evaluated
        zero_loss = float(train_field.batch_loss(
            torch.zeros(1, 18 * d * d, dtype=torch.float64, device=device))[0])
    t0 = time.perf_counter()
    for k in range(steps + 1):
        live = [run for run in runs if not run.done]
        if not live:
            break
        losses, grads = train_field.batch_loss_and_grad(torch.stack([r.theta for r in live]))
        if gmask is not None:
            grads = grads * gmask
        values = [float(v) for v in losses]
        due = [(k % eval_every == 0 or k == steps) and math.isfinite(v) for v in values]
        tested = [r for r, e in zip(live, due, strict=True) if e]
        test_losses: list[float] = []
        if tested:
            with torch.no_grad():
                test_losses = [float(v) for v in test_field.batch_loss(
                    torch.stack([r.theta for r in tested]))]
        records: dict[int, dict[str, float]] = {}
        for run, L, grad, evaluate in zip(live, values, grads, due, strict=True):
            if k == 0:
                run.limit = blowup * max(L, zero_loss)
            theta = run.theta
            W_KQ, W_PV = unpack(theta)
            if evaluate:
                L_te = test_losses.pop(0)
                r_val = r_se = math.nan
                if test_ctx is not None:
                    try:
                        rt = test_ctx.ratio(theta)
                        r_val, r_se = rt.value, rt.se
                        run.info = {"used": rt.used, "excluded": rt.excluded, "imag": rt.imag,
                                    "imag_se": rt.imag_se}
                    except MesadynError:
                        r_val = r_se = math.nan
            else:
                L_te = r_val = r_se = math.nan
            rows = run.rows
            rows["step"].append(k)
            rows["ab"].append(ab_of(theta).cpu().numpy())
            rows["kq"].append(torch.diagonal(block(W_KQ, 3, 2)).cpu().numpy().copy())
            rows["pv"].append(torch.diagonal(block(W_PV, 1, 2)).cpu().numpy().copy())
            rows["train"].append(L)
            rows["test"].append(L_te)
            rows["ratio"].append(r_val)
            rows["ratio_se"].append(r_se)
            rows["gmax"].append(float(grad.abs().max()))
            rows["theta"].append(theta.cpu().numpy().copy())
            if not math.isfinite(L) or L > run.limit:
                run.diverged_at = k
                what = ("is not finite" if not math.isfinite(L)
                        else f"exceeds the blow-up limit {run.limit:.3g}")
                run.message = (f"GD diverged at step {k}: train loss {L:.6g} {what} "
                               f"(lr={lr:g}; try a smaller --lr)")
                run.done = True
                continue
            records[id(run)] = {"train_loss": L, "test_loss": L_te,
                                "ab": float(rows["ab"][-1].mean()), "ratio": r_val}
        stop = callback(k, [records.get(id(r)) for r in runs]) if callback is not None else None
        if progress is not None:
            progress(float(k))
        for run, grad in zip(live, grads, strict=True):
            if run.done:
                continue
            if k == steps or stop:
                run.done = True
                continue
            run.theta = run.theta - lr * grad
            if not torch.isfinite(run.theta).all():
                run.diverged_at = k + 1
                run.message = (f"GD diverged at step {k + 1}: the update from step {k} made θ "
                               f"non-finite (lr={lr:g}; try a smaller --lr)")
                run.done = True
        now = time.perf_counter() - t0
        for run in live:
            run.wall_s = now

    return [
        TrainResult(
            step=np.asarray(run.rows["step"], dtype=np.int64),
            ab=np.stack(run.rows["ab"]), kq_diag=np.stack(run.rows["kq"]),
            pv_diag=np.stack(run.rows["pv"]), train_loss=np.asarray(run.rows["train"]),
            test_loss=np.asarray(run.rows["test"]), ratio=np.asarray(run.rows["ratio"]),
            ratio_se=np.asarray(run.rows["ratio_se"]), grad_max=np.asarray(run.rows["gmax"]),
            theta=np.stack(run.rows["theta"]), lr=lr, config={**base, **init},
            ab_theory=ab_theory, ab_limit=ab_limit, ratio_theory=r_theory,
            wall_s=run.wall_s, diverged=run.diverged_at is not None,
            diverged_step=run.diverged_at, message=run.message, ratio_info=run.info,
        )
        for run, init in zip(runs, inits, strict=True)
    ]
