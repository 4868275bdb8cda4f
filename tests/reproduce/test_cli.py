"""``mesadyn reproduce`` on the command line: bad input is one line and exit 2; --json is JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mesadyn", *args], capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("args,needle", [
    (["--only", "thm9.9"], "thm9.9"),
    (["--seed", "-1"], "-1"),
    (["--quick", "--only", "fig3"], "fig3"),
])
def test_bad_input(tmp_path, args, needle):
    r = _cli("reproduce", "--out", str(tmp_path), *args)
    assert r.returncode == 2
    assert r.stderr.startswith("mesadyn: error:") and needle in r.stderr
    assert "Traceback" not in r.stderr


def test_json_one_claim(tmp_path):
    r = _cli("reproduce", "--quick", "--only", "lem5.2", "--out", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert obj["all_pass"] and {c["id"] for c in obj["claims"]} == {"lem5.2"}
    assert (tmp_path / "report.md").read_text().count("lem5.2") >= 3
