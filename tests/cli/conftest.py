"""Shared fixtures of the CLI tests: the folder of odd paths the fuzz tests point at, and the
heavy imports done once, outside any fuzz case's time limit (``fuzz_support.py``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


@pytest.fixture(scope="module")
def odd(tmp_path_factory) -> Path:
    """A folder of odd things to point paths at (one per module: cases only read or replace)."""
    root = tmp_path_factory.mktemp("odd")
    (root / "afile").write_text("not a folder")
    (root / "adir").mkdir()
    (root / "dot").mkdir()
    os.mkfifo(root / "fifo")
    (root / "empty.npy").write_bytes(b"")
    np.savez(root / "arch.npz", a=np.arange(3))
    (root / "arch.npz").rename(root / "renamed.npy")
    np.save(root / "good.npy", np.zeros(18))
    return root


@pytest.fixture(scope="module")
def run_files(tmp_path_factory) -> Path:
    """A folder of inputs for the commands that read files (``rerun``, ``--point``,
    ``--init-file``, ``--gd-run``): valid run files of theory, integrate (d = 1, T = 3) and
    ensemble; a netCDF file mesadyn did not write; one without its ``config``; one whose
    ``config`` is not JSON; a run file cut in half; a PNG without provenance; ``.npy`` starts
    for d = 1 (real; complex, boolean, strings, one-dimensional, with a NaN, truncated) and a
    point of 18 entries."""
    import xarray as xr

    from mesadyn.cli import main

    root = tmp_path_factory.mktemp("runs")
    for argv in (["theory", "--d", "1", "--T", "3", "--out", str(root / "theory.nc")],
                 ["integrate", "--d", "1", "--T", "3", "--out", str(root / "integrate.nc")],
                 ["ensemble", "--d", "1", "--T", "3", "--n", "2", "--out",
                  str(root / "ensemble.nc")]):
        try:
            main([*argv, "--json"])
        except SystemExit:
            pass
    xr.Dataset({"x": ("i", np.arange(3.0))}).to_netcdf(root / "foreign.nc")
    good = xr.open_dataset(root / "theory.nc").load()
    bad = good.copy()
    del bad.attrs["config"]
    bad.to_netcdf(root / "noconfig.nc")
    bad = good.copy()
    bad.attrs["config"] = "{not json"
    bad.to_netcdf(root / "badconfig.nc")
    raw = (root / "integrate.nc").read_bytes()
    (root / "truncated.nc").write_bytes(raw[: len(raw) // 2])
    (root / "plain.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    rng = np.random.default_rng(0)
    starts = 0.1 * rng.standard_normal((2, 18))
    np.save(root / "starts.npy", starts)
    np.save(root / "starts_complex.npy", starts + 1j)
    np.save(root / "starts_bool.npy", starts > 0)
    np.save(root / "starts_str.npy", starts.astype(str))
    np.save(root / "starts_1d.npy", starts[0])
    nan = starts.copy()
    nan[0, 3] = np.nan
    np.save(root / "starts_nan.npy", nan)
    np.save(root / "starts_truncated.npy", np.zeros((1000, 18)))
    data = (root / "starts_truncated.npy").read_bytes()
    (root / "starts_truncated.npy").write_bytes(data[:400])
    np.save(root / "point.npy", starts[0])
    return root


@pytest.fixture(scope="session")
def warm_imports():
    """Import the heavy modules once, outside any case's time limit."""
    import mesadyn.field  # noqa: F401
    import mesadyn.flow  # noqa: F401
    import mesadyn.plots  # noqa: F401
    import mesadyn.workflows.integrate  # noqa: F401
    import mesadyn.workflows.theory  # noqa: F401
