"""The one place bars are drawn (:mod:`mesadyn.cli._progress`): none before the first call,
none for work that ends within the delay, a bar for work that goes on."""

from __future__ import annotations

import pytest

from mesadyn.cli import _progress
from mesadyn.cli._common import progress_callback


def test_no_bar_before_the_first_call_nor_for_quick_work(capsys):
    with progress_callback(True, lambda x: f"at {x:g}", total=3):
        pass  # never called: no bar
    with progress_callback(True, lambda x: f"at {x:g}", total=3) as cb:
        cb(1.0)  # within DELAY_S of the start: an instant closed form draws nothing
    assert capsys.readouterr().err == ""


def test_a_bar_for_work_that_goes_on(capsys, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(_progress, "DELAY_S", 0.0)
    with progress_callback(True, lambda x: f"at {x:g}", total=3) as cb:
        cb(1.0)
        cb(3.0)
    assert "at 3" in capsys.readouterr().err


def test_disabled_draws_nothing(capsys, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(_progress, "DELAY_S", 0.0)
    with progress_callback(False, lambda x: "x", total=1) as cb:
        cb(1.0)
    with _progress.bar(False) as bar:
        bar.add_task("x", total=2)
    assert capsys.readouterr().err == ""
