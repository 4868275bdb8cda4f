"""Golden outputs: each workflow's ``--json`` object against the one mesadyn 0.1 gave.

The stored objects (``data/*.json``) were made by mesadyn 0.1 with exactly the arguments of
:data:`CASES`; each case runs in-process through the CLI entry point ``mesadyn.cli.main`` and
takes a few seconds.  ``README.md`` next to this file says what is compared how, and why:

- every stored key must be there, and no other key except those of :data:`ADDED` at the top;
- strings, booleans, ``null`` and integers exactly, type included (an int is no float);
- floats to :data:`RTOL` relative to their scale: the largest ``|value|`` of the array they
  belong to, or the natural scale a case names for a quantity that is zero by symmetry;
- the quantities of the solver's path (counters, stop times, the points it saved and what is
  computed from them) only for their type and sanity, each listed with its case and reason;
  the case's theory checks (the end point against the theory) take their place;
- labels whose 0.1 value changed on purpose (``changed``) as one of the old and the new value.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mesadyn.cli import main
from mesadyn.outcome import Outcome

DATA = Path(__file__).parent / "data"
#: Relative tolerance of every golden float (to its scale).  The code fixes the formulas, not
#: the order in which BLAS, LAPACK, numba or torch add their terms (that follows the CPU's
#: vector width); reordered sums differ by ~1e-16 relative, and the solvers' end points
#: (``rtol`` 1e-10) by up to ~1e-11 between machines.
RTOL = 1e-10

Json = dict[str, Any]
Check = Callable[[Any, Json], bool]
_OK_OUTCOMES = frozenset(o.value for o in Outcome if o.ok)
#: Top-level keys that mesadyn 0.1's objects lack and the run contract adds (its outcome and
#: message; ``n_monitor`` of the one solver-statistics schema), each with its sanity check.
ADDED_CHECKS: dict[str, Callable[[Any], bool]] = {
    "status": lambda v: isinstance(v, str) and v in _OK_OUTCOMES,
    "message": lambda v: isinstance(v, str),
    "n_monitor": lambda v: v is None or (type(v) is int and v >= 0),
}
ADDED = frozenset(ADDED_CHECKS)


@dataclass(frozen=True)
class NotGolden:
    """A key whose value is not golden: only ``check(value, whole object)`` must hold."""

    check: Check
    why: str


@dataclass(frozen=True)
class Case:
    """One CLI call; ``scale``, ``path`` and ``changed`` are keyed by dotted key (``[]``: every
    list item).

    ``scale``: the natural scale (a number, or the key of the array whose largest ``|value|``
    it is) of a quantity that is zero by symmetry; ``path``: the keys of the solver's path,
    not golden; ``changed``: labels whose 0.1 value changed on purpose, each checked instead."""

    args: str
    scale: Mapping[str, float | str] = field(default_factory=dict)
    path: Mapping[str, NotGolden] = field(default_factory=dict)
    changed: Mapping[str, NotGolden] = field(default_factory=dict)
    theory: Callable[[Json], list[str]] | None = None


def _real(v: Any) -> bool:
    return type(v) is float and math.isfinite(v)


def _count(least: int) -> Check:
    return lambda v, _: type(v) is int and v >= least


def _below(bound: float) -> Check:
    return lambda v, _: _real(v) and 0.0 <= v <= bound


def _names_t_final(v: Any, g: Json) -> bool:
    """A message; a ``τ=…`` in it is the stop time (printed to 6 digits)."""
    found = re.search(r"τ=([-+0-9.e]+)", v) if isinstance(v, str) and v else None
    return isinstance(v, str) and bool(v) and (
        found is None or abs(float(found[1]) - g["t_final"]) <= 1e-5 * abs(g["t_final"]))


WALL = NotGolden(lambda v, _: _real(v) and v >= 0, "wall-clock seconds")
COUNTERS = {
    "nfev": NotGolden(_count(0), "right-hand-side evaluations: every step's accept/reject "
                      "compares a rounded error estimate with the tolerance"),
    "njev": NotGolden(_count(0), "Jacobian evaluations: LSODA's stiff/non-stiff switch "
                      "follows the same rounded estimates"),
    "n_accepted": NotGolden(_count(0), "accepted steps (as nfev)"),
    "n_rejected": NotGolden(lambda v, g: v is None or _count(0)(v, g),
                            "rejected steps (as nfev; null where the solver reports none)"),
}
DRIFT = NotGolden(_below(1e-8), "an integration error accumulated along the path, at the "
                  "solver's tolerance")
FULL_FLOW = {
    **COUNTERS,
    "n_monitor": NotGolden(_count(0), "steady-state tests made along the path"),
    "t_final": NotGolden(lambda v, g: _real(v) and 0 < v <= g["t_end"],
                         "the stop time: the first point of the path with max|∇L| < steady_tol"),
    "message": NotGolden(_names_t_final, "names the stop time t_final"),
    "grad_norm": NotGolden(lambda v, g: _real(v) and 0 <= v < g["steady_tol"],
                           "max|∇L| where the path stopped: under steady_tol, wherever that is"),
    "invariant_drift": DRIFT,
}


def _series(nullable: bool) -> Check:
    def check(v: Any, g: Json) -> bool:
        return isinstance(v, list) and len(v) == g["pl"]["n_points"] and all(
            (nullable and x is None) or (_real(x) and x > 0) for x in v)
    return check


def _times(v: Any, g: Json) -> bool:
    return isinstance(v, list) and len(v) == g["pl"]["n_points"] and v[:1] == [0.0] and all(
        _real(x) for x in v) and all(b > a for a, b in zip(v, v[1:], strict=False))


PL = {  # the PL trace is sampled at the solver's saved points
    "pl.t": NotGolden(_times, "the flow's saved points, which are the solver's steps"),
    "pl.n_points": NotGolden(_count(3), "how many points the solver saved"),
    "pl.t_end": NotGolden(lambda v, g: _real(v) and v > 0, "the flow's stop time"),
    "pl.ratio": NotGolden(_series(True), "‖∇L‖²/(L − L*) at the saved points (near the end "
                          "it divides by gaps down to 1e-9·|L*|: ~1e-7 rounding)"),
    "pl.lemma": NotGolden(_series(False), "Lemma 5.4's 2c1(a² + b²) at the saved points"),
    "pl.ratio_last": NotGolden(_below(math.inf), "at the last saved point above the gap floor"),
    "pl.lemma_last": NotGolden(_below(math.inf), "at the last saved point above the gap floor"),
    "pl.max_rel_dev_from_lemma": NotGolden(_below(math.inf), "a maximum over the saved points, "
                                           "where the gap is down to 1e-9·|L*| (ε|L*|/gap ~ 1e-7)"),
    "pl.measured_rate": NotGolden(_below(math.inf), "a fit of log(L − L*) over the saved points "
                                  "with gaps down to 1e-10 of the first (rounding ~1e-5 there)"),
}
#: Keys of ``stability``'s spectra whose scale is that of their spectrum or of the loss.
SPECTRUM = {
    **{f"{p}.leading[].eigenvalue": f"{p}.eigenvalues" for p in ("fixed_point", "released")},
    **{f"{p}.zero_gap": 1.0 for p in ("fixed_point", "released")},  # |λ| / max|λ|
    **{f"fixed_point.{k}": "fixed_point.eigenvalues" for k in (
        "transverse.max_eigenvalue", "transverse.min_eigenvalue", "reduced.mu_hyperbola",
        "reduced.nearest_full_eigenvalue", "symmetry_residual")},
    "fixed_point.reduced.max_abs_diff": "fixed_point.reduced.eigenvalues_analytic",
    **{f"fixed_point.{k}": "fixed_point.loss" for k in (
        "grad_norm", "diag_grad_norm", "newton_residual", "offdiag_grad_norm",
        "offdiag_32_12_grad_norm", "rest_grad_norm", "inactive_grad_norm")},
    "released.grad_norm": "released.loss",
    "released.one_step_gd.other_active_blocks_max": "released.W_KQ_32",
}


def _close(got: float, want: float, rtol: float, what: str) -> list[str]:
    return [] if abs(got - want) <= rtol * abs(want) else [
        f"{what}: {got!r} vs {want!r} (rtol {rtol:g})"]


def _pl_theory(g: Json, *, identity: bool) -> list[str]:
    """The PL summary from its own arrays; Lemma 5.4 on a diagonal flow (``identity``), the
    measured rate against the linearisation's otherwise."""
    pl = g["pl"]
    pairs = [(r, lem) for r, lem in zip(pl["ratio"], pl["lemma"], strict=True) if r is not None]
    if not pairs:
        return ["pl: no ratio above the gap floor"]
    dev = max(abs(r / lem - 1) for r, lem in pairs)
    out = (_close(pl["max_rel_dev_from_lemma"], dev, 1e-12, "pl.max_rel_dev_from_lemma")
           + _close(pl["ratio_last"], pairs[-1][0], 0.0, "pl.ratio_last")
           + _close(pl["lemma_last"], pairs[-1][1], 0.0, "pl.lemma_last")
           + _close(pl["t_end"], pl["t"][-1], 0.0, "pl.t_end"))
    if identity:  # an identity up to the rounding of gaps >= 1e-9·|L*|: ~1e-7
        out += [] if dev <= 1e-5 else [f"pl: Lemma 5.4 off by {dev:.3g} on the diagonal"]
        return out + _close(pl["measured_rate"], pl["lemma_rate"], 1e-3, "measured rate")
    return out + _close(pl["measured_rate"], pl["linearised_rate"], 1e-3, "measured rate")


def _released_theory(g: Json) -> list[str]:
    return _pl_theory(g, identity=False) + _close(
        g["released"]["flow"]["t"], g["pl"]["t_end"], 0.0, "the PL trace is the release flow")


def _reduced_theory(g: Json) -> list[str]:
    """The horizon is past settling: (a, b) is at the closed form's limit, ab at ab*."""
    gap = math.hypot(g["a"] - g["a_limit"], g["b"] - g["b_limit"])
    return _close(g["ab"], g["ab_theory"], 1e-9, "ab against ab*") + (
        [] if gap <= 1e-9 else [f"(a, b) is {gap:.3g} from the limit"])


def _gaussian_flow_theory(g: Json) -> list[str]:
    """Theorem 4.1: the full flow ends at ab* (within steady_tol/|λ_slowest| ~ 1e-9)."""
    return _close(g["ab_mean"], g["ab_theory"], 1e-8, "ab against ab*")


def _ones_flow_theory(g: Json) -> list[str]:
    """The flow leaves the unstable diagonal point for the released fixed point of
    ``stability`` (Proposition 4.2): the same product W^PV_12 W^KQ_32 and loss (the two points
    differ in the balance of the factors, which each flow conserves), within
    steady_tol/|λ_slowest| = 1e-9/0.36 along the slowest mode."""
    rel = _golden("stability_ones")["released"]
    want = np.array(rel["W_PV_12"]) @ np.array(rel["W_KQ_32"])
    got = np.array(g["W_PV"])[:3, 3:6] @ np.array(g["W_KQ"])[6:9, 3:6]
    gap = float(np.abs(got - want).max())
    return ([] if gap <= 1e-8 else [f"W^PV_12 W^KQ_32 is {gap:.3g} from the released point's"]
            ) + _close(g["loss"], rel["loss"], 1e-12, "loss against the released point's")


#: 0.1 integrated the reduced flow with dopri5 and reported ``t_end``; the closed form is now
#: the default integrator (its values meet the same 1e-10), and a flow that reached its fixed
#: point reports what the full flow would (``converged``).
REDUCED_CHANGED = {
    "backend": NotGolden(lambda v, _: v in ("closed_form", "torchdiffeq"), "the integrator"),
    "solver": NotGolden(lambda v, _: v in ("closed_form", "dopri5"), "the integrator"),
    "status": NotGolden(lambda v, _: v in ("converged", "t_end"), "the reduced flow's verdict"),
    "message": NotGolden(lambda v, g: isinstance(v, str) and v.startswith(
        f"reached t_end={g['t_end']:g}"), "names the horizon, then how it was reached"),
}

CASES: dict[str, Case] = {
    "theory_gaussian": Case("theory --x1 gaussian --sigma 1"),
    "theory_ones": Case("theory --x1 ones --d 3 --T 20"),
    "integrate_reduced": Case(
        "integrate --reduced --x1 gaussian --a0 0.5 --b0 1.5", theory=_reduced_theory,
        path={**COUNTERS, "invariant_drift": DRIFT, "closed_form_max_error": NotGolden(
            _below(1e-8), "the integrator's distance from the closed form: its error")},
        changed=REDUCED_CHANGED),
    "integrate_full_gaussian": Case(
        "integrate --x1 gaussian --d 3 --T 20 --a0 0.5 --b0 1.5", theory=_gaussian_flow_theory,
        scale={"off_structure_max": "W_PV"},
        path={**FULL_FLOW, "reduced_max_deviation": NotGolden(_below(1e-8), "the distance "
              "from the closed-form reduced flow, an integration error along the path")}),
    "integrate_full_ones": Case(  # the diagonal point is unstable: rounding decides when the
        # flow leaves it, so the path is not portable, the end point is
        "integrate --x1 ones --d 3 --T 20 --a0 0.5 --b0 1.5", theory=_ones_flow_theory,
        scale={"off_structure_max": "W_PV", "reduced_max_deviation": "W_PV"}, path=FULL_FLOW),
    "portrait": Case("portrait --x1 gaussian --out {tmp}/p.pdf", path={"out": NotGolden(
        lambda v, _: isinstance(v, str) and Path(v).is_file(), "the output file (tmp dir)")}),
    "train": Case("train --x1 gaussian --d 3 --T 10 --m 200 --steps 5 --a0 0.1 --b0 0.1"),
    "stability_gaussian": Case("stability --x1 gaussian --d 3 --T 20", scale=SPECTRUM, path=PL,
                               theory=lambda g: _pl_theory(g, identity=True)),
    "stability_ones": Case(  # the release flow leaves an unstable point: its path is rounding's
        "stability --x1 ones --d 3 --T 20", scale=SPECTRUM, theory=_released_theory, path={
            **PL, "pl.linearised_rate": NotGolden(_below(math.inf), "its modes' weights are "
                                                  "read at a saved point of the path"),
            "released.flow.t": NotGolden(lambda v, _: _real(v) and v > 0, "the stop time"),
            "released.newton_iterations": NotGolden(_count(0), "Newton steps from where the "
                                                    "release flow stopped")}),
}


def differences(got: Any, want: Any, case: Case | None = None) -> list[str]:
    """Every way ``got`` departs from ``want`` under ``case``'s rules; empty if none."""
    out: list[str] = []
    _compare(got, want, "", "", None, case or Case(""), (got, want), out)
    return out


def _compare(got: Any, want: Any, where: str, key: str, scale: float | None, case: Case,
             roots: tuple[Any, Any], out: list[str]) -> None:
    if isinstance(want, dict):
        _compare_objects(got, want, where, key, case, roots, out)
    elif isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            out.append(f"{where}: {_brief(got)} for a list of {len(want)}")
            return
        if scale is None and _numeric(want):
            scale = _absmax(want)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _compare(g, w, f"{where}[{i}]", f"{key}[]", scale, case, roots, out)
    elif type(want) is float:
        problem = _float_problem(got, want, scale)
        if problem:
            out.append(f"{where}: {problem}")
    elif type(got) is not type(want) or got != want:
        out.append(f"{where}: {got!r} != {want!r}")


def _compare_objects(got: Any, want: Json, where: str, key: str, case: Case,
                     roots: tuple[Any, Any], out: list[str]) -> None:
    if not isinstance(got, dict):
        out.append(f"{where or 'top'}: {_brief(got)} for an object")
        return
    added = set(got) - set(want)
    if missing := sorted(set(want) - set(got)):
        out.append(f"{where or 'top'}: keys missing: {missing}")
    if extra := sorted(added - (set() if where else ADDED)):
        out.append(f"{where or 'top'}: keys not in the golden object: {extra}")
    out += [f"{k}: {got[k]!r} is no valid {k}" for k in sorted(added & ADDED)
            if not where and not ADDED_CHECKS[k](got[k])]
    for k in sorted(set(want) & set(got)):
        at, sub = (f"{where}.{k}", f"{key}.{k}") if where else (k, k)
        rule = case.path.get(sub) or case.changed.get(sub) or (WALL if k == "wall_s" else None)
        if rule is not None:
            if not rule.check(got[k], roots[0]):
                out.append(f"{at}: {_brief(got[k])} fails its check ({rule.why})")
            continue
        natural = case.scale.get(sub)
        scale = _absmax(_at(roots[1], natural)) if isinstance(natural, str) else natural
        _compare(got[k], want[k], at, sub, scale, case, roots, out)


def _float_problem(got: Any, want: float, scale: float | None) -> str | None:
    if type(got) is not float:
        return f"{_brief(got)} for the float {want!r}"
    if not (math.isfinite(got) and math.isfinite(want)):
        same = got == want or (math.isnan(got) and math.isnan(want))
        return None if same else f"{got!r} != {want!r}"
    tol = RTOL * max(abs(want), scale or 0.0)
    return None if abs(got - want) <= tol else \
        f"{got!r} != {want!r} (|Δ| = {abs(got - want):.3g} > {tol:.3g})"


def _numeric(v: Any) -> bool:
    if isinstance(v, list):
        return all(_numeric(x) for x in v)
    return type(v) in (int, float)


def _absmax(v: Any) -> float:
    flat = np.asarray(v, dtype=np.float64).ravel()
    flat = flat[np.isfinite(flat)]
    return float(np.abs(flat).max()) if flat.size else 0.0


def _at(obj: Any, key: str) -> Any:
    for part in key.split("."):
        obj = obj[part]
    return obj


def _brief(v: Any) -> str:
    text = repr(v)
    return f"{type(v).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _golden(name: str) -> Json:
    return dict(json.loads((DATA / f"{name}.json").read_text()))


def _cli_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> Json:
    try:
        code = main([*args, "--json"])
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    assert code == 0, captured.err

    def non_strict(c: str) -> None:
        pytest.fail(f"non-strict JSON: {c}")

    return dict(json.loads(captured.out, parse_constant=non_strict))


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path,
                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MESADYN_CACHE_DIR", str(tmp_path / "cache"))
    case = CASES[name]
    got = _cli_json(capsys, case.args.format(tmp=tmp_path).split())
    problems = differences(got, _golden(name), case)
    assert problems == []
    assert case.theory is None or case.theory(got) == []


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_rule_names_a_golden_key(name: str) -> None:
    """A misspelt key in ``scale`` or ``path`` would silently compare nothing differently."""
    keys: set[str] = set()

    def walk(v: Any, key: str) -> None:
        keys.add(key)
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, f"{key}.{k}" if key else k)
        elif isinstance(v, list):
            for x in v:
                walk(x, f"{key}[]")

    want = _golden(name)
    walk(want, "")
    case = CASES[name]
    assert sorted((set(case.path) | set(case.changed)) - keys) == []
    own = {k: s for k, s in case.scale.items() if k.split(".")[0] in want}  # SPECTRUM: both
    assert sorted(set(own) - keys) == [] and (own or not case.scale)
    assert sorted(s for s in own.values() if isinstance(s, str) and s not in keys) == []


WANT = {"x": 0.5, "v": [200.0, -1.0, 1e-16], "n": 3, "s": "a", "b": True, "z": None,
        "o": {"y": 1.0, "wall_s": 2.0}, "m": [[0.0, 1.5]]}


def _mutated(change: Callable[[Json], object]) -> Json:
    got = copy.deepcopy(WANT)
    change(got)
    return got


CAUGHT: dict[str, Callable[[Json], object]] = {
    "1e-9 relative": lambda g: g.update(x=0.5 * (1 + 1e-9)),
    "array entry past the array's scale": lambda g: g["v"].__setitem__(2, 1e-16 + 1e-7),
    "zero entry of a matrix": lambda g: g["m"][0].__setitem__(0, 1e-9),
    "missing key": lambda g: g["o"].pop("y"),
    "missing volatile key": lambda g: g["o"].pop("wall_s"),
    "unlisted extra key": lambda g: g.update(extra=1),
    "added key below the top": lambda g: g["o"].update(status="converged"),
    "added status that is a failure": lambda g: g.update(status="diverged"),
    "added status that is no outcome": lambda g: g.update(status="done"),
    "added counter that is no count": lambda g: g.update(n_monitor=-1),
    "int for a float": lambda g: g["o"].update(y=1),
    "float for an int": lambda g: g.update(n=3.0),
    "bool for an int": lambda g: g.update(n=True),
    "NaN for a number": lambda g: g.update(x=math.nan),
    "inf for a number": lambda g: g["v"].__setitem__(0, math.inf),
    "string for a number": lambda g: g.update(x="0.5"),
    "other string": lambda g: g.update(s="b"),
    "null for a value": lambda g: g.update(b=None),
    "value for null": lambda g: g.update(z=0.0),
    "shorter list": lambda g: g["v"].pop(),
    "list for an object": lambda g: g.update(o=[1.0]),
    "negative wall time": lambda g: g["o"].update(wall_s=-1.0),
}


@pytest.mark.parametrize("what", list(CAUGHT))
def test_comparator_catches(what: str) -> None:
    assert differences(_mutated(CAUGHT[what]), WANT) != []


def test_comparator_accepts_what_it_should() -> None:
    assert differences(copy.deepcopy(WANT), WANT) == []
    for change in (lambda g: g.update(x=0.5 * (1 + 5e-11)),  # within 1e-10 relative
                   lambda g: g["v"].__setitem__(2, -5e-15),  # within 1e-10 of the array's 200
                   lambda g: g["o"].update(wall_s=99.0),  # wall-clock time
                   lambda g: g.update(status="converged", message="", n_monitor=None)):
        assert differences(_mutated(change), WANT) == []
    nan = {"x": math.nan, "l": [math.nan, 1.0]}
    assert differences(copy.deepcopy(nan), nan) == []
    assert differences({"x": 0.5, "l": [math.nan, 1.0]}, nan) != []


def test_case_rules_scale_and_path() -> None:
    case = Case("", scale={"x": 100.0, "o.y": "v"}, path={"n": NotGolden(_count(1), "test")})
    assert differences(_mutated(lambda g: g.update(x=0.5 + 9e-9)), WANT, case) == []
    assert differences(_mutated(lambda g: g.update(x=0.5 + 2e-8)), WANT, case) != []
    assert differences(_mutated(lambda g: g["o"].update(y=1.0 + 1e-8)), WANT, case) == []
    assert differences(_mutated(lambda g: g["o"].update(y=1.0 + 1e-7)), WANT, case) != []
    for n, ok in ((7, True), (1, True), (0, False), (2.0, False), (None, False)):
        assert (differences({**WANT, "n": n}, WANT, case) == []) is ok
    assert differences(_mutated(lambda g: g.pop("n")), WANT, case) != []  # present, still


def test_path_checks_see_bad_values() -> None:
    """The sanity checks of the not-golden keys fail where they should."""
    g = _golden("integrate_full_ones")
    assert differences(copy.deepcopy(g), g, CASES["integrate_full_ones"]) == []
    for key, bad in (("nfev", -1), ("nfev", 731.0), ("t_final", 60.0), ("t_final", -1.0),
                     ("grad_norm", 2e-9), ("invariant_drift", 1e-6), ("n_rejected", -1),
                     ("message", "max|∇L| < steady_tol=1e-09 at τ=2.5"), ("message", "")):
        assert differences({**g, key: bad}, g, CASES["integrate_full_ones"]) != [], key
    r = _golden("integrate_reduced")
    for key, bad in (("status", "diverged"), ("backend", "scipy"), ("message", "reached")):
        assert differences({**r, key: bad}, r, CASES["integrate_reduced"]) != [], key
    s = _golden("stability_ones")
    pl = s["pl"]
    for change in ({"t": pl["t"][::-1]}, {"ratio": pl["ratio"][:-1]}, {"n_points": 2},
                   {"lemma": [-1.0] + pl["lemma"][1:]}):
        assert differences({**s, "pl": {**pl, **change}}, s, CASES["stability_ones"]) != []
    assert _released_theory(s) == [] and _pl_theory(_golden("stability_gaussian"),
                                                     identity=True) == []
    assert _released_theory({**s, "pl": {**pl, "measured_rate": 44.8}}) != []
    assert _ones_flow_theory(g) == [] and _ones_flow_theory({**g, "loss": 6.4}) != []
