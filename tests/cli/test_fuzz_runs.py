"""Property-based fuzzing of the rest of ``mesadyn``: ``continue``, ``ensemble``, ``gdflow``,
``gd`` and ``rerun``, the data-model options, run files as inputs (valid, foreign, malformed,
truncated) and the size guard, with the contract of ``run_case`` (``fuzz_support.py``) and
properties of their own that would have caught the defects of the reliability pass:

- a run that reports ``converged`` has no negative curvature (an ensemble's converged rows, a
  full flow's end point: the dense Hessian of the exact field over the free entries);
- the size guard is consulted before anything is allocated: under a 1 kB budget every
  consumer (train, ensemble, gdflow, the sampled fields) is refused with the estimate, never
  run;
- every input is refused or used as given: the closed forms echo the family, d and T they were
  given; ``--moments`` is refused wherever no moments family uses it;
- nothing ends in a traceback or a hang (``run_case``'s time limit).

Derandomised (``MESADYN_FUZZ_RANDOM=1`` draws new cases, ``MESADYN_FUZZ_SCALE=N`` runs N times
as many); the sizes are in ``fuzz_support.EXAMPLES``.  Capped by construction where the
command would legitimately run long: d <= 2, T <= 6, n <= 4 rows, <= 20 steps, <= 6
continuation points; sizes that must be *refused* (the guard) are fuzzed up to 1e12.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fuzz_support import (
    FAMILY_WILD,
    RUN_FILES,
    any_float,
    argv_of,
    bad_size,
    case,
    choice,
    floats,
    opt,
    resolve,
    run_case,
    small_int,
)
from fuzz_support import fuzz_settings as _settings
from hypothesis import example, given
from hypothesis import strategies as st


@pytest.fixture(scope="module", autouse=True)
def _warm(warm_imports):
    """The heavy imports, once (``conftest.warm_imports``)."""


SMALL_FAMILY = {"x1": st.sampled_from(["gaussian", "sparse", "rademacher", "uniform"]),
                "sigma": floats(0.5, 2.0), "scale": floats(0.5, 2.0)}
#: Every run file and array of the ``run_files`` fixture, and the odd paths.
INPUT_FILES = st.sampled_from(RUN_FILES + ("missing.nc", "adir"))


def _input(kind: str, runs: Path, odd: Path) -> str:
    return str(odd / kind) if kind == "adir" else str(runs / kind)


def _no_negative_curvature(d: int, T: int, thetas: np.ndarray, family: str = "gaussian",
                           **kw: float) -> None:
    """Every row of ``thetas`` (reported ``converged``) is a minimum of the exact field."""
    from mesadyn.analysis.steady import curvatures
    from mesadyn.field import FieldSpec, make_field
    from mesadyn.model import free_mask
    from mesadyn.process import family as family_of

    field = make_field(FieldSpec("exact", family_of(family, d, **kw), T))
    for c in curvatures(field, np.atleast_2d(thetas), free_mask(None, d)):
        assert c.n_negative == 0, f"a converged row at a saddle: {c}"


# ---- continue ---------------------------------------------------------------------------------
CONTINUE = {**SMALL_FAMILY, "d": small_int(1, 2), "T": small_int(3, 6),
            "parameter": st.sampled_from(["sigma", "scale", "m2", "m4", "m6", "radius", "T"]),
            "start": floats(0.6, 1.5), "stop": floats(0.6, 1.6), "points": small_int(2, 6),
            "mask": st.sampled_from(["none", "diagonal"]),
            "gauge": st.sampled_from(["invariant", "slice"])}
CONTINUE_WILD = {**FAMILY_WILD, "parameter": choice("sigma", "mu", "weight", "bogus"),
                 "start": any_float, "stop": any_float, "points": bad_size, "tol": any_float,
                 "d": bad_size, "T": bad_size, "point": INPUT_FILES, "out": INPUT_FILES}


@_settings("continue")
@given(case(CONTINUE, CONTINUE_WILD, always=("d", "T", "points", "stop")), st.booleans())
def test_fuzz_continue(odd, run_files, options, as_json):
    for key in ("point", "out"):
        if options.get(key) is not None:
            options[key] = _input(options[key], run_files, odd)
            if key == "out" and not options[key].endswith(".nc"):
                options[key] = resolve("ok.nc", odd)
    run_case(argv_of(["continue"], options, ["--json"] if as_json else []))


# ---- ensemble: converged rows are minima -----------------------------------------------------
ENSEMBLE = {"d": small_int(1, 2), "T": small_int(3, 6), "n": small_int(1, 4),
            "init": st.sampled_from(["gaussian", "gaussian", "grid"]),
            "sigma-w": st.sampled_from(["1e-10", "1e-6", "1e-3", "0.1"]),
            "grid-a": st.sampled_from(["0", "0.5", "0,1", "-1,1", "1e-9"]),
            "grid-b": st.sampled_from(["0", "1", "0.5,-0.5", "1e-9"]),
            "method": st.sampled_from(["dopri5", "rodas4"])}
ENSEMBLE_WILD = {"sigma-w": any_float, "grid-a": st.sampled_from(["1e100", "nan", "", "1,,2",
                                                                  "x", "1e-300"]),
                 "grid-b": any_float, "n": st.one_of(bad_size, st.just("1000000000000")),
                 "perturb": st.sampled_from(["x", "-1", "0.1", "nan"]), "t-end": any_float,
                 "max-steps": bad_size, "steady-tol": any_float, "chunk": bad_size,
                 "init-file": INPUT_FILES, "init": choice("file")}


@_settings("ensemble")
@given(case(ENSEMBLE, ENSEMBLE_WILD, always=("d", "T")), st.booleans())
@example({"d": "2", "T": "6", "n": "3", "sigma-w": "1e-10"}, True)  # at the saddle: not converged
@example({"d": "1", "T": "3", "init": "grid", "grid-a": "1e100", "grid-b": "1e100"}, True)
def test_fuzz_ensemble(odd, run_files, tmp_path_factory, options, as_json):
    """Every case obeys the contract; every row the run file calls ``converged`` is a minimum
    (``--sigma-w 1e-10`` once reported ``converged: 5`` at the saddle)."""
    if options.get("init-file") is not None:
        options["init-file"] = _input(options["init-file"], run_files, odd)
    if options.get("init-file") is not None and options.get("init") is None:
        options["init"] = "file"
    out = tmp_path_factory.mktemp("ens") / "e.nc"
    code, _, _ = run_case(argv_of(["ensemble"], options, ["--out", str(out)]
                                  + (["--json"] if as_json else [])))
    if code in (0, 1) and out.exists():
        from mesadyn.io import load_run

        ds = load_run(out, "ensemble")
        conv = ds["status"].values.astype(str) == "converged"
        if conv.any():
            _no_negative_curvature(int(options["d"]), int(options["T"]),
                                   ds["theta"].values[conv])


# ---- gdflow and gd -----------------------------------------------------------------------------
GDFLOW = {**SMALL_FAMILY, "d": small_int(1, 2), "T": small_int(3, 6), "steps": small_int(1, 20),
          "m": small_int(0, 40), "lr": floats(1e-4, 1e-2),
          "init": st.sampled_from(["diagonal", "gaussian"]), "a0": floats(-1, 1),
          "b0": floats(-1, 1)}
GDFLOW_WILD = {**FAMILY_WILD, "steps": st.one_of(bad_size, st.just("1000000000")),
               "m": bad_size, "lr": any_float, "a0": any_float, "b0": any_float,
               "spread-m": st.sampled_from(["10,20", "5", "x", "10,10", "", "0,5"]),
               "solver": choice("scipy:DOP853", "scipy:LSODA", "RK45"), "rtol": any_float,
               "out": INPUT_FILES}


@_settings("gdflow")
@given(case(GDFLOW, GDFLOW_WILD, always=("d", "T", "steps", "m")), st.booleans())
def test_fuzz_gdflow(odd, run_files, options, as_json):
    if options.get("out") is not None:
        options["out"] = resolve("ok.nc", odd)
    run_case(argv_of(["gdflow"], options, ["--json"] if as_json else []))


GD = {**SMALL_FAMILY, "d": small_int(1, 2), "T": small_int(3, 6), "steps": small_int(1, 20),
      "eta": floats(1e-4, 5e-2), "a0": floats(-1, 1), "b0": floats(-1, 1),
      "field": st.sampled_from(["exact", "exact", "finite"]), "m": small_int(1, 40)}
GD_WILD = {**FAMILY_WILD, "eta": any_float, "a0": any_float, "b0": any_float, "m": bad_size,
           "steps": bad_size, "blowup": any_float, "sharpness-every": bad_size,
           "period": bad_size, "field": choice("exact")}


@_settings("gd")
@given(case(GD, GD_WILD, always=("d", "T", "steps")), st.sampled_from(
    [[], ["--reduced"], ["--converge"]]), st.booleans())
def test_fuzz_gd(options, flags, as_json):
    run_case(argv_of(["gd"], options, flags + (["--json"] if as_json else [])))


# ---- run files as inputs -----------------------------------------------------------------------
@_settings("rerun")
@given(INPUT_FILES, st.sampled_from([[], ["--rtol", "1e-6"], ["--rtol", "nan"],
                                     ["--device", "cuda:9"], ["--out", "NEW"]]),
       st.booleans())
def test_fuzz_rerun(odd, run_files, tmp_path_factory, kind, extra, as_json):
    """``rerun`` of every kind of file: valid ones rerun (exit 0, same numbers), every other
    is one line, exit 2."""
    extra = [str(tmp_path_factory.mktemp("rerun") / "again.nc") if e == "NEW" else e
             for e in extra]
    code, _, err = run_case(["rerun", _input(kind, run_files, odd), *extra,
                             *(["--json"] if as_json else [])])
    if kind in ("theory.nc", "integrate.nc", "ensemble.nc") and not extra:
        assert code == 0, err
    if kind in ("foreign.nc", "noconfig.nc", "badconfig.nc", "truncated.nc", "plain.png",
                "missing.nc", "adir", "starts.npy"):
        assert code == 2, err


@_settings("run_files")
@given(st.sampled_from(["stability", "continue", "ensemble", "portrait"]), INPUT_FILES)
def test_fuzz_files_as_inputs(odd, run_files, command, kind):
    """A file given where a point, starts or a GD run is expected is used as given or refused:
    a file that holds no such thing (an ensemble's rows as a point, a complex or boolean
    array, a truncated or foreign file) is one line, exit 2."""
    path = _input(kind, run_files, odd)
    argv = {"stability": ["stability", "--d", "1", "--T", "3", "--point", path],
            "continue": ["continue", "--d", "1", "--T", "3", "--stop", "1.1", "--points", "2",
                         "--point", path],
            "ensemble": ["ensemble", "--d", "1", "--T", "3", "--init", "file",
                         "--init-file", path],
            "portrait": ["portrait", "--d", "1", "--T", "3", "--gd-run", path, "--density",
                         "0.3"]}[command]
    code, _, err = run_case([*argv, "--json"])
    usable = {"stability": ("point.npy", "integrate.nc"), "continue": ("point.npy",),
              "ensemble": ("starts.npy",), "portrait": ()}[command]
    if kind not in usable and not (command == "continue" and kind == "integrate.nc"):
        assert code == 2, (command, kind, err)


# ---- the data models: refused or used as given -------------------------------------------------
DATA = {"x1": st.sampled_from(["gaussian", "shifted", "moments", "mixture", "ones", "sparse"]),
        "mu": st.sampled_from(["0", "0.3", "-1", "nan", "x"]),
        "moments": st.sampled_from(["0,1,0,3,0,15", "0,2,0,12,0,120", "0,1,0,3,0,15,",
                                    "0,1,0,1,0,1", "1,2,3", "0,1,0,3,0,15;0,2,0,12,0,120",
                                    ",0,1,0,3,0,15", "x"]),
        "mixture": st.sampled_from(["0.3:ones,0.7:gaussian", "0.5:gaussian(sigma=0.5;sigma=2),"
                                    "0.5:ones", "0.5:moments,0.5:ones", "1:gaussian(mu=1)",
                                    "0.5:gaussian", ":", "0.5:mixture", "2:ones,-1:gaussian"]),
        "radius": st.sampled_from(["1", "0.9", "1.1", "0", "-1", "nan"]),
        "rotation": st.sampled_from(["diagonal", "real", "haar", "spiral"]),
        "noise": st.sampled_from(["0", "0.1", "-0.5", "inf"]),
        "d": small_int(1, 4), "T": small_int(3, 50)}


_NONE = dict.fromkeys(DATA)


@_settings("data_models")
@given(st.fixed_dictionaries({k: opt(v) for k, v in DATA.items()}))
@example({**_NONE, "x1": "gaussian", "moments": "0,1,0,3,0,15"})
@example({**_NONE, "x1": "moments", "moments": "0,1,0,3,0,15,"})
@example({**_NONE, "x1": "mixture", "mixture": "0.5:gaussian(sigma=0.5;sigma=2),0.5:ones"})
def test_fuzz_data_models(options):
    """``theory`` with the data-model options: an option the family does not use is refused
    (``--moments`` with ``--x1 gaussian`` was ignored), so is a moments text with an empty
    entry (a trailing comma passed) and a mixture parameter given twice (the last one won);
    a success reports the family, d and T it was given."""
    code, out, err = run_case(argv_of(["theory"], options, ["--json"]))
    x1 = options.get("x1") or "gaussian"
    if options.get("moments") is not None and x1 not in ("moments", "mixture"):
        assert code == 2, err
    if x1 == "moments" and "" in (options.get("moments") or "x").split(","):
        assert code == 2, err
    if x1 == "mixture" and "sigma=0.5;sigma=2" in (options.get("mixture") or ""):
        assert code == 2, err
    if code == 0:
        obj = json.loads(out)
        assert obj["family"] == x1 or x1 == "mixture", obj
        if options.get("d") is not None:
            assert obj["d"] == int(options["d"])
        if options.get("T") is not None:
            assert obj["T"] == int(options["T"])


# ---- the size guard is consulted before allocating ---------------------------------------------
GUARDED = st.sampled_from([
    ["train", "--d", "2", "--T", "6", "--m", "8", "--steps", "2"],
    ["ensemble", "--d", "2", "--T", "6", "--n", "2"],
    ["gdflow", "--d", "2", "--T", "6", "--steps", "3", "--m", "0"],
    ["integrate", "--d", "2", "--T", "6", "--field", "mc", "--samples", "64", "--yes"],
    ["integrate", "--d", "2", "--T", "6", "--field", "finite", "--m", "8", "--yes"],
    ["stability", "--d", "2", "--T", "6", "--field", "mc", "--samples", "64"],
])


@_settings("size_guard")
@given(GUARDED, st.sampled_from(["1", "3"]), st.sampled_from(["5", "9", "20"]))
def test_fuzz_the_size_guard_is_consulted(monkeypatch, argv, d, T):
    """Under a 1 kB budget every consumer is refused by the guard with its estimate, exit 2,
    before any work: a consumer that allocated before consulting the guard would run (or die
    of MemoryError) instead."""
    from mesadyn import budget

    monkeypatch.setattr(budget, "memory_budget", lambda: budget.MemoryBudget(1000, "1 kB"))
    argv = [*argv]
    argv[argv.index("--d") + 1], argv[argv.index("--T") + 1] = d, T
    code, out, err = run_case([*argv, "--json"])
    assert code == 2 and out == "", err
    assert "needs about" in err and "(estimate)" in err and "(1 kB)" in err, err
