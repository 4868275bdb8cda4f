"""Property-based fuzzing of the ``mesadyn`` entry point: the commands of the paper's protocol.

Every case calls :func:`mesadyn.cli.main` in-process with generated arguments — numbers across
many orders of magnitude (integers to ±1e25, every float including NaN, ±inf, subnormals and
±1e300), strings, odd paths (missing folders, a file used as a folder, a directory, a FIFO, an
empty ``.npy``, an archive renamed ``.npy``, wrong suffixes, a 300-character name) — and checks
the contract of ``docs/reliability.md``:

- the exit code is 0, 1 or 2;
- under ``--json``, stdout is empty or exactly one strict JSON object (NaN/Infinity rejected),
  and it is an object whenever the exit code is 0;
- stderr holds no traceback and no "internal error"; a bad-input exit (2) is one line;
- every case ends within :data:`CASE_LIMIT_S` (enforced with SIGALRM: a hang fails the case).

Size of one run (``derandomize=True``: the same cases every run, so CI is reproducible; set
``MESADYN_FUZZ_RANDOM=1`` to draw new ones, ``MESADYN_FUZZ_SCALE=10`` for ten times as many):
see ``fuzz_support.EXAMPLES`` (116 cases in this module; the other commands, run files as
inputs, the size guard and every workflow ``Config`` are fuzzed in ``test_fuzz_runs.py`` and
``tests/workflows/test_fuzz_configs.py``).

Capped by construction, because the command would legitimately run long (not a defect):
``integrate --reduced`` uses ``--t-end`` <= 1 when it is given a sane value (its dopri5
takes ~5 s per unit of τ at d = 5, T = 100 on the loaded development machine); full flows use
d <= 2, T <= 10, ``--max-steps`` <= 2000 (<= 200 on sampled fields) and ``--samples`` <= 2000;
stability d <= 2, T <= 8; train m <= 64, steps <= 5; portrait d <= 3, T <= 50, dpi <= 120
and GD runs <= 20 steps; ``reproduce`` runs a claim only as ``--quick --only lem5.2`` (its
cheapest); sweeps run inline (``--workers 0``, a Dask cluster start takes seconds) over at
most 3 points. Sizes that must be *refused* quickly (d, T, m, samples up to 1e25, NaN, inf,
negative, non-integers) are fuzzed freely on the closed forms (``theory``, ``integrate
--reduced``) and as invalid values elsewhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzz_support import (
    FAMILY,
    FAMILY_WILD,
    HUGE,
    any_float,
    argv_of,
    bad_size,
    case,
    choice,
    floats,
    opt,
    paths,
    resolve,
    run_case,
    small_int,
    wild_number,
)
from fuzz_support import fuzz_settings as _settings
from hypothesis import given
from hypothesis import strategies as st


@pytest.fixture(scope="module", autouse=True)
def _warm(warm_imports):
    """The heavy imports, once (``conftest.warm_imports``)."""


# ---- the closed forms: everything goes ---------------------------------------------------------
@_settings("theory")
@given(case({**FAMILY, "d": small_int(1, 64), "T": small_int(3, 10**6), "seed": small_int(0, 9)},
            {**FAMILY_WILD, "d": HUGE, "T": HUGE}), st.booleans())
def test_fuzz_theory(options, as_json):
    run_case(argv_of(["theory"], options, ["--json"] if as_json else []))


REDUCED = {**FAMILY, "d": small_int(1, 8), "T": small_int(3, 10**5), "a0": floats(-3, 3),
           "b0": floats(-3, 3), "rtol": st.sampled_from(["1e-6", "1e-8", "1e-10"]),
           "t-end": floats(1e-3, 1.0), "n-save": small_int(2, 50),
           "solver": st.sampled_from(["auto", "scipy:LSODA", "torchdiffeq:dopri5", "LSODA",
                                      "dopri5"])}
REDUCED_WILD = {**FAMILY_WILD, "d": HUGE, "T": HUGE, "a0": any_float, "b0": any_float,
                "rtol": any_float, "atol": any_float, "t-end": any_float,
                "n-save": bad_size, "max-steps": bad_size,
                "solver": choice("auto", "diffrax:Dopri5", "scipy:BDF")}


@_settings("integrate_reduced")
@given(case(REDUCED, REDUCED_WILD), st.booleans())
def test_fuzz_integrate_reduced(options, as_json):
    run_case(argv_of(["integrate", "--reduced"], options, ["--json"] if as_json else []))


# ---- full flows, analyses, training: sizes capped ----------------------------------------------
FULL = {**FAMILY, "d": small_int(1, 2), "T": small_int(3, 10), "a0": floats(-2, 2),
        "b0": floats(-2, 2), "t-end": floats(0.1, 20.0), "n-save": small_int(2, 20),
        "field": st.sampled_from(["exact", "exact", "mc", "finite"]),
        "samples": small_int(2, 2000), "m": small_int(1, 200),
        "mask": st.sampled_from(["none", "diagonal"]),
        "init": st.sampled_from(["diagonal", "gaussian"]), "sigma-w": floats(1e-3, 0.5),
        "max-steps": small_int(1, 2000), "out": paths("ok.nc")}
FULL_WILD = {**FAMILY_WILD, "d": bad_size, "T": bad_size, "a0": any_float, "b0": any_float,
             "rtol": any_float, "atol": any_float, "t-end": any_float,
             "steady-tol": any_float, "sigma-w": any_float, "samples": bad_size,
             "m": bad_size, "field": choice("exact"), "mask": choice("none"),
             "init": choice("diagonal"), "max-steps": bad_size, "n-save": bad_size}


@_settings("integrate_full")
@given(case(FULL, FULL_WILD, always=("d", "T", "max-steps")), st.booleans())
def test_fuzz_integrate_full_flow(odd, options, as_json):
    if options.get("out") is not None:
        options["out"] = resolve(options["out"], odd)
    if options.get("field") in ("mc", "finite") and options["max-steps"].isdigit():
        options["max-steps"] = str(min(int(options["max-steps"]), 200))
    run_case(argv_of(["integrate"], options, ["--json"] if as_json else []))


STABILITY = {**FAMILY, "d": small_int(1, 2), "T": small_int(3, 8), "a0": floats(-2, 2),
             "b0": floats(-2, 2), "field": st.sampled_from(["exact", "mc"]),
             "samples": small_int(2, 2000), "t-end": floats(1.0, 100.0),
             "point": paths("good.npy"), "plot": paths("ok.png", "ok.pdf")}
STABILITY_WILD = {**FAMILY_WILD, "d": bad_size, "T": bad_size, "a0": any_float,
                  "b0": any_float, "samples": bad_size, "t-end": any_float,
                  "zero-rtol": any_float, "field": choice("exact")}


@_settings("stability")
@given(case(STABILITY, STABILITY_WILD, always=("d", "T", "samples")), st.booleans())
def test_fuzz_stability(odd, options, as_json):
    for key in ("point", "plot"):
        if options.get(key) is not None:
            options[key] = resolve(options[key], odd)
    run_case(argv_of(["stability"], options, ["--json"] if as_json else []))


TRAIN = {**FAMILY, "d": small_int(1, 3), "T": small_int(3, 12), "m": small_int(1, 64),
         "m-test": small_int(1, 16), "steps": small_int(1, 5), "lr": floats(1e-6, 1e-2),
         "init": st.sampled_from(["diagonal", "gaussian"]), "a0": floats(-1, 1),
         "b0": floats(-1, 1), "sigma-w": floats(1e-3, 0.3), "eval-every": small_int(1, 5),
         "seed": small_int(0, 5), "device": st.sampled_from(["cpu", "auto"]),
         "out": paths("ok.nc")}
TRAIN_WILD = {**FAMILY_WILD, "d": bad_size, "T": bad_size, "m": bad_size, "m-test": bad_size,
              "steps": bad_size, "lr": any_float, "init": choice("diagonal"), "a0": any_float,
              "b0": any_float, "sigma-w": any_float, "eval-every": bad_size,
              "device": choice("cpu", "cuda:7", "mps")}


@_settings("train")
@given(case(TRAIN, TRAIN_WILD, always=("d", "T", "m", "m-test", "steps")), st.booleans())
def test_fuzz_train(odd, options, as_json):
    if options.get("out") is not None:
        options["out"] = resolve(options["out"], odd)
    run_case(argv_of(["train"], options, ["--json"] if as_json else []))


PORTRAIT = {**FAMILY, "d": small_int(1, 3), "T": small_int(3, 50), "window": floats(0.5, 5),
            "density": floats(0.3, 2.0), "dpi": small_int(10, 120),
            "out": paths("ok.png", "ok.pdf")}
PORTRAIT_WILD = {**FAMILY_WILD, "d": bad_size, "T": bad_size, "window": any_float,
                 "density": any_float, "dpi": bad_size}


@_settings("portrait")
@given(case(PORTRAIT, PORTRAIT_WILD, always=("out", "d", "T")), st.booleans())
def test_fuzz_portrait(odd, options, as_json):
    options["out"] = resolve(options["out"], odd)
    run_case(argv_of(["portrait"], options, ["--json"] if as_json else []))


@_settings("reproduce")
@given(st.fixed_dictionaries({
    "only": st.sampled_from(["lem5.2", "lem5.2", "thm9.9", "", "lem5.2,bogus", " "]),
    "seed": opt(st.one_of(wild_number, small_int(0, 3))),
    "m": opt(st.one_of(bad_size, small_int(10, 100))),
    "out": st.sampled_from(["adir", "new", "new", "afile", "afile/x", "missing/deeper",
                            "fifo", ""]),
}), st.booleans())
def test_fuzz_reproduce(odd, tmp_path_factory, options, as_json):
    kind = options["out"]
    if kind in ("adir", "new"):  # a fresh folder per case: results are cached in it
        options["out"] = str(tmp_path_factory.mktemp("repro") / kind)
    else:
        options["out"] = resolve(kind, odd)
    run_case(argv_of(["reproduce"], options, ["--quick"] + (["--json"] if as_json else [])))


# ---- sweeps: specs are data ---------------------------------------------------------------------
SPEC_HEADS = ['workflow = "theory"'] * 6 + [
    'command = "theory --d=2"', 'workflow = "bogus"', 'command = "os:system"',
    'command = "mesadyn.io:to_json"', 'workflow = ""', 'workflow = 3', "",
    'workflow = "integrate"']
toml_value = st.one_of(
    st.sampled_from(['"gaussian"', '"ones"', "0.5", "2.0", "3", "1"]),
    st.integers(-10**20, 10**20).map(str), st.floats(allow_nan=False).map(repr),
    st.sampled_from(['"gaussian"', '"x"', "nan", "inf", "-inf", "true", "[]", "{}",
                     '"../../etc/passwd"', '"/abs/x.nc"', '"T{T}.nc"', '"{bogus}"']))


@_settings("sweep")
@given(st.sampled_from(SPEC_HEADS),
       st.dictionaries(st.sampled_from(["sigma", "x1", "d", "out", "bogus", "a0", "seed"]),
                       toml_value, max_size=2),
       st.one_of(st.lists(st.integers(3, 30), min_size=1, max_size=3, unique=True),
                 st.lists(st.one_of(st.integers(-5, 20), st.sampled_from([10**6, 2**70])),
                          max_size=3)),
       st.sampled_from(["new"] * 4 + ["afile", "afile/x", "fifo", "", "adir-nonsweep"]),
       st.sampled_from([[]] * 4 + [["--allow-code"], ["--workers", "-1"], ["--format", "csv"],
                                   ["--connect-timeout", "nan"]]),
       st.booleans())
def test_fuzz_sweep(odd, tmp_path_factory, head, options, axis, out_kind, extra, as_json):
    folder = tmp_path_factory.mktemp("sweep")
    lines = [head, "[options]", *(f"{k} = {v}" for k, v in options.items()),
             "[axes]", f"T = [{', '.join(map(str, axis))}]"]
    spec = folder / "spec.toml"
    spec.write_text("\n".join(lines) + "\n")
    if out_kind == "new":
        out = str(folder / "out")
    elif out_kind == "adir-nonsweep":
        (folder / "busy").mkdir()
        (folder / "busy" / "keep.txt").write_text("x")
        out = str(folder / "busy")
    else:
        out = resolve(out_kind, odd)
    code, _, _ = run_case(["sweep", str(spec), "--out", out, "--workers", "0", *extra,
                           *(["--json"] if as_json else [])])
    assert not Path("/abs/x.nc").exists()
    if 'os:system' in head and "--allow-code" not in extra:
        assert code == 2


# ---- token soup: arbitrary argument lists on the cheap commands --------------------------------
TOKENS = ["theory", "--reduced", "--json", "--x1", "--sigma", "--d", "--T",
          "--seed", "--a0", "--help", "--debug", "--bogus", "-", "--", "sweep", "thoery",
          "=", "--T=5", "--d=1", "--sigma=nan", "gaussian", "ones"]


@_settings("tokens")
@given(st.lists(st.one_of(st.sampled_from(TOKENS), wild_number), max_size=8))
def test_fuzz_token_soup(tokens):
    # keep it cheap: only theory runs (anything else stops at parsing or --help)
    if "sweep" in tokens:
        tokens = [t for t in tokens if t != "sweep"] + ["--help"]
    run_case(tokens)


# ---- defects the fuzzing found beyond issue 12's list ------------------------------------------
#: Each was found by a random run (``MESADYN_FUZZ_RANDOM=1``): token scales whose sixth powers
#: overflow or underflow float64 raised OverflowError/ZeroDivisionError.  Scales are now bounded
#: (``mesadyn.process.SCALE_RANGE``), so each gives one line and exit 2.
FOUND_DEFECTS = [
    (["theory", "--sigma", "2.4e51"], "OverflowError in process.py: sigma**6 overflowed"),
    (["theory", "--x1", "sparse", "--scale", "1e100"], "OverflowError in process.py (c**6)"),
    (["theory", "--sigma", "1e-300", "--json"],
     "ZeroDivisionError in theory.py: the moments underflowed to 0 and ab* = c2/c1 divided by 0"),
    (["theory", "--x1", "sparse", "--scale", "1e-200", "--json"],
     "ZeroDivisionError in theory.py (moments underflowed)"),
]


@pytest.mark.parametrize(("argv", "why"), FOUND_DEFECTS, ids=[" ".join(a) for a, _ in
                                                               FOUND_DEFECTS])
def test_found_defects_stay_fixed(argv, why):
    code, _, err = run_case(argv)
    assert code == 2, why
    assert "must lie in" in err, why
