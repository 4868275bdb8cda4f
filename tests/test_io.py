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


# ---- strict JSON (issue 12, defect 3) ---------------------------------------------------------
def _strict_loads(text: str):
    def reject(const: str):
        raise ValueError(f"non-strict JSON constant {const}")

    return json.loads(text, parse_constant=reject)


def test_to_json_is_strict_with_reasons():
    obj = {"a": float("nan"), "b": np.float64(np.inf), "c": -np.inf, "d": 1.5,
           "v": np.array([1.0, np.nan, np.inf]), "n": {"x": np.float32("nan")},
           "t": (1, float("nan")), "e": float("nan"), "e_reason": "no test sequences"}
    text = to_json(obj)
    back = _strict_loads(text)  # raises on NaN/Infinity
    assert back["a"] is None and back["a_reason"].startswith("NaN")
    assert back["b"] is None and back["b_reason"] == "+infinity"
    assert back["c"] is None and back["c_reason"] == "-infinity"
    assert back["d"] == 1.5 and "d_reason" not in back
    assert back["v"] == [1.0, None, None] and "non-finite" in back["v_reason"]
    assert back["n"] == {"x": None, "x_reason": "NaN (not a number)"}
    assert back["t"] == [1, None]
    assert back["e_reason"] == "no test sequences"  # the producer's own reason is kept
    # the old encoder emitted bare NaN, which a strict parser rejects
    with pytest.raises(ValueError, match="non-strict"):
        _strict_loads(json.dumps({"a": float("nan")}))


def test_to_json_unencodable_is_a_type_error():
    with pytest.raises(TypeError, match="JSON"):
        to_json({"f": object()})


# ---- output paths checked before work (issue 12, defect 5) ----------------------------------
def test_check_writable(tmp_path):
    from mesadyn.io import check_writable

    ok = check_writable(tmp_path / "run.nc", suffixes=(".nc",))
    assert ok == tmp_path / "run.nc" and not ok.exists()
    assert check_writable(str(tmp_path / "fig.PNG"), suffixes=(".png", ".pdf")).name == "fig.PNG"
    (tmp_path / "adir").mkdir()
    afile = tmp_path / "afile"
    afile.write_text("x")
    cases = {
        tmp_path / "missing" / "run.nc": "does not exist",
        afile / "run.nc": "is a file",  # parent is a file
        tmp_path / "adir": "is a directory",
        tmp_path / "run.txt": "must end in .nc",
        "": "must not be empty",
    }
    for path, msg in cases.items():
        with pytest.raises(MesadynError, match=msg) as info:
            check_writable(path, suffixes=None if path == tmp_path / "adir" else (".nc",))
        assert "\n" not in str(info.value)
        if str(path):
            assert str(path) in str(info.value)


def test_check_writable_refuses_fifo_and_readonly(tmp_path):
    import os

    from mesadyn.io import check_writable

    fifo = tmp_path / "pipe.nc"
    os.mkfifo(fifo)
    with pytest.raises(MesadynError, match="not a regular file"):
        check_writable(fifo)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):  # running as root: permissions are not enforced
            pytest.skip("permissions not enforced for this user")
        with pytest.raises(MesadynError, match="not writable"):
            check_writable(ro / "x.nc")
    finally:
        ro.chmod(0o700)


def test_check_writable_dir(tmp_path):
    from mesadyn.io import check_writable_dir

    assert check_writable_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b"  # created later
    assert check_writable_dir(tmp_path) == tmp_path
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(MesadynError, match="exists and is not a folder"):
        check_writable_dir(f)
    with pytest.raises(MesadynError, match="is not a folder"):
        check_writable_dir(f / "sub" / "deeper")


# ---- leftovers of killed writers (issue 12, defect 9) ----------------------------------------
def test_clean_stale_tmp(tmp_path):
    import os
    import subprocess
    import sys
    import time

    from mesadyn.io import _tmp_prefix, clean_stale_tmp

    # a writer that died: a real process that has exited
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(proc.stdout)
    mine = _tmp_prefix("run.nc")
    dead_name = mine.replace(f"-{os.getpid()}.", f"-{dead}.") + "abc123.tmp"
    (tmp_path / dead_name).write_bytes(b"half")
    live = tmp_path / (mine + "zzz999.tmp")  # this process: alive, kept
    live.write_bytes(b"half")
    foreign = tmp_path / ".run.nc.otherhost-1.q1w2e3.tmp"  # another host, fresh: kept
    foreign.write_bytes(b"x")
    legacy_old = tmp_path / ".run.nc.abcdefgh.tmp"  # old-style name, a day old: removed
    legacy_old.write_bytes(b"x")
    old = time.time() - 2 * 24 * 3600
    os.utime(legacy_old, (old, old))
    keep = tmp_path / "run.nc"
    keep.write_bytes(b"data")
    removed = clean_stale_tmp(tmp_path)
    assert sorted(p.name for p in removed) == sorted([dead_name, legacy_old.name])
    assert live.exists() and foreign.exists() and keep.exists()
    assert clean_stale_tmp(tmp_path / "nope") == []


def test_temp_file_names_carry_the_writer(tmp_path, monkeypatch):
    import os

    from mesadyn import io

    seen = []
    real = os.replace

    def spy(src, dst):
        seen.append(os.path.basename(src))
        return real(src, dst)

    monkeypatch.setattr(io.os, "replace", spy)
    atomic_write_text(tmp_path / "a.json", "{}")
    assert seen and f"-{os.getpid()}." in seen[0] and seen[0].endswith(".tmp")


# ---- odd files where an array or a run is expected (issue 12, defect 9) ---------------------
def test_odd_files_give_one_line_errors(tmp_path):
    import os

    from mesadyn.io import load_npy

    good = tmp_path / "good.npy"
    np.save(good, np.arange(4.0))
    assert load_npy(good).tolist() == [0.0, 1.0, 2.0, 3.0]
    empty = tmp_path / "empty.npy"
    empty.write_bytes(b"")
    npz = tmp_path / "renamed.npy"
    np.savez(tmp_path / "arch.npz", a=np.arange(3))
    (tmp_path / "arch.npz").rename(npz)
    truncated = tmp_path / "trunc.npy"
    truncated.write_bytes(good.read_bytes()[:-8])
    objs = tmp_path / "obj.npy"
    np.save(objs, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    text = tmp_path / "text.npy"
    text.write_text("1 2 3")
    fifo = tmp_path / "fifo.npy"
    os.mkfifo(fifo)
    for path, msg in [(empty, "is empty"), (npz, "zip archive"), (truncated, "cannot read"),
                      (objs, "cannot read"), (text, "not a .npy"), (fifo, "not a regular"),
                      (tmp_path, "directory"), (tmp_path / "none.npy", "not found")]:
        with pytest.raises(MesadynError, match=msg) as info:
            load_npy(path)
        assert "\n" not in str(info.value)
    # and runs: an empty file, a renamed archive, a FIFO, a directory
    empty_nc = tmp_path / "empty.nc"
    empty_nc.write_bytes(b"")
    zip_nc = tmp_path / "zip.nc"
    zip_nc.write_bytes((tmp_path / "renamed.npy").read_bytes())
    fifo_nc = tmp_path / "fifo.nc"
    os.mkfifo(fifo_nc)
    (tmp_path / "dir.nc").mkdir()
    for path, msg in [(empty_nc, "is empty"), (zip_nc, "not a netCDF"),
                      (fifo_nc, "not a regular"), (tmp_path / "dir.nc", "directory")]:
        with pytest.raises(MesadynError, match=msg):
            load_run(path)


def test_a_truncated_npy_is_refused_before_reading(tmp_path):
    """A 1 kB file whose header claims 10⁸ rows is refused from its header and size alone."""
    import numpy.lib.format as fmt

    from mesadyn.io import load_npy

    path = tmp_path / "big.npy"
    with open(path, "wb") as fh:
        fmt.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False,
                                        "shape": (10**8, 18)})
        fh.write(b"\0" * 1000)
    with pytest.raises(MesadynError, match="truncated.*100000000, 18"):
        load_npy(path)


@pytest.mark.parametrize("path", ["/proc/mesadyn-out", "/proc", "/sys/x/y"])
def test_output_folders_that_take_nothing_are_refused(path) -> None:
    """``/proc`` passes ``os.access(W_OK)`` yet takes no new file or folder: ``reproduce --out
    /proc/foo`` computed and then failed with an internal FileNotFoundError."""
    import os

    from mesadyn.io import check_writable_dir

    top = "/" + path.split("/")[1]
    if not os.path.isdir(top):
        pytest.skip(f"no {top} here")
    with pytest.raises(MesadynError, match="takes no new|is not writable"):  # root: the probe
        check_writable_dir(path)


def test_output_files_in_a_folder_that_takes_none_are_refused(tmp_path) -> None:
    import os

    from mesadyn.io import check_writable

    if not os.path.isdir("/proc"):
        pytest.skip("no /proc here")
    with pytest.raises(MesadynError, match="takes no new files|is not writable"):
        check_writable("/proc/run.nc", suffixes=(".nc",))
    assert check_writable(tmp_path / "ok.nc", suffixes=(".nc",)) == tmp_path / "ok.nc"
    assert list(tmp_path.iterdir()) == []  # the probe leaves nothing behind
