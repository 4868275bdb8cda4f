"""A :class:`~._follow.Continuation` as an ``xarray.Dataset`` and back (its methods
``to_dataset`` and ``from_dataset`` call these).

Dimension ``point`` runs over all points of all branches (``point_branch`` says which) with
``p``, ``theta``, ``loss``, ``ab`` and ``ab_mean``, ``offdiag_mass``, ``invariant``,
``residual``, ``n_unstable``, ``n_zero``, ``stable``, ``eigenvalues`` (of ``−∇²L``),
``reduced_eigenvalues`` (the non-symmetry ones), ``zero_modes`` (JSON) and the driver's state
(``tangent``, ``ds``, ``iterations``); dimension ``special`` holds the located points
(``special_*``), dimension ``branch`` each branch's ``branch_status``, ``branch_message``,
``branch_origin``, ``branch_direction``, ``branch_steps`` and ``branch_rejected``.  The attributes
name the ``parameter`` (and its ``symbol``), the range (``start``, ``stop``) and the problem
(``n_free``, ``n_symmetries``).  A model other than the paper's adds its per-layer
``invariants`` (dimension ``layer``; ``invariant`` is their sum) and names itself in the
attributes ``model`` and ``layers``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import MesadynError
from ...outcome import Outcome
from ._detect import Bifurcation, Special
from ._engine import Branch
from ._system import Point, count_unstable

if TYPE_CHECKING:
    import xarray as xr

    from ._follow import Continuation
    from ._parameters import Parameter

__all__ = ["from_dataset", "to_dataset"]

#: The point rows: name -> (dimensions after ``point``, dtype).
_POINT: dict[str, tuple[tuple[str, ...], Any]] = {
    "p": ((), float), "theta": (("param",), float), "loss": ((), float),
    "ab": (("coord",), float), "offdiag_mass": ((), float), "invariant": ((), float),
    "residual": ((), float), "n_unstable": ((), np.int64), "n_zero": ((), np.int64),
    "eigenvalues": (("mode",), float), "reduced_eigenvalues": (("rmode",), float),
    "tangent": (("tdim",), float), "ds": ((), float), "iterations": ((), np.int64),
    "zero_modes": ((), str),
}
#: The special-point columns (``special_<name>``) and their dtypes.
_SPECIAL: dict[str, Any] = {
    "kind": str, "p": float, "after": np.int64, "theta": float, "eigenvalue": float,
    "fold_test": float, "cubic": float, "bracket": float, "residual": float,
    "null_vector": float, "tangent": float,
}
_SPECIAL_DIMS: dict[str, tuple[str, ...]] = {
    "theta": ("param",), "null_vector": ("free",), "tangent": ("tdim",)}
#: The branch columns (``branch_<name>``) and their dtypes.
_BRANCH: dict[str, Any] = {"status": str, "message": str, "origin": np.int64,
                           "direction": np.int64, "steps": np.int64, "rejected": np.int64}


def to_dataset(cont: Continuation) -> xr.Dataset:
    """Every analysed point of every branch of ``cont`` in one Dataset (module docstring)."""
    import xarray as xr

    if any(b.points for b in cont.branches) and not any(cont.analyses):
        raise MesadynError("the continuation has no point analyses to store: follow it with "
                           "analyse=True")
    rows: dict[str, list[Any]] = {k: [] for k in ("branch", *_POINT)}
    for i, br in enumerate(cont.branches):
        ans = cont.analyses[i] if i < len(cont.analyses) else []
        for pt, an in zip(br.points, ans, strict=False):  # analysed points only
            for key, value in (
                    ("branch", i), ("p", pt.p), ("theta", pt.theta), ("loss", an.loss),
                    ("ab", an.ab), ("offdiag_mass", an.offdiag_mass),
                    ("invariant", an.invariant), ("residual", an.residual),
                    ("n_unstable", an.n_unstable), ("n_zero", an.n_zero),
                    ("eigenvalues", an.eigenvalues), ("reduced_eigenvalues", pt.eigenvalues),
                    ("tangent", pt.tangent), ("ds", pt.ds), ("iterations", pt.iterations),
                    ("zero_modes", json.dumps(an.zero_modes, sort_keys=True))):
                rows[key].append(value)
    d = cont.parameter.family.d
    model = cont.parameter.model
    n = model.n_params(d)
    npts = len(rows["p"])
    k = len(rows["reduced_eigenvalues"][0]) if npts else 0
    nt = len(rows["tangent"][0]) if npts else 0
    width = {"param": n, "coord": d, "mode": n, "rmode": k, "tdim": nt, "free": 0}

    def column(values: list[Any], dims: tuple[str, ...], dtype: Any) -> np.ndarray:
        if values:
            return np.array(values, dtype=dtype)
        return np.zeros((0, *(width[x] for x in dims)), dtype=dtype)

    data: dict[str, Any] = {"point_branch": ("point", column(rows["branch"], (), np.int64))}
    for key, (dims, dtype) in _POINT.items():
        data[key] = (("point", *dims), column(rows[key], dims, dtype))
    data["ab_mean"] = ("point", data["ab"][1].mean(axis=1) if npts else np.zeros(0))
    data["stable"] = ("point", data["n_unstable"][1] == 0)
    if not model.is_paper:
        inv = [an.invariants for i, br in enumerate(cont.branches)
               for an in (cont.analyses[i] if i < len(cont.analyses) else [])[:len(br.points)]]
        data["invariants"] = (("point", "layer"), np.array(inv, dtype=float).reshape(
            npts, model.layers))
    specials = [(i, sp) for i, br in enumerate(cont.branches) for sp in br.specials]
    data["special_branch"] = ("special", column([i for i, _ in specials], (), np.int64))
    for key, dtype in _SPECIAL.items():
        dims = _SPECIAL_DIMS.get(key, ())
        values = [str(s.kind) if key == "kind" else getattr(s, key) for _, s in specials]
        data[f"special_{key}"] = (("special", *dims), column(values, dims, dtype))
    for key, dtype in _BRANCH.items():
        values = [str(getattr(b, key)) if dtype is str else getattr(b, key)
                  for b in cont.branches]
        data[f"branch_{key}"] = ("branch", column(values, (), dtype))
    par = cont.parameter
    attrs: dict[str, Any] = {
        "parameter": str(par.name), "symbol": par.symbol, "start": float(cont.start),
        "stop": float(cont.stop), "n_free": int(cont.n_free),
        "n_symmetries": int(cont.n_symmetries)}
    if not model.is_paper:
        attrs.update(model.describe())
    return xr.Dataset(data, attrs=attrs)


def _required(ds: xr.Dataset) -> None:
    names = ["point_branch", *_POINT, *(f"special_{k}" for k in ("branch", *_SPECIAL)),
             *(f"branch_{k}" for k in _BRANCH)]
    missing = [k for k in names if k not in ds.variables]
    missing += [f"attribute {k}" for k in ("parameter", "start", "stop") if k not in ds.attrs]
    if missing:
        raise MesadynError(f"not a continuation run: it lacks {', '.join(missing)}")


def from_dataset(cls: type[Continuation], ds: xr.Dataset,
                 parameter: Parameter) -> Continuation:
    """The :class:`~._follow.Continuation` of ``parameter`` that ``ds`` holds (the inverse of
    :func:`to_dataset`): stability counts from the stored non-symmetry eigenvalues with
    :data:`~mesadyn.tolerances.ZERO_RTOL` (:func:`~._system.count_unstable`), as when the
    points were found."""
    _required(ds)
    if str(ds.attrs["parameter"]) != str(parameter.name):
        raise MesadynError(f"the continuation runs {ds.attrs['parameter']}, not "
                           f"{parameter.name}")
    stored: dict[str, object] = {}
    if "model" in ds.attrs:
        stored["model"] = str(ds.attrs["model"])
    if "layers" in ds.attrs:
        stored["layers"] = int(ds.attrs["layers"])
    if stored != ({} if parameter.model.is_paper else parameter.model.describe()):
        from ...models import model_from

        raise MesadynError(f"the continuation is of model={model_from(stored)}, not "
                           f"model={parameter.model}")
    try:
        return _restore(cls, ds, parameter)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise MesadynError(f"a malformed continuation run ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0] if str(exc) else 'no detail'})") from None


def _restore(cls: type[Continuation], ds: xr.Dataset, parameter: Parameter) -> Continuation:
    from ._follow import PointAnalysis

    v = {k: ds[k].values for k in ds.variables}
    layers = "invariants" in v
    cont = cls(parameter, float(ds.attrs["start"]), float(ds.attrs["stop"]),
               n_free=int(ds.attrs.get("n_free", 0)),
               n_symmetries=int(ds.attrs.get("n_symmetries", 0)))
    which = v["point_branch"]
    for i in range(int(ds.sizes.get("branch", 0))):
        status = Outcome(str(v["branch_status"][i]))
        br = Branch(status=status,
                    message=str(v["branch_message"][i]), origin=int(v["branch_origin"][i]),
                    direction=int(v["branch_direction"][i]), steps=int(v["branch_steps"][i]),
                    rejected=int(v["branch_rejected"][i]))
        ans = cont.analyses_of(i)
        for j in np.flatnonzero(which == i):
            red = np.array(v["reduced_eigenvalues"][j], dtype=float)
            br.points.append(Point(
                theta=np.array(v["theta"][j], dtype=float), p=float(v["p"][j]),
                residual=float(v["residual"][j]), iterations=int(v["iterations"][j]),
                eigenvalues=red, n_unstable=count_unstable(red),
                tangent=np.array(v["tangent"][j], dtype=float), ds=float(v["ds"][j])))
            eig = np.array(v["eigenvalues"][j], dtype=float)
            ans.append(PointAnalysis(
                loss=float(v["loss"][j]), residual=float(v["residual"][j]),
                ab=np.array(v["ab"][j], dtype=float), offdiag_mass=float(v["offdiag_mass"][j]),
                invariant=float(v["invariant"][j]), eigenvalues=eig,
                n_zero=int(v["n_zero"][j]),
                n_stable=int(eig.size - v["n_zero"][j] - v["n_unstable"][j]),
                n_unstable=int(v["n_unstable"][j]),
                zero_modes=json.loads(str(v["zero_modes"][j])),
                invariants=(tuple(float(x) for x in v["invariants"][j]) if layers
                            else (float(v["invariant"][j]),))))
        cont.branches.append(br)
    for s in range(int(ds.sizes.get("special", 0))):
        cont.branches[int(v["special_branch"][s])].specials.append(Special(
            kind=Bifurcation(str(v["special_kind"][s])), p=float(v["special_p"][s]),
            theta=np.array(v["special_theta"][s], dtype=float),
            after=int(v["special_after"][s]), eigenvalue=float(v["special_eigenvalue"][s]),
            null_vector=np.array(v["special_null_vector"][s], dtype=float),
            tangent=np.array(v["special_tangent"][s], dtype=float),
            fold_test=float(v["special_fold_test"][s]), cubic=float(v["special_cubic"][s]),
            bracket=float(v["special_bracket"][s]),
            residual=float(v["special_residual"][s])))
    return cont
