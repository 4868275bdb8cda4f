"""``mesadyn reproduce`` on the command line: bad input is one line and exit 2; --json is JSON."""

from __future__ import annotations

import json

import pytest

from mesadyn.cli import main


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("args,needle", [
    (["--only", "thm9.9"], "thm9.9"),
    (["--seed", "-1"], "-1"),
    (["--m", "1"], "m=1"),
    (["--quick", "--only", "fig3"], "fig3"),
])
def test_bad_input(tmp_path, capsys, args, needle):
    code, out, err = _cli(capsys, "reproduce", "--out", str(tmp_path), *args)
    assert code == 2
    assert err.startswith("mesadyn: error:") and needle in err
    assert "Traceback" not in err and out == ""


def test_json_one_claim(tmp_path, capsys):
    code, out, err = _cli(capsys, "reproduce", "--quick", "--only", "lem5.2", "--out",
                          str(tmp_path), "--json")
    assert code == 0, err
    obj = json.loads(out)
    assert obj["all_pass"] and {c["id"] for c in obj["claims"]} == {"lem5.2"}
    assert (tmp_path / "report.md").read_text().count("lem5.2") >= 3
    assert (tmp_path / "report.html").read_text().count('class="pass"') == len(obj["claims"])


def test_quick_reproduce_end_to_end(tmp_path, capsys):
    """The whole ``mesadyn reproduce --quick`` (what CI runs): every claim row PASS."""
    code, out, err = _cli(capsys, "reproduce", "--quick", "--out", str(tmp_path), "--json")
    assert code == 0, err
    obj = json.loads(out)
    ids = {c["id"] for c in obj["claims"]}
    assert {"thm4.1", "thm4.2", "thm4.3", "prop4.1", "prop4.2", "cor4.1",
            "lem5.2", "lem5.3", "lem5.4"} <= ids
    assert obj["all_pass"], [c for c in obj["claims"] if c.get("status") != "PASS"]
    assert (tmp_path / "report.html").is_file()
    assert not list(tmp_path.rglob("*.tmp"))
