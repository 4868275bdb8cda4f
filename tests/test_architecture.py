"""The layer contracts of docs/architecture.md hold, and breaking one makes them fail; the
lower floors import no heavy library at import time.

``lint-imports`` reads the contracts from ``pyproject.toml``.  The second test copies the
package, adds ``import mesadyn.cli`` to a module of ``field/`` and shows that the same
contracts then fail, so the CI step cannot pass vacuously.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = shutil.which("lint-imports")

needs_lint = pytest.mark.skipif(LINT is None, reason="import-linter is not installed")


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT), "--no-cache"], cwd=root, env=env, capture_output=True,
                          text=True, check=False, timeout=300)


def _copy_package(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    shutil.copytree(ROOT / "mesadyn", root / "mesadyn",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


@needs_lint
def test_layer_contracts_hold(tmp_path: Path) -> None:
    out = _lint(_copy_package(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "mesadyn layers KEPT" in out.stdout


@needs_lint
def test_field_importing_the_cli_breaks_the_contract(tmp_path: Path) -> None:
    root = _copy_package(tmp_path)
    target = root / "mesadyn" / "field" / "__init__.py"
    target.write_text(target.read_text() + "\nimport mesadyn.cli  # noqa: E402,F401\n")
    out = _lint(root)
    assert out.returncode != 0
    assert "mesadyn layers BROKEN" in out.stdout
    assert "mesadyn.field" in out.stdout and "mesadyn.cli" in out.stdout


# ---- import weight: the closed forms start instantly ----------------------------------------
HEAVY = ("torch", "scipy", "matplotlib", "xarray")


@pytest.mark.parametrize("module", ["mesadyn.flow", "mesadyn.workflows", "mesadyn.field",
                                    "mesadyn.model", "mesadyn.reduced", "mesadyn.theory"])
def test_importing_the_package_loads_no_heavy_library(module: str) -> None:
    """``import mesadyn.flow`` (and the workflows, which import it) loads no torch, scipy,
    matplotlib or xarray: each is imported inside the functions that use it, so the closed
    forms (``mesadyn theory``, ``mesadyn integrate --reduced``) start without them."""
    code = (f"import sys, {module}\n"
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT,
                         capture_output=True, text=True, check=False, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"import {module} loaded {out.stdout.strip()}"
