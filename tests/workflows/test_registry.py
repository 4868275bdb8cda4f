"""One registry of workflows: the CLI's commands and the workflows package are derived from
:data:`mesadyn.registry.REGISTRY` and agree (the sweep's targets: tests/sweep/test_targets.py);
reading it imports no workflow."""

from __future__ import annotations

import importlib

import pytest

from mesadyn.cli import COMMANDS, DRIVERS, load_command
from mesadyn.workflows import REGISTRY, RunOptions, RunResult


def test_every_workflow_is_a_command_and_every_command_a_workflow_or_a_driver():
    assert {w.command for w in REGISTRY.values()} | set(DRIVERS) == set(COMMANDS)
    assert not {w.command for w in REGISTRY.values()} & set(DRIVERS)
    for w in REGISTRY.values():
        assert COMMANDS[w.command] == (w.cli_module, w.summary)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_each_workflow_follows_the_run_contract(name):
    module = importlib.import_module(REGISTRY[name].module)
    assert issubclass(module.Config, RunOptions) and module.Config.COMMAND == name
    assert callable(module.run)
    results = [v for v in vars(module).values()
               if isinstance(v, type) and issubclass(v, RunResult) and v is not RunResult]
    assert results, f"{name} defines no RunResult"
    assert load_command(REGISTRY[name].command).name == REGISTRY[name].command


def test_reading_the_registry_imports_no_workflow():
    import subprocess
    import sys

    code = ("import sys, mesadyn.registry, mesadyn.cli; "
            "print(sorted(m for m in sys.modules if m.startswith('mesadyn.workflows')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
