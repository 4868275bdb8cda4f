"""What the fuzz tests share (``test_fuzz.py``, ``test_fuzz_runs.py`` and
``tests/workflows/test_fuzz_configs.py``): the number of cases of each (:data:`EXAMPLES`), the
value strategies, and :func:`run_case`, which runs one command line in-process and checks the
contract of ``docs/reliability.md`` (exit 0, 1 or 2; strict JSON; one line for bad input; no
traceback; no hang).  The folder of odd paths is the ``odd`` fixture of ``conftest.py``.
"""

from __future__ import annotations

import io
import json
import os
import signal
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from mesadyn.cli import main

#: Wall-clock limit of one case.  Generous for a loaded shared machine: the slowest legitimate
#: case measured (``portrait --d 1 --T 3``) took 14-29 s there; a hang fails after this.
CASE_LIMIT_S = 60.0
#: Cases per test function (their sum is :data:`TOTAL`): the commands of ``test_fuzz.py``, then
#: those of ``test_fuzz_runs.py`` (continue, ensemble, gdflow, gd, rerun, the data models, run
#: files as inputs, the size guard).  ``tests/workflows/test_fuzz_configs.py`` adds its own
#: (every workflow ``Config``).
EXAMPLES = {"theory": 30, "integrate_reduced": 10, "integrate_full": 8, "stability": 5,
            "train": 10, "portrait": 2, "reproduce": 5, "sweep": 16, "tokens": 30,
            "continue": 6, "ensemble": 8, "gdflow": 5, "gd": 5, "rerun": 10, "run_files": 10,
            "data_models": 20, "size_guard": 12}
#: Cases per run, in all.
TOTAL = sum(EXAMPLES.values())
RANDOM = os.environ.get("MESADYN_FUZZ_RANDOM", "") not in ("", "0")
SCALE = max(1, int(os.environ.get("MESADYN_FUZZ_SCALE", "1") or 1))


def fuzz_settings(name: str) -> settings:
    """The hypothesis settings of the fuzz test ``name``: :data:`EXAMPLES` cases times
    ``MESADYN_FUZZ_SCALE``, derandomised unless ``MESADYN_FUZZ_RANDOM``, no database."""
    return settings(max_examples=EXAMPLES[name] * SCALE, deadline=None, derandomize=not RANDOM,
                    database=None, suppress_health_check=list(HealthCheck))


# ---- values ------------------------------------------------------------------------------------
ODD_STRINGS = ["nan", "-nan", "NaN", "inf", "-inf", "Infinity", "1e309", "-1e309", "5e-324",
               "-0.0", "0", "1e-300", "1e300", "", " ", "abc", "1e", "0x10", "1_000", "١",
               "−1", "--json", "None", "true", "[1]", "1,2", "\u00e9", "\t"]

wild_number = st.one_of(
    st.integers(min_value=-10**25, max_value=10**25).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(ODD_STRINGS),
)
#: Magnitudes across many orders, both signs, as typed on a command line.
magnitude = st.builds(lambda m, e, s: f"{s}{m}e{e}", st.integers(1, 9),
                      st.integers(-320, 320), st.sampled_from(["", "-"]))
any_float = st.one_of(wild_number, magnitude)
#: Sizes that are never expensive: invalid ones (refused up front) or None (not given).
bad_size = st.one_of(st.integers(-10**25, 2).map(str), st.sampled_from(
    ["2.5", "nan", "inf", "-inf", "1e3", "abc", "", "3.0", str(2**64), str(10**25)]))


def small_int(lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.integers(lo, hi).map(str)


def choice(*good: str) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(good), st.sampled_from(["bogus", "", "GAUSSIAN", "1",
                                                             "nan", "gaussian "]))


X1 = choice("gaussian", "sparse", "ones", "rademacher", "uniform")
PATH_KINDS = ["ok.nc", "ok.pdf", "ok.png", "missing/dir/x.nc", "afile/x.nc", "adir", "fifo",
              "x.txt", "", "/", "long", "empty.npy", "renamed.npy", "good.npy", "afile",
              "dot/../ok.nc"]


def paths(*good: str) -> st.SearchStrategy[str]:
    """Mostly a good path (so that the command runs), sometimes any odd one."""
    return st.one_of(st.sampled_from(good), st.sampled_from(good), st.sampled_from(PATH_KINDS))


def resolve(kind: str, root: Path) -> str:
    if kind == "":
        return ""
    if kind == "/":
        return "/"
    if kind == "long":
        return str(root / ("x" * 300 + ".nc"))
    return str(root / kind)


#: The run files and arrays of ``conftest.run_files``, by kind of input: valid, foreign, malformed
#: or truncated (each a file name in the fixture's folder).
RUN_FILES = ("theory.nc", "integrate.nc", "ensemble.nc", "foreign.nc", "noconfig.nc",
             "badconfig.nc", "truncated.nc", "plain.png", "starts.npy", "starts_complex.npy",
             "starts_bool.npy", "starts_str.npy", "starts_1d.npy", "starts_nan.npy",
             "starts_truncated.npy", "point.npy")



# ---- running one case --------------------------------------------------------------------------
#: (command, exit code, seconds) of every case run in this process.
STATS: list[tuple[str, int, float]] = []


class CaseTimeout(BaseException):  # noqa: N818 - not an Exception: the CLI guard must not catch it
    """Raised by SIGALRM inside a case that ran too long."""


def _alarm(signum, frame):  # noqa: ARG001
    raise CaseTimeout


def _strict(text: str) -> object:
    def reject(const: str) -> object:
        raise ValueError(f"non-strict JSON constant {const}")

    return json.loads(text, parse_constant=reject)


def run_case(argv: list[str]) -> tuple[int, str, str]:
    """Run ``mesadyn argv`` in-process and check the contract; return (code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_LIMIT_S)
    t0 = time.perf_counter()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else -1
    except CaseTimeout:
        pytest.fail(f"mesadyn {' '.join(map(repr, argv))} ran longer than {CASE_LIMIT_S} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    wall = time.perf_counter() - t0
    stdout, stderr = out.getvalue(), err.getvalue()
    where = f"mesadyn {' '.join(map(repr, argv))} -> {code}\nstderr: {stderr[-1500:]}"
    assert code in (0, 1, 2), where
    assert "Traceback" not in stderr and "internal error" not in stderr, where
    if code == 2:
        lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("mesadyn: error:"), where
    if "--json" in argv:
        if stdout.strip():
            try:
                obj = _strict(stdout)
            except ValueError as exc:
                pytest.fail(f"{where}\nstdout is not strict JSON ({exc}): {stdout[:500]}")
            assert isinstance(obj, dict), where
            assert stdout.count("\n") == 1, where  # exactly one object, one line
        else:
            assert code != 0, f"{where}\n--json printed nothing on success"
    assert wall < CASE_LIMIT_S, where
    STATS.append((argv[0] if argv else "", code, wall))
    if os.environ.get("MESADYN_FUZZ_LOG"):
        with open(os.environ["MESADYN_FUZZ_LOG"], "a") as fh:
            fh.write(json.dumps({"argv": argv, "code": code, "wall": round(wall, 3),
                                 "err": stderr.strip().splitlines()[-1:]}) + "\n")
    return code, stdout, stderr


def argv_of(command: list[str], options: dict[str, str | None], flags: list[str]) -> list[str]:
    argv = list(command)
    for name, value in options.items():
        if value is not None:
            argv += [f"--{name}", value]
    return argv + flags


def opt(strategy: st.SearchStrategy[str]) -> st.SearchStrategy[str | None]:
    """Given (a value) or not given (None)."""
    return st.one_of(st.none(), strategy)


# ---- building cases: sane values, then one or two extreme ones ---------------------------------
def case(valid: dict[str, st.SearchStrategy[str]], wild: dict[str, st.SearchStrategy[str]],
         *, always: tuple[str, ...] = (), max_wild: int = 2) -> st.SearchStrategy[dict]:
    """Options with sane values (each given or not; ``always`` always given), then up to
    ``max_wild`` of them replaced by extreme or invalid values: most cases run, each with a
    few extremes, instead of nearly all stopping at the first bad value."""
    base = st.fixed_dictionaries({k: (v if k in always else opt(v)) for k, v in valid.items()})
    keys = st.lists(st.sampled_from(sorted(wild)), max_size=max_wild, unique=True)
    return st.tuples(base, keys.flatmap(
        lambda ks: st.fixed_dictionaries({k: wild[k] for k in ks}))).map(
        lambda bw: {**bw[0], **bw[1]})


def floats(lo: float, hi: float) -> st.SearchStrategy[str]:
    return st.floats(lo, hi).map(repr)


FAMILY = {"x1": st.sampled_from(["gaussian", "sparse", "ones", "rademacher", "uniform"]),
          "sigma": floats(0.2, 3.0), "scale": floats(0.2, 3.0)}
FAMILY_WILD = {"x1": X1, "sigma": any_float, "scale": any_float,
               "seed": st.one_of(wild_number, magnitude)}
#: Sizes on the closed forms: huge ones must be refused or computed in O(1), never hang.
HUGE = st.one_of(bad_size, magnitude, st.integers(10**6, 10**25).map(str), wild_number)


