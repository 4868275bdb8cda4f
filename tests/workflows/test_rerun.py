"""Every run file rebuilds its configuration from the file alone and reruns to the same numbers
(``mesadyn rerun FILE``), with the data models beyond the paper recorded as JSON.

(The continuation, stability, portrait and gdflow round trips are in their own test modules.)
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from mesadyn.cli import main
from mesadyn.errors import MesadynError
from mesadyn.io import load_run, run_config
from mesadyn.workflows import read_record, rerun

#: (workflow, options with non-default data-model options); small and quick.
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "theory-shifted-radius": ("theory", {"x1": "shifted", "mu": 0.3, "d": 2, "T": 6,
                                         "radius": 0.9}),
    "integrate-reduced-mixture": ("integrate", {
        "reduced": True, "x1": "mixture", "d": 2, "T": 6,
        "mixture": "0.3:gaussian(sigma=0.5),0.7:gaussian(sigma=2)"}),
    "integrate-mc-real-noise": ("integrate", {
        "field": "mc", "samples": 256, "x1": "gaussian", "d": 2, "T": 6, "rotation": "real",
        "noise": 0.1, "t_end": 0.2, "steady_tol": 0.0, "n_save": 5}),
    "train-radius-real": ("train", {"x1": "gaussian", "d": 2, "T": 6, "m": 16, "steps": 3,
                                    "lr": 1e-3, "radius": 0.9, "rotation": "real"}),
    "ensemble-radius": ("ensemble", {"d": 2, "T": 6, "n": 2, "radius": 0.9, "rtol": 1e-6,
                                     "atol": 1e-9, "steady_tol": 1e-6}),
    "gd-reduced-radius": ("gd", {"reduced": True, "d": 2, "T": 6, "eta": 1e-3, "steps": 20,
                                 "radius": 0.9, "a0": 0.5, "b0": 1.5}),
    "gd-mc-shifted": ("gd", {"field": "mc", "samples": 128, "x1": "shifted", "mu": 0.2,
                             "d": 2, "T": 6, "eta": 1e-3, "steps": 5, "sharpness_every": 0}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_run_file_reruns_from_itself_to_the_same_numbers(case: str, tmp_path: Path):
    name, options = CASES[case]
    module = importlib.import_module(f"mesadyn.workflows.{name}")
    path = tmp_path / "run.nc"
    module.run(module.Config(**options, out=str(path)))
    recorded = run_config(load_run(path, kind=name))
    for key, value in options.items():  # every given option is in the file, as given
        assert recorded[key] == value, key
    rebuilt = module.Config.from_run(path)
    assert rebuilt.run_config() == module.Config(**options).run_config()
    again = rerun(path)
    assert again.ok and again.differences == (), again.message
    assert read_record(path).kind == name


def test_the_rerun_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    name, options = CASES["theory-shifted-radius"]
    path = tmp_path / "t.nc"
    importlib.import_module(f"mesadyn.workflows.{name}").run(
        importlib.import_module(f"mesadyn.workflows.{name}").Config(**options, out=str(path)))
    assert main(["rerun", str(path), "--json"]) == 0
    assert '"differences": []' in capsys.readouterr().out


def test_a_changed_number_is_a_difference(tmp_path: Path):
    """The comparison can fail: a stored result edited by 1e-8 relative is reported."""
    import json

    import xarray as xr

    from mesadyn.io import save_run

    name, options = CASES["theory-shifted-radius"]
    module = importlib.import_module(f"mesadyn.workflows.{name}")
    path = tmp_path / "t.nc"
    module.run(module.Config(**options, out=str(path)))
    ds = load_run(path)
    result = json.loads(ds.attrs["result"])
    result["c1"] *= 1 + 1e-8
    edited = xr.Dataset(attrs={**ds.attrs, "result": json.dumps(result)})
    save_run(edited, tmp_path / "e.nc", kind=name, config=run_config(ds), seed=1)
    out = rerun(tmp_path / "e.nc")
    assert not out.ok and len(out.differences) == 1 and ".c1" in out.differences[0]


def test_a_file_written_before_the_contract_is_refused_by_name(tmp_path: Path):
    import xarray as xr

    from mesadyn.io import save_run
    from mesadyn.workflows import integrate

    save_run(xr.Dataset(), tmp_path / "old.nc", kind="integrate", config={"x1": "gaussian"})
    with pytest.raises(MesadynError, match="before run files held their result"):
        rerun(tmp_path / "old.nc")
    with pytest.raises(MesadynError, match="format.*before run files recorded every option"):
        integrate.Config.from_run(tmp_path / "old.nc")


def test_a_change_replaces_the_recorded_value(tmp_path) -> None:
    """``rerun FILE --device cpu`` on a run that recorded its device raised an internal
    TypeError ('got multiple values for keyword argument device'): a change given to
    ``Config.from_run`` replaces the recorded value."""
    from mesadyn.workflows import integrate

    out = tmp_path / "i.nc"
    integrate.run(integrate.Config(d=1, T=3, out=str(out)))
    again = integrate.Config.from_run(out, device="cpu", steady_tol=1e-6)
    assert again.device == "cpu" and again.steady_tol == 1e-6 and again.d == 1
