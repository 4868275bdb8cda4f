"""FieldSpec: validation (one-line errors naming the bad value) and a hash that covers every
input that changes a field's numbers."""

from __future__ import annotations

import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.field import FieldKind, FieldSpec
from mesadyn.process import gaussian, iid, ones, rademacher, sampled, sparse, uniform


def _draw(n: int, gen: torch.Generator, dev: torch.device) -> torch.Tensor:
    return torch.randn(n, 2, generator=gen, device=dev, dtype=torch.float64)


def _draw_other(n: int, gen: torch.Generator, dev: torch.device) -> torch.Tensor:
    return 2 * torch.rand(n, 2, generator=gen, device=dev, dtype=torch.float64) - 1


def test_kind_is_a_string_enum() -> None:
    assert [str(k) for k in FieldKind] == ["exact", "mc", "finite"]
    spec = FieldSpec("mc", gaussian(2), 5)
    assert spec.kind is FieldKind.MC and spec.kind == "mc"
    assert FieldSpec(FieldKind.EXACT, gaussian(2), 5) == FieldSpec("exact", gaussian(2), 5)


def test_defaults_are_filled_so_equal_fields_have_equal_specs() -> None:
    fam = gaussian(2)
    assert FieldSpec("mc", fam, 5) == FieldSpec("mc", fam, 5, samples=100_000, batches=32,
                                                seed=1)
    spec = FieldSpec("mc", fam, 5)
    assert (spec.samples, spec.batches, spec.seed, spec.m) == (100_000, 32, 1, None)
    # the exact field draws nothing: the seed does not change it
    assert FieldSpec("exact", fam, 5, seed=9) == FieldSpec("exact", fam, 5)
    assert FieldSpec("exact", fam, 5, seed=9).seed == 1


@pytest.mark.parametrize(("args", "kw", "match"), [
    (("bogus", gaussian(2), 5), {}, "unknown field 'bogus'; choose one of exact, mc, finite"),
    (("exact", "gaussian", 5), {}, "family must be a mesadyn Family"),
    (("exact", gaussian(2), 2), {}, "T must be >= 3"),
    (("exact", gaussian(2), 5.5), {}, "T must be an integer"),
    (("exact", gaussian(2), 5), {"m": 10}, "the exact field does not take m"),
    (("exact", gaussian(2), 5), {"samples": 10, "batches": 2},
     "does not take batches, samples"),
    (("mc", gaussian(2), 5), {"m": 10}, "the mc field does not take m"),
    (("finite", gaussian(2), 5), {"samples": 10}, "the finite field does not take samples"),
    (("finite", gaussian(2), 5), {}, "needs the number of sequences m"),
    (("finite", gaussian(2), 5), {"m": 0}, "m must be >= 1"),
    (("mc", gaussian(2), 5), {"samples": 1}, r"samples must be >= batches=32 \("),
    (("mc", gaussian(2), 5), {"samples": 10}, "samples must be >= batches=32"),
    (("mc", gaussian(2), 5), {"batches": 1}, "batches must be >= 2"),
    (("mc", gaussian(2), 5), {"seed": -1}, "seed must be >= 0"),
    (("mc", gaussian(2), 5), {"seed": True}, "seed must be an integer"),
    (("mc", gaussian(2), 5), {"device": "gpu"}, "unknown device 'gpu'"),
    (("exact", gaussian(2), 5), {"device": "meta"}, "unknown device 'meta'"),
    (("exact", gaussian(6), 5), {"rotation": "haar"},
     "exact Haar field is built for d <= 5, got d=6 .*use --field mc"),
    (("exact", gaussian(2), 5), {"rotation": "haar", "noise": 0.1},
     "no exact field for rotation=haar with noise=0.1"),
    (("exact", gaussian(3), 5), {"rotation": "real"}, "real rotations need an even d, got d=3"),
    (("mc", gaussian(3), 5), {"rotation": "real"}, "real rotations need an even d, got d=3"),
    (("mc", gaussian(2), 5), {"rotation": "spiral"}, "unknown rotation 'spiral'"),
    (("finite", gaussian(2), 5), {"m": 4, "noise": -0.5}, "noise must be >= 0, got noise=-0.5"),
    (("finite", gaussian(2), 5), {"m": 4, "noise": float("nan")}, "noise"),
])
def test_bad_specs_raise_one_line_errors(args: tuple, kw: dict, match: str) -> None:
    with pytest.raises(MesadynError, match=match) as info:
        FieldSpec(*args, **kw)
    assert "\n" not in str(info.value)


def test_spec_is_frozen_and_describes_itself() -> None:
    spec = FieldSpec("finite", gaussian(2, 0.5), 7, m=40, seed=3, device="cpu")
    with pytest.raises(AttributeError):
        spec.T = 8  # type: ignore[misc]
    assert spec.describe() == {"field": "finite", "T": 7, **gaussian(2, 0.5).describe(),
                               "m": 40, "seed": 3, "device": "cpu"}
    assert spec.options() == {"m": 40, "seed": 3, "device": "cpu"}
    # the process beyond the paper's appears only when it is not the paper's
    beyond = FieldSpec("mc", gaussian(2), 7, samples=64, rotation="haar", noise=0.25,
                       radius=0.9)
    assert beyond.describe() == {"field": "mc", "T": 7, **gaussian(2).describe(), "samples": 64,
                                 "seed": 1, "batches": 32, "device": "cpu", "radius": 0.9,
                                 "rotation": "haar", "noise": 0.25}
    assert not beyond.diagonal_noiseless and spec.diagonal_noiseless
    # the paper's process spelled out is the default spec
    assert FieldSpec("finite", gaussian(2, 0.5), 7, m=40, seed=3, device="cpu",
                     rotation="diagonal", noise=0.0) == spec


def test_specs_differing_in_anything_that_changes_numbers_differ() -> None:
    fam = gaussian(2, 1.0)
    base = FieldSpec("mc", fam, 5, samples=64, seed=1, batches=4)
    variants = [
        FieldSpec("finite", fam, 5, m=64, seed=1),
        FieldSpec("exact", fam, 5),
        FieldSpec("mc", gaussian(2, 1.1), 5, samples=64, seed=1, batches=4),
        FieldSpec("mc", gaussian(3, 1.0), 5, samples=64, seed=1, batches=4),
        FieldSpec("mc", rademacher(2), 5, samples=64, seed=1, batches=4),
        FieldSpec("mc", uniform(2), 5, samples=64, seed=1, batches=4),
        FieldSpec("mc", sparse(2, 1.0), 5, samples=64, seed=1, batches=4),
        FieldSpec("mc", ones(2), 5, samples=64, seed=1, batches=4),
        FieldSpec("mc", fam, 6, samples=64, seed=1, batches=4),
        FieldSpec("mc", fam, 5, samples=65, seed=1, batches=4),
        FieldSpec("mc", fam, 5, samples=64, seed=2, batches=4),
        FieldSpec("mc", fam, 5, samples=64, seed=1, batches=8),
        FieldSpec("mc", fam, 5, samples=64, seed=1, batches=4, radius=0.9),
        FieldSpec("mc", fam, 5, samples=64, seed=1, batches=4, rotation="haar"),
        FieldSpec("mc", fam, 5, samples=64, seed=1, batches=4, rotation="real"),
        FieldSpec("mc", fam, 5, samples=64, seed=1, batches=4, noise=0.1),
        FieldSpec("mc", fam, 5, samples=64, seed=1, batches=4, rotation="haar", noise=0.1),
    ]
    keys = {base, *variants}
    assert len(keys) == len(variants) + 1  # all distinct as dict/set keys
    assert all(v != base and hash(v) != hash(base) for v in variants)
    # the same inputs built twice (new family objects) are the same spec
    again = FieldSpec("mc", gaussian(2, 1.0), 5, samples=64, seed=1, batches=4)
    assert again == base and hash(again) == hash(base)
    # the device is resolved at construction: the default is the CPU spelled out
    cpu = FieldSpec("mc", fam, 5, samples=64, seed=1, batches=4, device="cpu")
    assert cpu == base and hash(cpu) == hash(base)


@pytest.mark.parametrize("kind", list(FieldKind))
def test_the_device_default_is_the_cpu_for_every_kind(kind: FieldKind) -> None:
    """One device policy (mesadyn.device): None is the CPU for every kind, not CUDA when
    present, and the spec holds the resolved string."""
    kw = {"m": 8} if kind is FieldKind.FINITE else {}
    spec = FieldSpec(kind, gaussian(2), 5, **kw)
    assert spec.device == "cpu"
    assert FieldSpec(kind, gaussian(2), 5, device="CPU", **kw).device == "cpu"


def test_auto_is_resolved_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert FieldSpec("mc", gaussian(2), 5, device="auto").device == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert FieldSpec("mc", gaussian(2), 5, device="auto").device == "cuda"
    assert FieldSpec("exact", gaussian(2), 5, device="cuda:1").device == "cuda:1"
    with pytest.raises(MesadynError, match="2 CUDA device"):
        FieldSpec("exact", gaussian(2), 5, device="cuda:2")


def test_a_custom_sampler_changes_the_hash() -> None:
    a = FieldSpec("mc", sampled(2, _draw), 5, samples=64, batches=4)
    b = FieldSpec("mc", sampled(2, _draw_other), 5, samples=64, batches=4)
    # same describe() (name, kind, d), different sampler: different specs
    assert sampled(2, _draw).describe() == sampled(2, _draw_other).describe()
    assert a != b and hash(a) != hash(b)
    assert a == FieldSpec("mc", sampled(2, _draw), 5, samples=64, batches=4)
    # two lambdas with the same code are still two samplers (they may read different state)
    la = FieldSpec("mc", sampled(2, lambda n, g, d: _draw(n, g, d)), 5, samples=64, batches=4)
    lb = FieldSpec("mc", sampled(2, lambda n, g, d: _draw(n, g, d)), 5, samples=64, batches=4)
    assert la != lb
    # an iid family with a custom sampler differs from the same moments with another sampler
    m = (1.0, 3.0, 15.0)
    ia = FieldSpec("mc", iid(2, *m, sampler=_draw), 5, samples=64, batches=4)
    ib = FieldSpec("mc", iid(2, *m, sampler=_draw_other), 5, samples=64, batches=4)
    assert ia != ib and hash(ia) != hash(ib)
