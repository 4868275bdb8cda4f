"""``make_field(spec)``: the one way to build a field, reused within a process.

Building a field is costly (the exact field counts or loads its moment tensors; a sampled field
draws and prepares its samples) and depends only on its :class:`~mesadyn.field.FieldSpec`, not on
where the flow starts or which solver runs.  :func:`make_field` keeps the last
:data:`MAX_ITEMS` fields it built in a per-process LRU cache keyed by the spec; a sweep's worker
reuses one field for every point that shares it.  :func:`cache_stats` reports hits and misses.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import TypedDict

from ._base import Field
from ._spec import DEFAULT_BATCHES, DEFAULT_SAMPLES, FieldKind, FieldSpec

#: At most this many fields are kept per process (least recently used dropped first).
MAX_ITEMS = 8
#: ... and at most this many bytes (:meth:`Field.memory_bytes`; ``None``: half the memory budget
#: of :func:`~mesadyn.field.memory_budget` when checked).  The field just asked for is kept.
MAX_BYTES: int | None = None

_LOCK = threading.Lock()
_CACHE: OrderedDict[FieldSpec, Field] = OrderedDict()
_STATS = {"hits": 0, "misses": 0}


class CacheStats(TypedDict):
    """Hits and misses of :func:`make_field`'s cache in this process, and fields held."""

    hits: int
    misses: int
    items: int


def build_field(spec: FieldSpec, *, cache_dir: str | os.PathLike[str] | None = None,
                disk_cache: bool = True, max_bytes: int | None = None) -> Field:
    """A new field for ``spec``, never cached (see :func:`make_field` for the arguments)."""
    from ._sequences import FiniteSequenceField, MonteCarloSequenceField
    from .exact import ExactField
    from .finite import FiniteField
    from .montecarlo import MonteCarloField

    if not spec.model.is_paper:
        return _model_field(spec)
    if not spec.diagonal_noiseless and spec.kind is not FieldKind.EXACT:
        if spec.kind is FieldKind.MC:
            return MonteCarloSequenceField(
                spec.family, spec.T,
                samples=DEFAULT_SAMPLES if spec.samples is None else spec.samples,
                seed=spec.seed,
                batches=DEFAULT_BATCHES if spec.batches is None else spec.batches,
                radius=spec.radius, rotation=spec.rotation, noise=spec.noise,
                device=spec.device)
        assert spec.m is not None  # FieldSpec requires m for the finite field
        return FiniteSequenceField(spec.family, spec.T, spec.m, spec.seed, radius=spec.radius,
                                   rotation=spec.rotation, noise=spec.noise,
                                   device=spec.device)
    if spec.kind is FieldKind.EXACT:
        return ExactField(spec.family, spec.T, cache_dir=cache_dir, cache=disk_cache,
                          device=spec.device, max_bytes=max_bytes, radius=spec.radius,
                          rotation=spec.rotation, noise=spec.noise)
    if spec.kind is FieldKind.MC:
        return MonteCarloField(
            spec.family, spec.T,
            samples=DEFAULT_SAMPLES if spec.samples is None else spec.samples,
            seed=spec.seed,
            batches=DEFAULT_BATCHES if spec.batches is None else spec.batches,
            device=spec.device, radius=spec.radius)
    assert spec.m is not None  # FieldSpec requires m for the finite field
    return FiniteField(spec.family, spec.T, spec.m, seed=spec.seed, device=spec.device,
                       radius=spec.radius)


def _model_field(spec: FieldSpec) -> Field:
    """The field of a model other than the paper's: the exact field by quadrature
    (:class:`~mesadyn.field._quadrature_field.QuadratureField`) or the sampled fields in direct
    form (:mod:`mesadyn.field._model_fields`), for any rotation and noise."""
    from ._model_fields import FiniteModelField, MonteCarloModelField
    from ._quadrature_field import QuadratureField

    if spec.kind is FieldKind.EXACT:  # FieldSpec admits the diagonal noiseless W only
        return QuadratureField(spec.model, spec.family, spec.T, radius=spec.radius,
                               device=spec.device)
    if spec.kind is FieldKind.MC:
        return MonteCarloModelField(
            spec.model, spec.family, spec.T,
            samples=DEFAULT_SAMPLES if spec.samples is None else spec.samples,
            seed=spec.seed,
            batches=DEFAULT_BATCHES if spec.batches is None else spec.batches,
            radius=spec.radius, rotation=spec.rotation, noise=spec.noise, device=spec.device)
    assert spec.m is not None  # FieldSpec requires m for the finite field
    return FiniteModelField(spec.model, spec.family, spec.T, spec.m, spec.seed,
                            radius=spec.radius, rotation=spec.rotation, noise=spec.noise,
                            device=spec.device)


def make_field(spec: FieldSpec, *, cache_dir: str | os.PathLike[str] | None = None,
               disk_cache: bool = True, max_bytes: int | None = None,
               reuse: bool = True) -> Field:
    """The field that ``spec`` describes, built once per process and then reused.

    Arguments:
        spec: what to build (kind, family, T and the kind's options).
        cache_dir, disk_cache, max_bytes: where the exact field keeps its moment tensors on
            disk, whether it does, and a cap on the memory its build may use.  They change
            where the numbers come from, never the numbers, so they are not part of the
            reuse key; the sampled fields ignore them.
        reuse: ``False`` builds a fresh field and leaves the cache alone.

    Returns:
        An :class:`~mesadyn.field.ExactField`, :class:`~mesadyn.field.MonteCarloField` or
        :class:`~mesadyn.field.FiniteField`; for a rotation or noise beyond the paper's
        diagonal W (``spec.diagonal_noiseless`` false) an ``ExactField`` of that process or a
        :class:`~mesadyn.field.MonteCarloSequenceField` or
        :class:`~mesadyn.field.FiniteSequenceField`; for a model other than the paper's
        (``spec.model``) its exact field by quadrature or its sampled fields in direct form.
        A reused field is the same object: treat it as
        read-only.

    Raises:
        MesadynError: ``spec`` is not a :class:`FieldSpec`, or the field cannot be built
            (no exact moments, not enough memory, ...).
    """
    if not isinstance(spec, FieldSpec):
        from ..errors import MesadynError

        raise MesadynError(f"make_field takes a FieldSpec, got {type(spec).__name__}")
    if not reuse:
        return build_field(spec, cache_dir=cache_dir, disk_cache=disk_cache,
                           max_bytes=max_bytes)
    with _LOCK:
        hit = _CACHE.get(spec)
        if hit is not None:
            _CACHE.move_to_end(spec)
            _STATS["hits"] += 1
            _evict()
            return hit
    field = build_field(spec, cache_dir=cache_dir, disk_cache=disk_cache, max_bytes=max_bytes)
    with _LOCK:
        _STATS["misses"] += 1
        _CACHE[spec] = field
        _evict()
    return field


def _evict() -> None:
    """Drop least recently used fields beyond :data:`MAX_ITEMS` or :data:`MAX_BYTES` (fields
    grow after they are cached, e.g. a lazily built polynomial, so this runs on every call)."""
    while len(_CACHE) > MAX_ITEMS:
        _CACHE.popitem(last=False)
    if len(_CACHE) <= 1:
        return
    if MAX_BYTES is None:
        from ._memory import memory_budget

        limit = memory_budget().bytes // 2
    else:
        limit = MAX_BYTES
    sizes = [f.memory_bytes() for f in _CACHE.values()]
    total = sum(sizes)
    for size in sizes[:-1]:  # oldest first; the newest (just asked for) stays
        if total <= limit:
            break
        _CACHE.popitem(last=False)
        total -= size


def cache_stats() -> CacheStats:
    """Hits, misses and the number of fields held by :func:`make_field`'s cache."""
    with _LOCK:
        return CacheStats(hits=_STATS["hits"], misses=_STATS["misses"], items=len(_CACHE))


def clear_cache() -> None:
    """Drop every cached field and reset the counters."""
    with _LOCK:
        _CACHE.clear()
        _STATS.update(hits=0, misses=0)
