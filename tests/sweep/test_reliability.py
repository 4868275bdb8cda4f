"""Sweeps heal and refuse: malformed point records are reported and recomputed,
interruption exits 130 with nothing lost, stale temporary files go, outputs stay inside --out,
unwritable --out is one line before work, large sweeps need a go-ahead."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mesadyn.cli import main
from mesadyn.errors import MesadynError
from mesadyn.sweep import load_sweep, parse_spec, read_records, run_sweep
from mesadyn.sweep import runner as sweep_runner

THEORY = {"workflow": "theory", "axes": {"T": [3, 10, 100], "d": [1, 2]}}


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def _values(ds) -> dict:
    return {k: ds[k].values.tolist() for k in ("ab_star", "c1", "c2", "point_status")}


def test_malformed_records_are_reported_and_recomputed(tmp_path: Path) -> None:
    """A record with status ok but no result (and other malformed ones) is reported and
    recomputed, never a crash of the merge."""
    out = tmp_path / "out"
    spec = parse_spec(THEORY)
    first = run_sweep(spec, out, workers=0)
    assert first.corrupt == [] and first.computed == 6
    reference = _values(load_sweep(out))
    files = sorted((out / "points").glob("*.json"))
    hashes = [p.stem for p in files]
    files[0].write_text(json.dumps({"hash": hashes[0], "status": "ok", "options": {}}))
    files[1].write_text("[1, 2, 3]")
    files[2].write_bytes(b"\xff\xfe not utf-8")
    files[3].write_text(json.dumps({"hash": "0" * 16, "status": "ok", "options": {},
                                    "result": {}}))  # foreign hash
    files[4].unlink()
    files[4].mkdir()  # a directory where a record should be
    res = run_sweep(spec, out, workers=0)
    assert sorted(c["file"] for c in res.corrupt) == sorted(
        f"points/{h}.json" for h in hashes[:5])
    reasons = " | ".join(c["reason"] for c in res.corrupt)
    assert "without a result" in reasons and "not a JSON object" in reasons
    assert "does not match" in reasons and "not a regular file" in reasons
    assert res.computed == 5 and res.skipped == 1 and res.failed == []
    assert _values(load_sweep(out)) == reference
    assert len(read_records(out)) == 6
    assert len(list((out / "points").glob("*.corrupt"))) == 5  # kept aside, reported once
    again = run_sweep(spec, out, workers=0)
    assert again.corrupt == [] and again.computed == 0


def test_corrupt_record_reported_by_the_cli(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('workflow = "theory"\n[axes]\nT = [3, 4]\n')
    out = tmp_path / "o"
    assert _run(["sweep", str(spec), "--out", str(out), "--workers", "0", "--json"],
                capsys)[0] == 0
    victim = sorted((out / "points").glob("*.json"))[0]
    victim.write_text("{ truncated")
    code, stdout, err = _run(["sweep", str(spec), "--out", str(out), "--workers", "0",
                              "--json"], capsys)
    summary = json.loads(stdout)
    assert code == 0 and summary["n_corrupt"] == 1 and summary["computed"] == 1
    assert summary["corrupt"][0]["file"] == f"points/{victim.name}"
    code, stdout, _ = _run(["sweep", str(spec), "--out", str(out), "--workers", "0"], capsys)
    assert code == 0 and "corrupt records (recomputed)" in stdout


def test_interrupted_sweep_exits_130_and_resumes(tmp_path: Path, capsys, monkeypatch) -> None:
    """Ctrl-C in a sweep exits 130, the finished points kept; the re-run resumes."""
    spec = tmp_path / "s.toml"
    spec.write_text('workflow = "theory"\n[axes]\nT = [3, 4, 5, 6, 7]\n')
    out = tmp_path / "o"
    real = sweep_runner.run_point
    calls: list[str] = []

    def interrupted(*args, **kwargs):
        calls.append(args[2])
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep_runner, "run_point", interrupted)
    code, stdout, err = _run(["sweep", str(spec), "--out", str(out), "--workers", "0",
                              "--json"], capsys)
    assert code == 130 and stdout == ""
    assert err.strip().splitlines()[-1] == "mesadyn: interrupted"
    assert "run the same command to resume" in err and "Traceback" not in err
    assert len(read_records(out)) == 2  # nothing lost
    monkeypatch.setattr(sweep_runner, "run_point", real)
    code, stdout, _ = _run(["sweep", str(spec), "--out", str(out), "--workers", "0", "--json"],
                           capsys)
    summary = json.loads(stdout)
    assert code == 0 and (summary["skipped"], summary["computed"]) == (2, 3)
    clean = tmp_path / "clean"
    _run(["sweep", str(spec), "--out", str(clean), "--workers", "0", "--json"], capsys)
    assert _values_T(load_sweep(out)) == _values_T(load_sweep(clean))


def _values_T(ds) -> dict:
    return {k: ds[k].values.tolist() for k in ("ab_star", "c1", "c2", "point_status")}


def test_stale_temporary_files_are_removed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_sweep(parse_spec(THEORY), out, workers=0)
    stale = [out / ".sweep.nc.deadhost-1.abc.tmp", out / "points" / ".x.json.deadhost-1.q.tmp"]
    for p in stale:
        p.write_text("half")
        os.utime(p, (1_000_000_000, 1_000_000_000))
    run_sweep(parse_spec(THEORY), out, workers=0)
    assert not any(p.exists() for p in stale)


@pytest.mark.parametrize("make", ["under_file", "is_file", "missing_parent_under_file"])
def test_unwritable_out_is_one_line_before_work(tmp_path: Path, capsys, make: str) -> None:
    """An --out under a file is one line before any work, never a traceback after it."""
    spec = tmp_path / "s.toml"
    spec.write_text('workflow = "theory"\n[axes]\nT = [3]\n')
    afile = tmp_path / "afile"
    afile.write_text("x")
    out = {"under_file": afile / "o", "is_file": afile,
           "missing_parent_under_file": afile / "a" / "b"}[make]
    code, stdout, err = _run(["sweep", str(spec), "--out", str(out), "--workers", "0",
                              "--json"], capsys)
    assert code == 2 and stdout == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert str(afile) in err


def test_outputs_are_written_inside_out(tmp_path: Path, monkeypatch) -> None:
    """Output templates are resolved under --out, never beside or above it."""
    monkeypatch.chdir(tmp_path)
    spec = parse_spec({"workflow": "integrate",
                       "options": {"reduced": True, "d": 2, "n_save": 5,
                                   "out": "traj/T{T}.nc"},
                       "axes": {"T": [5, 10]}})
    res = run_sweep(spec, tmp_path / "o", workers=0)
    assert res.failed == [], res.failed
    assert sorted(p.name for p in (tmp_path / "o" / "traj").iterdir()) == ["T10.nc", "T5.nc"]
    assert not (tmp_path / "traj").exists()
    # the record keeps the option as the spec gave it (the hash does not depend on --out)
    assert {r["options"]["out"] for r in res.records.values()} == {"traj/T5.nc", "traj/T10.nc"}


def test_large_sweeps_need_a_go_ahead(tmp_path: Path, monkeypatch, capsys) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('workflow = "theory"\n[axes]\nT = [3, 4, 5, 6]\n')
    # more pending points than CONFIRM_POINTS: refused before anything runs
    monkeypatch.setattr(sweep_runner, "CONFIRM_POINTS", 3)
    code, stdout, err = _run(["sweep", str(spec), "--out", str(tmp_path / "a"), "--workers",
                              "0"], capsys)
    assert code == 2 and "4 points to run" in err and "--yes" in err
    assert not (tmp_path / "a" / "points").exists()
    code, stdout, err = _run(["sweep", str(spec), "--out", str(tmp_path / "a"), "--workers",
                              "0", "--yes", "--json"], capsys)
    assert code == 0 and json.loads(stdout)["computed"] == 4
    # an estimate over the budget: the probe point is stored, the rest waits for --yes
    monkeypatch.setattr(sweep_runner, "CONFIRM_POINTS", 100)
    monkeypatch.setattr(sweep_runner, "DEFAULT_BUDGET_S", 0.0)
    code, stdout, err = _run(["sweep", str(spec), "--out", str(tmp_path / "b"), "--workers",
                              "0"], capsys)
    assert code == 2 and "would take about" in err and "--yes" in err
    assert len(read_records(tmp_path / "b")) == 1
    code, stdout, _ = _run(["sweep", str(spec), "--out", str(tmp_path / "b"), "--workers",
                            "0", "--yes", "--json"], capsys)
    assert code == 0 and json.loads(stdout)["skipped"] == 1


def test_budget_in_the_library(tmp_path: Path) -> None:
    spec = parse_spec(THEORY)
    with pytest.raises(MesadynError, match="would take about"):
        run_sweep(spec, tmp_path / "o", workers=0, budget_s=0.0)
    res = run_sweep(spec, tmp_path / "o", workers=0)  # no budget: the library just runs
    assert res.computed == 5 and res.skipped == 1


def test_points_share_one_field_per_process(tmp_path: Path) -> None:
    """The field cache lives in mesadyn.field; sweep records report its hits and misses."""
    from mesadyn.field import clear_cache

    clear_cache()
    spec = parse_spec({"workflow": "integrate",
                       "options": {"d": 1, "T": 4, "n_save": 3, "t_end": 1.0},
                       "axes": {"a0": [0.3, 0.6, 0.9]}})
    res = run_sweep(spec, tmp_path / "o", workers=0)
    assert res.failed == [], res.failed
    caches = [res.records[p.hash]["field_cache"] for p in spec.points()]
    assert caches[0]["misses"] == 1 and caches[-1]["misses"] == 1
    assert caches[-1]["hits"] >= 2


def test_a_directory_record_beside_an_old_quarantine_is_moved_aside(tmp_path: Path) -> None:
    """A record that is a directory while ``<hash>.json.corrupt`` already exists goes to the
    next free name; the point is recomputed and the earlier quarantine kept."""
    out = tmp_path / "out"
    spec = parse_spec(THEORY)
    run_sweep(spec, out, workers=0)
    victim = sorted((out / "points").glob("*.json"))[0]
    earlier = victim.with_name(victim.name + ".corrupt")
    earlier.write_text("an earlier quarantine")
    victim.unlink()
    victim.mkdir()
    res = run_sweep(spec, out, workers=0)
    assert [c["reason"] for c in res.corrupt] == [
        "unreadable (ValueError: not a regular file)"]
    assert res.computed == 1 and res.failed == [] and victim.is_file()
    assert earlier.read_text() == "an earlier quarantine"
    assert victim.with_name(victim.name + ".corrupt-1").is_dir()
    assert run_sweep(spec, out, workers=0).corrupt == []


def test_a_record_that_cannot_be_moved_aside_is_one_line(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "out"
    spec = parse_spec(THEORY)
    run_sweep(spec, out, workers=0)
    victim = sorted((out / "points").glob("*.json"))[0]
    victim.write_text("{ truncated")

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "rename", refuse)
    with pytest.raises(MesadynError, match="cannot move the corrupt point record .* aside "
                                           r"\(Permission denied\); remove it"):
        run_sweep(spec, out, workers=0)


@pytest.mark.parametrize("template,match", [
    ("x{T:>2000000000}.nc", "asks for 2000000000 characters; at most 255"),
    ("x{sigma:.300f}.nc", "asks for 300 characters"),
    ("x{T:{d}}.nc", "may not hold another field"),
])
def test_template_formats_are_bounded_before_anything_is_built(template, match) -> None:
    import time

    t0 = time.perf_counter()
    with pytest.raises(MesadynError, match=match):
        parse_spec({"workflow": "integrate", "options": {"reduced": True, "out": template},
                    "axes": {"T": [3]}})
    assert time.perf_counter() - t0 < 5  # refused from the text, no gigabyte string built
    ok = parse_spec({"workflow": "integrate", "options": {"reduced": True,
                                                         "out": "x{T:>05}_{sigma:.3g}.nc"},
                     "axes": {"T": [3]}})
    assert ok.points()[0].options["out"] == "x00003_1.nc"


def test_local_clusters_bind_no_fixed_port() -> None:
    """With the dashboard's port 8787 taken (another sweep, another test worker), a local
    cluster starts without the "Port 8787 is already in use" warning, on a free port."""
    import socket
    import warnings

    pytest.importorskip("distributed")
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 8787))
        holder.listen()
    except OSError:  # already taken: the situation this test is about
        pass
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            cluster = sweep_runner.local_cluster(0)
            try:
                ports = {s.getsockname()[1] for s in
                         cluster.scheduler.http_server._sockets.values()}
            finally:
                cluster.close()
    finally:
        holder.close()
    assert 8787 not in ports and ports
    assert not [w for w in seen if "8787" in str(w.message)]
