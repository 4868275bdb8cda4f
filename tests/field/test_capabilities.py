"""Capabilities are declared on the classes (never probed); sampled fields share one abstract
base with two final subclasses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import mesadyn
from mesadyn.errors import MesadynError
from mesadyn.field import (
    CapabilityError,
    ExactField,
    Field,
    FieldSpec,
    FiniteDifferenceHessian,
    FiniteField,
    MonteCarloField,
    SampledField,
    make_field,
)
from mesadyn.process import gaussian


def test_declared_capabilities() -> None:
    assert Field.has_exact_hessian is False and Field.has_jax_loss is False
    assert ExactField.has_exact_hessian is True and ExactField.has_jax_loss is True
    assert FiniteDifferenceHessian.has_exact_hessian is False
    assert FiniteDifferenceHessian.has_jax_loss is False
    assert MonteCarloField.has_jax_loss is False and FiniteField.has_jax_loss is False
    # sampled fields: the Hessian is exact for the draws (polynomial form or batched HVPs)
    assert SampledField.has_exact_hessian is True
    assert MonteCarloField.has_exact_hessian is True and FiniteField.has_exact_hessian is True


def test_jax_loss_without_the_capability_is_a_typed_error() -> None:
    f = make_field(FieldSpec("finite", gaussian(2), 5, m=4, device="cpu"))
    with pytest.raises(CapabilityError, match="the finite field has no JAX loss"):
        f.jax_loss()
    assert issubclass(CapabilityError, MesadynError)
    fd = FiniteDifferenceHessian(f)
    with pytest.raises(CapabilityError):
        fd.jax_loss()


def test_exact_jax_loss_matches_torch() -> None:
    pytest.importorskip("jax")
    f = make_field(FieldSpec("exact", gaussian(2, 0.9), 5))
    theta = 0.3 * torch.randn(f.n_params, generator=torch.Generator().manual_seed(1),
                              dtype=torch.float64)
    assert float(f.jax_loss()(theta.numpy())) == pytest.approx(float(f.loss(theta)),
                                                                rel=1e-13)


def test_sampled_fields_share_an_abstract_base_and_are_final() -> None:
    assert issubclass(FiniteField, SampledField) and issubclass(MonteCarloField, SampledField)
    fam = gaussian(2)
    x1, lam = torch.zeros(3, 2, dtype=torch.float64), torch.ones(3, 2, dtype=torch.complex128)
    with pytest.raises(TypeError, match="abstract"):
        SampledField(fam, 5, x1, lam)  # type: ignore[abstract]
    assert getattr(FiniteField, "__final__", False) and getattr(MonteCarloField, "__final__",
                                                                  False)


def test_no_capability_probing_in_the_package() -> None:
    """No hasattr/name checks stand in for declared capabilities anywhere in mesadyn/."""
    root = Path(mesadyn.__file__).parent
    probe = re.compile(r"hasattr\([^)]*(jax|hessian|hvp|estimate|describe)|"
                       r"\.name\s*==\s*[\"'](exact|mc|finite)[\"']|"
                       r"getattr\([^)]*[\"'](name|jax_loss|jax_\w+|hessian|hvp)[\"']")
    hits = [f"{p.relative_to(root)}:{i}" for p in root.rglob("*.py")
            for i, line in enumerate(p.read_text().splitlines(), 1) if probe.search(line)]
    assert hits == []
