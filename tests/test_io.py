"""Runs on disk: atomic netCDF writes with provenance; no pickles; clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from mesadyn.errors import MesadynError
from mesadyn.io import atomic_write_text, load_run, run_config, save_run, to_json, version


def _ds() -> xr.Dataset:
    return xr.Dataset({"loss": ("step", np.linspace(1.0, 0.0, 5)),
                       "theta": (("step", "param"), np.arange(15.0).reshape(5, 3))},
                      coords={"step": np.arange(5)})


def test_round_trip_with_provenance(tmp_path):
    cfg = {"family": {"family": "gaussian", "sigma": 1.0}, "T": 100, "arr": np.arange(3)}
    path = save_run(_ds(), tmp_path / "sub" / "run.nc", kind="train", config=cfg, seed=7)
    back = load_run(path, kind="train")
    xr.testing.assert_identical(back.drop_attrs(), _ds())
    assert back.attrs["seed"] == 7 and back.attrs["mesadyn_version"] == version()
    assert run_config(back) == {"family": {"family": "gaussian", "sigma": 1.0}, "T": 100,
                                "arr": [0, 1, 2]}
    assert [p.name for p in path.parent.iterdir()] == ["run.nc"]  # no temp files left


def test_errors(tmp_path):
    with pytest.raises(MesadynError, match="run.pkl"):
        save_run(_ds(), tmp_path / "run.pkl", kind="train", config={})
    with pytest.raises(MesadynError, match="not found"):
        load_run(tmp_path / "missing.nc")
    path = save_run(_ds(), tmp_path / "a.nc", kind="integrate", config={})
    with pytest.raises(MesadynError, match="expected a 'train' run"):
        load_run(path, kind="train")
    foreign = tmp_path / "foreign.nc"
    _ds().to_netcdf(foreign, engine="h5netcdf")
    with pytest.raises(MesadynError, match="not a mesadyn run file"):
        load_run(foreign)
    junk = tmp_path / "junk.nc"
    junk.write_bytes(b"not netcdf at all")
    with pytest.raises(MesadynError, match="cannot read"):
        load_run(junk)


def test_atomic_text_and_json(tmp_path):
    p = atomic_write_text(tmp_path / "x" / "out.json", to_json({"a": np.float64(1.5),
                                                               "b": np.arange(2)}))
    assert json.loads(p.read_text()) == {"a": 1.5, "b": [0, 1]}
    assert [q.name for q in p.parent.iterdir()] == ["out.json"]
