"""make_field(spec): the one way to build a field, reused per process (hits and misses)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.field import (
    ExactField,
    FieldSpec,
    FiniteField,
    MonteCarloField,
    _reuse,
    cache_stats,
    clear_cache,
    make_field,
)
from mesadyn.process import gaussian


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_cache()
    yield
    clear_cache()


def test_kinds_build_the_right_class() -> None:
    fam = gaussian(2, 0.8)
    assert type(make_field(FieldSpec("exact", fam, 5))) is ExactField
    mc = make_field(FieldSpec("mc", fam, 5, samples=64, seed=3, batches=4, device="cpu"))
    assert type(mc) is MonteCarloField and (mc.m, mc.seed, mc.batches) == (64, 3, 4)
    fin = make_field(FieldSpec("finite", fam, 5, m=32, seed=2, device="cpu"))
    assert type(fin) is FiniteField and (fin.m, fin.seed) == (32, 2)
    assert fin.describe() == {"field": "finite", "T": 5, **fam.describe(), "m": 32, "seed": 2,
                              "form": str(fin.form)}


def test_hits_and_misses(tmp_path) -> None:
    assert cache_stats() == {"hits": 0, "misses": 0, "items": 0}
    f1 = make_field(FieldSpec("exact", gaussian(2, 1.0), 5), cache_dir=tmp_path)
    f2 = make_field(FieldSpec("exact", gaussian(2, 1.0), 5), cache_dir=tmp_path / "other")
    assert f1 is f2  # build options (where the tensors are cached) are not in the key
    assert cache_stats() == {"hits": 1, "misses": 1, "items": 1}
    f3 = make_field(FieldSpec("exact", gaussian(2, 1.0), 6), cache_dir=tmp_path)
    m1 = make_field(FieldSpec("mc", gaussian(2, 1.0), 5, samples=64, batches=4, seed=1))
    m2 = make_field(FieldSpec("mc", gaussian(2, 1.0), 5, samples=64, batches=4, seed=2))
    assert len({id(f1), id(f3), id(m1), id(m2)}) == 4
    assert cache_stats() == {"hits": 1, "misses": 4, "items": 4}
    # the reused field computes what a freshly built one computes
    theta = torch.from_numpy(np.random.default_rng(0).normal(size=f1.n_params) * 0.3)
    fresh = ExactField(gaussian(2, 1.0), 5, cache=False)
    assert float(f2.loss(theta)) == float(fresh.loss(theta))
    # different seeds are different draws
    assert not torch.equal(m1.grad(theta), m2.grad(theta))


def test_reuse_false_builds_afresh_and_leaves_the_cache_alone() -> None:
    spec = FieldSpec("finite", gaussian(2), 5, m=8, device="cpu")
    a = make_field(spec)
    b = make_field(spec, reuse=False)
    assert a is not b and torch.equal(a.x1, b.x1) and torch.equal(a.lam, b.lam)
    assert cache_stats() == {"hits": 0, "misses": 1, "items": 1}


def test_least_recently_used_is_dropped() -> None:
    specs = [FieldSpec("finite", gaussian(1), 3, m=2, seed=s, device="cpu")
             for s in range(_reuse.MAX_ITEMS + 1)]
    first = make_field(specs[0])
    for s in specs[1:]:
        make_field(s)
    assert cache_stats()["items"] == _reuse.MAX_ITEMS
    assert make_field(specs[0]) is not first  # evicted, rebuilt
    assert cache_stats()["misses"] == _reuse.MAX_ITEMS + 2


def test_make_field_takes_a_spec_only() -> None:
    with pytest.raises(MesadynError, match="make_field takes a FieldSpec, got str"):
        make_field("exact")  # type: ignore[arg-type]


def test_byte_budget_drops_least_recently_used(monkeypatch) -> None:
    specs = [FieldSpec("finite", gaussian(2), 5, m=50, seed=s, device="cpu") for s in range(3)]
    fields = [make_field(s) for s in specs]
    one = fields[0].memory_bytes()
    assert one >= 50 * 2 * 24  # the draws at least
    monkeypatch.setattr(_reuse, "MAX_BYTES", int(2.5 * one))
    make_field(specs[2])  # a hit: the oldest is dropped to fit two
    assert cache_stats()["items"] == 2
    assert make_field(specs[1]) is fields[1] and make_field(specs[2]) is fields[2]
    monkeypatch.setattr(_reuse, "MAX_BYTES", 1)
    assert make_field(specs[2]) is fields[2]  # the field asked for is always kept
    assert cache_stats()["items"] == 1


def test_memory_bytes_counts_a_built_polynomial() -> None:
    f = FiniteField(gaussian(2), 5, 30, seed=1, device="cpu", form="polynomial")
    before = f.memory_bytes()
    f.prepare()
    assert f.memory_bytes() > before + 4**6 * 16  # Ĝ's (2d)⁶ entries, stored twice at least
    assert make_field(FieldSpec("exact", gaussian(2), 5)).memory_bytes() > 0
