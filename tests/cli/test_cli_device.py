"""``--device {auto,cpu,cuda}`` on every command that evaluates a field (issue 16, item 1).

``--device cuda`` where torch sees no CUDA (faked, so this runs on any machine) is bad input:
one line on stderr, nothing on stdout, exit code 2, before any work.  ``--device auto`` is the
CPU here and prints the ``--json`` of ``--device cpu``; ``--help`` shows the option and
imports no torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from mesadyn.cli import main

#: A small run of each command that evaluates a field.
COMMANDS = {
    "integrate": ["integrate", "--d", "2", "--T", "5", "--t-end", "0.5"],
    "integrate --reduced": ["integrate", "--reduced"],
    "integrate --field mc": ["integrate", "--field", "mc", "--samples", "64", "--d", "2",
                             "--T", "5", "--t-end", "0.2"],
    "stability": ["stability", "--d", "2", "--T", "5", "--no-pl"],
    "portrait --full-flow": ["portrait", "--full-flow", "--init", "0.5,0.6", "--d", "2",
                             "--T", "5", "--flow-t-end", "0.5", "--out", "{tmp}/p.png"],
    "continue": ["continue", "--d", "2", "--T", "4", "--parameter", "T", "--stop", "6",
                 "--points", "3"],
    "train": ["train", "--d", "2", "--T", "5", "--m", "10", "--steps", "1"],
}


def _run(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str, str]:
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def _args(name: str, tmp_path) -> list[str]:
    return [a.format(tmp=tmp_path) for a in COMMANDS[name]]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_cuda_without_cuda_is_exit_2(name: str, capsys, tmp_path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, out, err = _run(capsys, [*_args(name, tmp_path), "--device", "cuda", "--json"])
    assert code == 2 and out == "", err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mesadyn: error:"), err
    assert "cuda" in lines[0] and "CUDA is not available" in lines[0]
    assert not (tmp_path / "p.png").exists()  # refused before any work


@pytest.mark.parametrize("name", ["integrate", "stability", "continue", "train"])
def test_unknown_device_is_exit_2(name: str, capsys, tmp_path) -> None:
    code, out, err = _run(capsys, [*_args(name, tmp_path), "--device", "gpu"])
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "'gpu'" in err and "cpu, auto, cuda" in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="auto is CUDA on this machine")
@pytest.mark.parametrize("name", ["integrate", "integrate --field mc", "stability", "continue"])
def test_auto_prints_the_cpu_json(name: str, capsys, tmp_path) -> None:
    def strip(obj: object) -> object:
        if isinstance(obj, dict):
            return {k: strip(v) for k, v in obj.items() if k != "wall_s"}
        return [strip(v) for v in obj] if isinstance(obj, list) else obj

    objs = []
    for device in ("cpu", "auto"):
        code, out, err = _run(capsys, [*_args(name, tmp_path), "--device", device, "--json"])
        assert code == 0, err
        objs.append(strip(json.loads(out)))
    assert objs[0] == objs[1]
    assert "device" not in objs[0]  # the --json objects (and the golden outputs) are unchanged


def test_help_shows_the_device_and_imports_no_torch() -> None:
    probe = ("import sys\nfrom mesadyn.cli import main\n"
             "for cmd in ('integrate', 'stability', 'portrait', 'continue', 'train'):\n"
             "    try:\n        main([cmd, '--help'])\n    except SystemExit:\n        pass\n"
             "print('TORCH=' + str('torch' in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True, env={**os.environ, "COLUMNS": "200"}).stdout
    assert out.count("--device") == 5 and out.count("[default: cpu]") >= 4
    assert out.count("cpu, cuda, or auto (CUDA if available)") == 5
    assert out.strip().endswith("TORCH=False")
