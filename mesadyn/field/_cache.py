"""Disk cache of the exact moment tensors: ``.npz`` (no pickle) with metadata and a checksum.

A file is used only if it opens with ``allow_pickle=False``, its metadata names the same
process, T and format version, and the SHA-256 of its arrays matches the stored one.  Anything
else (truncated, corrupted, foreign, older format) is reported as a miss and rebuilt.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np

from ..io import atomic_write_bytes

#: Bump when the layout or the meaning of the stored arrays changes.
FORMAT_VERSION = 1


def cache_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """``override``, else ``$MESADYN_CACHE_DIR``, else ``~/.cache/mesadyn``."""
    if override is not None:
        return Path(override)
    env = os.environ.get("MESADYN_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "mesadyn"


def key_of(description: dict[str, object], T: int) -> dict[str, object]:
    """The cache key: the process description, T and the format version."""
    return {"process": description, "T": int(T), "format": FORMAT_VERSION,
            "what": "mesadyn.exact-moments"}


def key_hash(key: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def path_for(key: dict[str, object], directory: Path) -> Path:
    return directory / f"exact-{key_hash(key)[:24]}.npz"


def checksum(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 over the names, dtypes, shapes and bytes of ``arrays`` (sorted by name)."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def save(path: Path, key: dict[str, object], arrays: dict[str, np.ndarray]) -> Path:
    """Write ``arrays`` with ``key`` and their checksum to ``path`` atomically."""
    meta = {"key": key, "checksum": checksum(arrays)}
    buf = io.BytesIO()
    np.savez(buf, __meta__=np.array(json.dumps(meta, sort_keys=True)), **arrays)
    return atomic_write_bytes(path, buf.getvalue())


def load(path: Path, key: dict[str, object]) -> tuple[dict[str, np.ndarray] | None, str]:
    """``(arrays, "hit")`` or ``(None, reason)`` where reason says why the file was refused."""
    if not path.exists():
        return None, "missing"
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["__meta__"][()]))
            arrays = {name: z[name] for name in z.files if name != "__meta__"}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile,
            json.JSONDecodeError, UnicodeDecodeError) as exc:
        return None, f"unreadable ({type(exc).__name__})"
    if not isinstance(meta, dict) or meta.get("key") != json.loads(json.dumps(key)):
        return None, "built for another process"
    if meta.get("checksum") != checksum(arrays):
        return None, "checksum mismatch"
    return arrays, "hit"
