"""The process package's shape: one public list, one job per module, final families, and an
import that loads neither numpy nor torch (``mesadyn theory`` depends on it)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import mesadyn.process as process
from mesadyn.process import Family

MODULES = ("constructors", "families", "mixture", "moments", "parse", "samplers", "sequences")


def test_every_module_name_is_exported_once_from_the_package() -> None:
    """Each module's ``__all__`` is re-exported by name (the diffrax style), and the package's
    ``__all__`` is exactly their union plus :func:`make_generator` (from mesadyn.device)."""
    names: list[str] = []
    for mod in MODULES:
        m = importlib.import_module(f"mesadyn.process.{mod}")
        names += m.__all__
        for name in m.__all__:
            assert getattr(process, name) is getattr(m, name), (mod, name)
    assert sorted(process.__all__) == sorted([*names, "make_generator"])
    assert len(set(names)) == len(names)
    from mesadyn.device import make_generator

    assert process.make_generator is make_generator


@pytest.mark.parametrize("name", ["IID", "Sparse", "Fixed", "Sampled", "Shifted", "Moments",
                                  "Mixture", "GaussianDraw", "AtomDraw"])
def test_concrete_families_and_samplers_are_final(name: str) -> None:
    cls = getattr(process, name)
    assert getattr(cls, "__final__", False) is True
    assert not getattr(Family, "__final__", False)


def test_import_loads_neither_numpy_nor_torch() -> None:
    code = ("import sys, mesadyn.process, mesadyn.theory\n"
            "print(','.join(m for m in ('numpy', 'torch', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == ""
