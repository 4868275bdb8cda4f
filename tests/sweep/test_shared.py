"""The per-process cache of costly shared inputs (fields with moment tensors)."""

from __future__ import annotations

import numpy as np
import torch

from mesadyn.field import ExactField
from mesadyn.process import gaussian
from mesadyn.sweep import shared


def test_shared_builds_once_and_evicts() -> None:
    shared.clear()
    built: list[int] = []

    def factory(i: int):
        return lambda: built.append(i) or f"obj{i}"

    assert shared.shared("a", factory(1)) == "obj1"
    assert shared.shared("a", factory(2)) == "obj1"
    assert built == [1] and shared.stats() == {"hits": 1, "misses": 1, "items": 1}
    for i in range(shared.MAX_ITEMS + 1):
        shared.shared(("k", i), factory(10 + i))
    assert shared.stats()["items"] == shared.MAX_ITEMS
    shared.shared("a", factory(3))  # "a" was evicted (least recently used): rebuilt
    assert built[-1] == 3
    shared.clear()


def test_shared_field_is_the_same_exact_field(tmp_path) -> None:
    shared.clear()
    fam = gaussian(2, 1.0)
    f1 = shared.shared_field("exact", fam, 5, cache_dir=str(tmp_path))
    f2 = shared.shared_field("exact", gaussian(2, 1.0), 5, cache_dir=str(tmp_path))
    f3 = shared.shared_field("exact", fam, 6, cache_dir=str(tmp_path))
    assert f1 is f2 and f3 is not f1 and isinstance(f1, ExactField)
    # the cached field computes what a freshly built one computes
    theta = torch.from_numpy(np.random.default_rng(0).normal(size=f1.n_params) * 0.3)
    fresh = ExactField(fam, 5, cache=False)
    assert torch.allclose(f2.loss(theta), fresh.loss(theta), rtol=1e-12, atol=0)
    shared.clear()
