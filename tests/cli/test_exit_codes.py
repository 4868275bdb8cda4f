"""The exit-code contract of ``mesadyn`` (issue 12, defects 1 and 2; docs/reliability.md).

0 success, 1 a completed run with failures (or an internal error, on one line), 2 bad input,
130 interrupted.  Before the fix, ``main()`` discarded the status typer returned, so Ctrl-C and
``reproduce``'s failing claims both exited 0.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from mesadyn.cli import COMMANDS, load_command, main
from mesadyn.errors import ExitCode, MesadynError, RunFailed


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


def _patch_theory(monkeypatch, exc: BaseException) -> None:
    from mesadyn.workflows import theory as wf

    def boom(*args: object, **kwargs: object) -> object:
        raise exc

    monkeypatch.setattr(wf, "run", boom)


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_interrupt_exits_130(monkeypatch, capsys, json_flag):
    _patch_theory(monkeypatch, KeyboardInterrupt())
    code, out, err = _cli(capsys, "theory", *json_flag)
    assert code == ExitCode.INTERRUPTED == 130
    assert out == ""  # nothing half-written on stdout
    assert err.strip().splitlines()[-1] == "mesadyn: interrupted"
    assert "Traceback" not in err


def test_bad_input_exits_2(capsys):
    code, out, err = _cli(capsys, "theory", "--T", "1")
    assert code == 2 and out == "" and err.startswith("mesadyn: error:") and "T=1" in err
    code, out, err = _cli(capsys, "theory", "--d", "x")
    assert code == 2 and "'x'" in err and "Traceback" not in err
    code, _, err = _cli(capsys, "theroy")
    assert code == 2 and "theory" in err  # suggestion


def test_mesadyn_error_inside_a_command_exits_2(monkeypatch, capsys):
    _patch_theory(monkeypatch, MesadynError("sigma must be > 0, got sigma=-1"))
    code, out, err = _cli(capsys, "theory")
    assert code == 2 and err == "mesadyn: error: sigma must be > 0, got sigma=-1\n"


def test_run_failed_exits_1(monkeypatch, capsys):
    _patch_theory(monkeypatch, RunFailed("2 of 3 points failed"))
    code, out, err = _cli(capsys, "theory", "--json")
    assert code == ExitCode.FAILED == 1
    assert err == "mesadyn: 2 of 3 points failed\n"


@pytest.mark.parametrize("exc", [RuntimeError("solver\nexploded"), AssertionError(),
                                 ZeroDivisionError("float division by zero")])
def test_unexpected_error_is_one_line(monkeypatch, capsys, exc):
    _patch_theory(monkeypatch, exc)
    code, out, err = _cli(capsys, "theory")
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mesadyn: internal error:")
    assert type(exc).__name__ in lines[0] and "--debug" in lines[0]
    assert "Traceback" not in err


def test_debug_shows_the_traceback(monkeypatch, capsys):
    _patch_theory(monkeypatch, RuntimeError("boom"))
    code, _, err = _cli(capsys, "--debug", "theory")
    assert code == 1 and "Traceback (most recent call last)" in err and "boom" in err
    monkeypatch.setenv("MESADYN_DEBUG", "1")
    code, _, err = _cli(capsys, "theory")
    assert code == 1 and "Traceback (most recent call last)" in err
    monkeypatch.setenv("MESADYN_DEBUG", "0")
    code, _, err = _cli(capsys, "theory")
    assert code == 1 and "Traceback" not in err  # --debug does not stick between calls


def test_memory_error_is_one_line(monkeypatch, capsys):
    _patch_theory(monkeypatch, MemoryError())
    code, _, err = _cli(capsys, "theory")
    assert code == 1 and err.startswith("mesadyn: error: out of memory") and "Traceback" not in err


def test_success_returns_0(capsys):
    code, out, err = _cli(capsys, "theory", "--json")
    assert code == 0 and json.loads(out)["T"] == 100


def test_reproduce_exits_1_on_a_failing_claim(monkeypatch, capsys, tmp_path):
    """Defect 2: a FAILed claim must exit 1 (the docs promise it); it exited 0."""
    from mesadyn.reproduce import claims

    spec = claims.CLAIMS["lem5.2"]
    real = spec.check

    def failing(ctx):
        rows = real(ctx)
        return [{**row, "status": claims.FAIL} for row in rows]

    monkeypatch.setitem(claims.CLAIMS, "lem5.2", dataclasses.replace(spec, check=failing))
    code, out, err = _cli(capsys, "reproduce", "--quick", "--only", "lem5.2", "--out",
                          str(tmp_path), "--json")
    assert code == 1, err
    obj = json.loads(out)
    assert obj["all_pass"] is False and {c["status"] for c in obj["claims"]} == {"FAIL"}
    assert "Traceback" not in err


# ---- registration and start-up ------------------------------------------------------------------
def test_every_listed_command_loads_under_its_name():
    for name in COMMANDS:
        assert load_command(name).name == name


def test_every_command_module_is_listed():
    """Registration is explicit: a command module missing from COMMANDS would never run."""
    from pathlib import Path

    import mesadyn.cli as cli

    folder = Path(cli.__file__).parent
    modules = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")}
    listed = {module for module, _ in COMMANDS.values()}
    registering = {m for m in modules if "def register(" in (folder / f"{m}.py").read_text()}
    assert registering == listed


def test_help_imports_no_command_module():
    code = (
        "import sys\nfrom mesadyn.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "from mesadyn.cli import COMMANDS\n"
        "commands = {f'mesadyn.cli.{module}' for module, _ in COMMANDS.values()}\n"
        "loaded = sorted(m for m in sys.modules if m in commands or m.startswith("
        "'mesadyn.workflows') or "
        "m.split('.')[0] in ('torch', 'jax', 'xarray', 'matplotlib', 'scipy', 'dask', 'numpy'))\n"
        "print('LOADED=' + ','.join(loaded))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert "Commands:" in proc.stdout
    loaded = proc.stdout.split("LOADED=")[1].strip()
    assert loaded == "", loaded
    for name in COMMANDS:
        assert f"  {name} " in proc.stdout


class _InterruptAfterWrite:
    """A stdout whose every write is followed by Ctrl-C (SIGINT to this process): the interrupt
    that arrives once the output is written."""

    def __init__(self, real):
        self.real = real

    def write(self, text: str) -> int:
        import os
        import signal

        n = self.real.write(text)
        os.kill(os.getpid(), signal.SIGINT)
        return n

    def flush(self) -> None:
        self.real.flush()


@pytest.mark.parametrize(("argv", "code"), [
    (["theory", "--d", "2", "--T", "6", "--json"], 0),
    (["integrate", "--reduced", "--a0", "0", "--b0", "0", "--json"], 1),
])
def test_an_interrupt_after_the_output_keeps_the_results_exit_code(monkeypatch, capsys, argv,
                                                                  code):
    """A SIGINT in the moment after the ``--json`` object was printed left a complete JSON
    with exit 130 and no message; once the output is written Ctrl-C is ignored and the command
    ends by its result: 0, or 1 with its one-line message."""
    import signal

    before = signal.getsignal(signal.SIGINT)
    monkeypatch.setattr(sys, "stdout", _InterruptAfterWrite(sys.stdout))
    got, out, err = _cli(capsys, *argv)
    assert got == code, err
    assert json.loads(out)["status"]
    assert ("mesadyn: saddle:" in err) == (code == 1) and "interrupted" not in err
    assert signal.getsignal(signal.SIGINT) is before  # an in-process caller gets it back


def test_numerical_warnings_are_not_printed_before_a_one_line_error(monkeypatch, capsys):
    """numpy's RuntimeWarnings (overflow, invalid value) and ComplexWarnings printed lines of
    their own before the one-line error (``integrate --reduced --a0 1e300``: four warnings,
    then 't_end=nan' although no --t-end was given)."""
    import warnings

    import numpy as np

    code, out, err = _cli(capsys, "integrate", "--reduced", "--a0", "1e300", "--b0", "1e300",
                          "--json")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [err.strip()] and "Warning" not in err
    assert "the automatic horizon from (a0, b0) = (1e+300, 1e+300)" in err and "nan" not in err
    from mesadyn.workflows import theory as wf

    def noisy(*args: object, **kwargs: object) -> object:
        warnings.warn("overflow encountered", RuntimeWarning, stacklevel=1)
        np.asarray([1 + 1j]).astype(float)  # a ComplexWarning
        raise MesadynError("a bad value")

    monkeypatch.setattr(wf, "run", noisy)
    code, _, err = _cli(capsys, "theory")
    assert code == 2 and err == "mesadyn: error: a bad value\n"
