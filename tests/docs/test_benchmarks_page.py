"""benchmarks/run_all.py, which writes the site's Benchmarks page (benchmarks/README.md)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "run_all.py"


@pytest.fixture(scope="module")
def run_all():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("run_all", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["run_all"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_every_bench_script_has_a_table(run_all) -> None:  # type: ignore[no-untyped-def]
    scripts = {p.name for p in (ROOT / "benchmarks").glob("bench_*.py")}
    assert scripts <= {b.script for b in run_all.BENCHMARKS}
    names = [b.name for b in run_all.BENCHMARKS]
    assert len(names) == len(set(names))
    for b in run_all.BENCHMARKS:
        assert b.full and b.quick and b.columns and b.what
        assert b.script == "mesadyn" or (ROOT / "benchmarks" / b.script).is_file()


def _fake(run_all, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A benchmark whose script writes two rows and a scalar to its --json file."""
    script = tmp_path / "bench_fake.py"
    script.write_text(
        "import json, sys\n"
        "n = int(sys.argv[sys.argv.index('--n') + 1])\n"
        "path = sys.argv[sys.argv.index('--json') + 1]\n"
        "rows = [{'k': k, 'sq': k * k / 3} for k in range(n)]\n"
        "json.dump({'rows': rows, 'total': sum(r['sq'] for r in rows)}, open(path, 'w'))\n")
    return run_all.Bench(
        "fake", "A fake benchmark", "Squares, for the test.", str(script),
        full=(("--n", "3"),), quick=(("--n", "1"),),
        columns=(("k", "k"), ("k²/3", "sq|.3f"), ("absent", "nothing")),
        summary=(("total", "total|.2f"),))


def test_a_measurement_becomes_a_table_with_its_machine(run_all, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake(run_all, tmp_path)
    monkeypatch.setattr(run_all, "BENCHMARKS", (fake,))
    record = run_all.measure(fake, quick=False, timeout=60)
    assert [r["k"] for r in record["rows"]] == [0, 1, 2]
    assert record["mode"] == "full" and record["machine"]["cores"] >= 1
    assert len(record["load_before"]) == 3 and record["wall_s"] >= 0
    page = run_all.render({"fake": record})
    assert "| k | k²/3 | absent |" in page
    assert "| 2 | 1.333 | — |" in page
    assert "total: 1.67." in page
    assert f"python benchmarks/{fake.script} --n 3" in page
    assert "Machine A (commit" in page and record["machine"]["cpu"] in page
    assert "## A fake benchmark" in page


def test_an_unmeasured_benchmark_says_how_to_measure_it(run_all) -> None:  # type: ignore[no-untyped-def]
    page = run_all.render({})
    for b in run_all.BENCHMARKS:
        assert f"python benchmarks/run_all.py --only {b.name}" in page


def test_a_failed_run_keeps_the_stored_record(run_all, tmp_path: Path,  # type: ignore[no-untyped-def]
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake(run_all, tmp_path)
    broken = run_all.Bench("fake", fake.title, fake.what, fake.script, full=(("--oops",),),
                           quick=fake.quick, columns=fake.columns)
    results, readme = tmp_path / "results.json", tmp_path / "README.md"
    results.write_text(json.dumps({"fake": {"kept": True}}))
    monkeypatch.setattr(run_all, "BENCHMARKS", (broken,))
    monkeypatch.setattr(run_all, "RESULTS", results)
    monkeypatch.setattr(run_all, "README", readme)
    monkeypatch.setattr(run_all, "render", lambda res: json.dumps(res))
    monkeypatch.setattr(run_all, "load_results", lambda: json.loads(results.read_text()))
    assert run_all.main(["--only", "fake"]) == 1
    assert json.loads(results.read_text()) == {"fake": {"kept": True}}
    assert json.loads(readme.read_text()) == {"fake": {"kept": True}}
    assert not list(tmp_path.glob(".*.tmp"))


def test_the_ensemble_report_is_read_from_its_text(run_all) -> None:  # type: ignore[no-untyped-def]
    text = (
        "load average before: 1.0 1.0 1.0; 2 CPUs; ...\n"
        "batched rodas4: 44.80 s wall, 85.10 s CPU; statuses {'converged': 1000}; max|∇L| at "
        "the end 9.99e-09; steps per row median 207, max 250; rejected per row 0.10; ...\n"
        "one-by-one rodas4 (N = 1 calls): 5 rows 6.00 s wall, 6.00 s CPU → 1200.0 s CPU for "
        "N=1000 (extrapolated); speed-up of the batch 26.8× wall, 14.1× CPU; max end-point gap "
        "to the batch 4.00e-15\n")
    rows = run_all._ensemble_text(text)
    assert rows[0] == {"run": "batched rodas4", "wall_s": 44.8, "cpu_s": 85.1,
                       "outcomes": "{'converged': 1000}", "grad_max": 9.99e-09, "steps": 207}
    assert rows[1]["cpu_s"] == 1200.0 and rows[1]["speedup_cpu"] == 14.1
    assert rows[1]["gap"] == 4e-15 and "extrapolated to N = 1000" in rows[1]["run"]


def test_the_page_is_written_atomically(run_all, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "README.md"
    target.write_text("old")
    run_all.write_atomic(target, "new\n")
    assert target.read_text() == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["README.md"]
