"""Disk cache of the exact moment tensors: ``.npz`` (no pickle) with metadata and a checksum.

A file is used only if it is a regular file owned by this user (not a symlink, FIFO, device or
directory: those are refused without being opened, so nothing can block), it opens with
``allow_pickle=False``, its metadata names the same process, T and format version, the
SHA-256 of its arrays matches the stored one, and the arrays have the layout of the exact
moment tensors for that d (names, dtypes, shapes, index ranges, finite values).  Anything else
(truncated, corrupted, foreign, older format, wrong shapes) is reported as a miss with its reason
and rebuilt; the rebuilt file atomically replaces whatever was at the path.

The cache directory is created private (0700) and files are written 0600.  Trust model
(``docs/reliability.md``): the cache is a speed-up, never a source of truth that is taken on
faith — a file that fails any check costs a rebuild, not a wrong answer or a crash; it holds
plain arrays only (nothing is unpickled or executed).  The checksum detects accidents
(truncation, bit flips, a file of another process), not an attacker who can write the
directory: keep it private, which is why it is created 0700 and foreign-owned files are refused.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..io import atomic_write_bytes, clean_stale_tmp

#: Bump when the layout or the meaning of the stored arrays changes.
FORMAT_VERSION = 1
#: The arrays of the exact field: ``C`` (d, n, n, n) and G's nonzeros ``g_*`` (COO), n = 2d.
ARRAYS = ("C", "g_q", "g_a1", "g_a2", "g_val")
#: Mode of the cache directory (created by :func:`save`) and of its files.
DIR_MODE = 0o700
FILE_MODE = 0o600


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
    """SHA-256 (hex) of the key's canonical JSON."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def path_for(key: dict[str, object], directory: Path) -> Path:
    """The cache file of ``key`` in ``directory``."""
    return directory / f"exact-{key_hash(key)[:24]}.npz"


def checksum(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 over the names, dtypes, shapes and bytes of ``arrays`` (sorted by name)."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def layout_problem(arrays: dict[str, np.ndarray], d: int) -> str | None:
    """Why ``arrays`` are not the exact moment tensors of dimension ``d`` (None if they are).

    ``C`` is float64 of shape (d, 2d, 2d, 2d); ``g_q, g_a1, g_a2`` are 1-D integer arrays with
    entries in [0, (2d)²); ``g_val`` is float64 of the same length; every value is finite.
    """
    missing = [name for name in ARRAYS if name not in arrays]
    if missing:
        return f"missing array(s) {', '.join(missing)}"
    n = 2 * d
    C = arrays["C"]
    if C.dtype != np.float64 or C.shape != (d, n, n, n):
        return f"C has shape {C.shape} {C.dtype}, expected {(d, n, n, n)} float64"
    val = arrays["g_val"]
    if val.dtype != np.float64 or val.ndim != 1:
        return f"g_val has shape {val.shape} {val.dtype}, expected 1-D float64"
    for name in ("g_q", "g_a1", "g_a2"):
        a = arrays[name]
        if a.dtype.kind not in "iu" or a.shape != val.shape:
            return f"{name} has shape {a.shape} {a.dtype}, expected {val.shape} integers"
        if a.size and (int(a.min()) < 0 or int(a.max()) >= n * n):
            return f"{name} has indices outside [0, {n * n})"
    if not (np.isfinite(C).all() and np.isfinite(val).all()):
        return "non-finite values"
    return None


def save(path: Path, key: dict[str, object], arrays: dict[str, np.ndarray]) -> Path:
    """Write ``arrays`` with ``key`` and their checksum to ``path`` atomically (mode 0600).

    The directory is created 0700 if missing; temporary files of dead writers there are removed.
    """
    _make_private_dir(path.parent)
    clean_stale_tmp(path.parent)
    meta = {"key": key, "checksum": checksum(arrays)}
    buf = io.BytesIO()
    payload: dict[str, Any] = {"__meta__": np.array(json.dumps(meta, sort_keys=True)), **arrays}
    np.savez(buf, allow_pickle=False, **payload)
    return atomic_write_bytes(path, buf.getvalue(), mode=FILE_MODE)


def _make_private_dir(directory: Path) -> None:
    if directory.is_dir():
        return
    directory.parent.mkdir(parents=True, exist_ok=True)
    try:
        directory.mkdir(mode=DIR_MODE)
    except FileExistsError:  # another process made it meanwhile (or it is not a folder)
        return
    os.chmod(directory, DIR_MODE)  # mkdir's mode is masked by the umask


def _read_regular(path: Path) -> tuple[bytes | None, str]:
    """The bytes of ``path`` if it is a regular file of ours, else ``(None, reason)``.

    Opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked with ``fstat`` on the open descriptor,
    so a FIFO, device or symlink is refused without blocking, even if it replaced the file
    between two checks.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, "missing"
    except OSError as exc:
        return None, f"unreadable ({type(exc).__name__})"
    if not stat.S_ISREG(st.st_mode):
        return None, f"refused: {_kind(st.st_mode)} at the cache path, not a regular file"
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        return None, f"unreadable ({type(exc).__name__})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, f"refused: {_kind(st.st_mode)} at the cache path, not a regular file"
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            return None, f"refused: owned by another user (uid {st.st_uid})"
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 24)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks), ""
    except OSError as exc:
        return None, f"unreadable ({type(exc).__name__})"
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def load(path: Path, key: dict[str, object]) -> tuple[dict[str, np.ndarray] | None, str]:
    """``(arrays, "hit")`` or ``(None, reason)`` where reason says why the file was refused."""
    data, why = _read_regular(path)
    if data is None:
        return None, why
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            meta = json.loads(str(z["__meta__"][()]))
            arrays = {name: z[name] for name in z.files if name != "__meta__"}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, TypeError,
            AttributeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        return None, f"unreadable ({type(exc).__name__})"
    if not isinstance(meta, dict) or meta.get("key") != json.loads(json.dumps(key)):
        return None, "built for another process"
    if meta.get("checksum") != checksum(arrays):
        return None, "checksum mismatch"
    process = key.get("process")
    d = process.get("d") if isinstance(process, dict) else None
    if isinstance(d, int) and not isinstance(d, bool):
        problem = layout_problem(arrays, d)
        if problem is not None:
            return None, f"wrong layout ({problem})"
    return arrays, "hit"
