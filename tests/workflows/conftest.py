"""Helpers for the workflow tests: run the CLI entry point in-process and parse ``--json``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mesadyn.cli import main


@pytest.fixture
def cli_json(capsys):
    """``cli_json(*args) -> dict``: the ``--json`` object of ``mesadyn *args`` (exit 0 asserted)."""

    def call(*args: str) -> dict[str, Any]:
        try:
            main([*args, "--json"])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        assert code == 0, out.err
        return json.loads(out.out)

    return call
