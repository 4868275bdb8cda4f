"""``mesadyn portrait``: the phase portrait of the reduced flow (Lemma 5.2), written to a file."""

from __future__ import annotations

import time
import warnings
from typing import Annotated, Any

import typer

from ._common import X1, Dim, Json, Length, Scale, Seed, Sigma, console, emit_json, table

Out = Annotated[str, typer.Option(
    "--out", help="Output file; the suffix picks .pdf, .svg or .png.")]
InitPt = Annotated[list[str] | None, typer.Option(
    "--init", help="Diagonal init a0,b0 (repeatable; default the paper's three).")]
Window = Annotated[float | None, typer.Option(
    "--window", help="Half-width L of the drawn box [-L, L]² (default: fit the inits).")]
Density = Annotated[float, typer.Option("--density", help="Streamline density.")]
FullFlow = Annotated[bool, typer.Option(
    "--full-flow", help="Overlay the full gradient flow, projected on the mean diagonals.")]
FieldKind = Annotated[str, typer.Option(
    "--field", help="Field of the full flow: exact, mc or finite.")]
FlowTEnd = Annotated[float | None, typer.Option(
    "--flow-t-end", help="τ horizon of the full flow (default: 3× the reduced settle time).")]
Gd = Annotated[bool, typer.Option("--gd", help="Overlay finite-sample GD iterates (train).")]
GdRun = Annotated[list[str] | None, typer.Option(
    "--gd-run", help="Overlay the GD iterates of a saved train run (.nc; repeatable).")]
GdM = Annotated[int, typer.Option("--gd-m", help="Training sequences for --gd.")]
GdSteps = Annotated[int, typer.Option("--gd-steps", help="GD steps for --gd.")]
GdLr = Annotated[float | None, typer.Option("--gd-lr", help="GD step size (default Table 1).")]
InsetAb = Annotated[bool, typer.Option(
    "--inset-ab", help="Add the ab(τ) panel with theory (always on with --full-flow).")]
InsetPl = Annotated[bool, typer.Option("--inset-pl", help="Add the PL-ratio panel (Lemma 5.4).")]
Width = Annotated[str, typer.Option("--width", help="one, two (column widths) or inches.")]
Dpi = Annotated[int, typer.Option("--dpi", help="Resolution of PNG output.")]


def parse_init(text: str) -> tuple[float, float]:
    """``"a0,b0"`` → ``(a0, b0)``; anything else is a MesadynError echoing the text."""
    from ..errors import MesadynError, check_finite

    parts = text.replace(" ", "").split(",")
    if len(parts) != 2:
        raise MesadynError(f"--init must be a0,b0 (two numbers), got {text!r}")
    try:
        a0, b0 = float(parts[0]), float(parts[1])
    except ValueError:
        raise MesadynError(f"--init must be a0,b0 (two numbers), got {text!r}") from None
    return check_finite("a0", a0), check_finite("b0", b0)


def _width(text: str) -> str | float:
    from ..errors import MesadynError

    if text in ("one", "two"):
        return text
    try:
        return float(text)
    except ValueError:
        raise MesadynError(f"--width must be one, two or inches, got {text!r}") from None


def full_flows(fam: Any, T: int, inits: list[tuple[float, float]], field: str = "exact",
               t_end: float | None = None, seed: int = 1, m: int = 1000) -> list[Any]:
    """The full gradient flow (``mesadyn.flow.integrate``) from each diagonal init."""
    from ..errors import MesadynError
    from ..field import make_field
    from ..model import diagonal_init
    from ..plots.portrait import settle_time
    from ..reduced import ReducedSystem

    try:
        from ..flow import integrate
    except ImportError:  # pragma: no cover - until the flow module lands
        raise MesadynError("--full-flow needs mesadyn.flow, which is not available") from None
    system = ReducedSystem.from_family(fam, T)
    kw: dict[str, Any] = {} if field == "exact" else {"seed": seed}
    if field == "finite":
        kw["m"] = m
    f = make_field(field, fam, T, **kw)
    out = []
    for a0, b0 in inits:
        horizon = t_end if t_end is not None else 3.0 * settle_time(system, a0, b0)
        out.append(integrate(f, diagonal_init(fam.d, a0, b0), t_end=horizon))
    return out


def gd_runs(fam: Any, T: int, inits: list[tuple[float, float]], m: int, steps: int,
            lr: float | None, seed: int) -> list[Any]:
    """Finite-sample GD (``mesadyn.train.train``) from each diagonal init."""
    from ..train import train

    return [train(fam, T, m=m, steps=steps, lr=lr, a0=a0, b0=b0, seed=seed, eval_every=steps)
            for a0, b0 in inits]


def compute(x1: str = "gaussian", sigma: float = 1.0, scale: float = 1.0, d: int = 5,
            T: int = 100, seed: int = 1, out: str = "portrait.pdf",
            init: list[str] | None = None, window: float | None = None, density: float = 1.2,
            full_flow: bool = False, field: str = "exact", flow_t_end: float | None = None,
            gd: bool = False, gd_run: list[str] | None = None, gd_m: int = 1000,
            gd_steps: int = 200, gd_lr: float | None = None, inset_ab: bool = False,
            inset_pl: bool = False, width: str = "auto", dpi: int = 200) -> dict[str, Any]:
    """Draw the portrait, write ``out`` and return the JSON summary (also used by sweep)."""
    from ..errors import MesadynError, check_int, check_positive
    from ..io import run_config
    from ..plots import save
    from ..plots._data import ab_path, load
    from ..plots._style import output_format
    from ..plots.portrait import DEFAULT_INITS, PortraitWarning, portrait
    from ..theory import check_T, constants
    from ._common import make_family

    t0 = time.perf_counter()
    fmt = output_format(out)
    dpi = check_int("dpi", dpi, 20)
    fam = make_family(x1, d, sigma, scale)
    T = check_T(T)
    c = constants(fam, T)
    if window is not None:
        check_positive("window", window)
    if field not in ("exact", "mc", "finite"):
        raise MesadynError(f"unknown --field {field!r}; choose exact, mc or finite")
    inits = [parse_init(s) for s in init] if init else [tuple(p) for p in DEFAULT_INITS]
    runs = [load(p) for p in (gd_run or [])]
    for path, ds in zip(gd_run or [], runs, strict=True):
        if ds.attrs.get("kind") != "train":
            raise MesadynError(f"--gd-run {path!r} holds a {ds.attrs.get('kind')!r} run, "
                               "expected a 'train' run")
        cfg = run_config(ds)
        if cfg.get("d") not in (None, fam.d):
            raise MesadynError(f"--gd-run {path!r} is for d={cfg.get('d')}, not d={fam.d}")
    flows = full_flows(fam, T, inits, field, flow_t_end, seed, gd_m) if full_flow else []
    if gd:
        runs += gd_runs(fam, T, inits, check_int("gd-m", gd_m, 1),
                        check_int("gd-steps", gd_steps, 1), gd_lr, seed)
    notes: list[str] = []
    inset_ab = inset_ab or full_flow  # Proposition 4.2 shows best in ab(τ) against the lines
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PortraitWarning)
        fig, ax = portrait(fam, T, inits=inits, window=window, density=density,
                           full_flow=flows or None, gd=runs or None, inset_ab=inset_ab,
                           inset_pl=inset_pl,
                           width=None if width == "auto" else _width(width))
    notes += [str(w.message) for w in caught if issubclass(w.category, PortraitWarning)]
    path = save(fig, out, dpi=dpi)
    xlim, ylim = ax.get_xlim(), ax.get_ylim()
    result: dict[str, Any] = {
        "out": str(path), "format": fmt, "family": fam.name, "d": fam.d, "T": T,
        "c1": c.c1, "c2": c.c2, "ab_star": c.ab_star, "ab_limit": c.ab_limit,
        "window": [xlim[0], xlim[1], ylim[0], ylim[1]],
        "inits": [list(p) for p in inits], "notes": notes,
    }
    if flows:
        ends = []
        for (a0, b0), fl in zip(inits, flows, strict=True):
            a, b, _ = ab_path(fl)
            ends.append({"a0": a0, "b0": b0, "a_end": float(a[-1]), "b_end": float(b[-1]),
                         "ab_end": float(a[-1] * b[-1]), "status": str(getattr(fl, "status", ""))})
        result["full_flow"] = ends
    if runs:
        result["gd"] = [{"a_end": float(ab_path(r)[0][-1]), "b_end": float(ab_path(r)[1][-1])}
                        for r in runs]
    result["wall_s"] = time.perf_counter() - t0
    return result


def portrait_cmd(
    x1: X1 = "gaussian",
    sigma: Sigma = 1.0,
    scale: Scale = 1.0,
    d: Dim = 5,
    T: Length = 100,
    seed: Seed = 1,
    out: Out = "portrait.pdf",
    init: InitPt = None,
    window: Window = None,
    density: Density = 1.2,
    full_flow: FullFlow = False,
    field: FieldKind = "exact",
    flow_t_end: FlowTEnd = None,
    gd: Gd = False,
    gd_run: GdRun = None,
    gd_m: GdM = 1000,
    gd_steps: GdSteps = 200,
    gd_lr: GdLr = None,
    inset_ab: InsetAb = False,
    inset_pl: InsetPl = False,
    width: Width = "auto",
    dpi: Dpi = 200,
    json: Json = False,
) -> None:
    """Phase portrait of the reduced flow (Lemma 5.2): streamlines, nullclines, the fixed
    hyperbola ab = c2/c1, the saddle and its manifolds, basins, level sets of a² − b², and
    trajectories from --init; optional full-flow and GD overlays and ab(τ) / PL panels."""
    res = compute(x1, sigma, scale, d, T, seed, out, init, window, density, full_flow, field,
                  flow_t_end, gd, gd_run, gd_m, gd_steps, gd_lr, inset_ab, inset_pl, width, dpi)
    for note in res["notes"]:
        console.print(f"note: {note}", soft_wrap=True)
    if json:
        emit_json(res)
        return
    rows = [("file", res["out"]), ("c1", res["c1"]), ("c2", res["c2"]),
            ("ab* = c2/c1", res["ab_star"]), ("κ1/κ2 (T→∞)", res["ab_limit"]),
            ("window", ", ".join(f"{v:.3g}" for v in res["window"]))]
    for k, e in enumerate(res.get("full_flow", [])):
        rows.append((f"full flow {k} end (a, b, ab)",
                     f"{e['a_end']:.5g}, {e['b_end']:.5g}, {e['ab_end']:.5g}"))
    rows.append(("wall s", res["wall_s"]))
    console.print(table(f"mesadyn portrait — {res['family']}, d={res['d']}, T={res['T']}", rows))


def register(app: typer.Typer) -> None:
    app.command("portrait")(portrait_cmd)
