"""Costly inputs built once per worker process and reused by every point that needs them.

A sweep runs many points in each Dask worker process.  Anything expensive that depends on a
few options only — above all a vector field with its exact moment tensors, which depends on
(family, T) but not on the initialisation or the solver — should be built once per process:
:func:`shared_field` is :func:`mesadyn.field.make_field` behind a per-process LRU cache, and
:func:`shared` does the same for any factory.  ``stats()`` reports hits and misses (the sweep
records them with every point, so reuse can be checked).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

_LOCK = threading.Lock()
_CACHE: OrderedDict[Hashable, Any] = OrderedDict()
_STATS = {"hits": 0, "misses": 0}
#: At most this many shared objects are kept per process (least recently used dropped first).
MAX_ITEMS = 8


def shared(key: Hashable, factory: Callable[[], Any]) -> Any:
    """The object cached under ``key`` in this process, built by ``factory()`` on first use."""
    with _LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            _STATS["hits"] += 1
            return _CACHE[key]
    value = factory()
    with _LOCK:
        _STATS["misses"] += 1
        _CACHE[key] = value
        while len(_CACHE) > MAX_ITEMS:
            _CACHE.popitem(last=False)
    return value


def shared_field(kind: str, family: Any, T: int, **kw: Any) -> Any:
    """``make_field(FieldSpec(kind, family, T, **kw))`` (the field package's own per-process
    cache); the exact field's ``cache_dir``, ``cache`` and ``max_bytes`` pass through."""
    from ..field import FieldSpec, make_field

    build = {"cache_dir": kw.pop("cache_dir", None), "disk_cache": kw.pop("cache", True),
             "max_bytes": kw.pop("max_bytes", None)}
    return make_field(FieldSpec(kind, family, T, **kw), **build)


def stats() -> dict[str, int]:
    """Hits, misses and the number of cached objects in this process."""
    with _LOCK:
        return {**_STATS, "items": len(_CACHE)}


def clear() -> None:
    """Drop every cached object (and reset the counters)."""
    with _LOCK:
        _CACHE.clear()
        _STATS.update(hits=0, misses=0)
