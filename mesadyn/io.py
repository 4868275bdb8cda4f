"""Runs on disk: xarray Datasets in netCDF (h5netcdf), written atomically, with provenance.

Every run file carries the attributes ``mesadyn_version``, ``kind`` (what wrote it),
``config`` (the full configuration as JSON), ``seed`` and ``created``.  Files are written to
a temporary name in the target folder and renamed into place, so an interrupted write never
leaves a half-written file; a writer killed outright (SIGKILL) can leave its hidden temporary
file behind, which :func:`clean_stale_tmp` removes on the next run.  Nothing is ever unpickled.

Output paths are checked with :func:`check_writable` / :func:`check_writable_dir` *before*
any work starts, and JSON is strict (:func:`to_json`): see ``docs/reliability.md``.
"""

from __future__ import annotations

import functools
import json
import math
import os
import socket
import stat
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .errors import MesadynError

if TYPE_CHECKING:  # numpy and xarray are imported where they are used
    import numpy as np
    import xarray as xr

ENGINE: Final = "h5netcdf"
#: Suffixes of netCDF run files.
NETCDF_SUFFIXES = (".nc", ".nc4", ".netcdf")
#: Suffix of every temporary file this module writes (``.<name>.<host>-<pid>.<random>.tmp``).
TMP_SUFFIX = ".tmp"
#: A temporary file whose writer cannot be checked is stale after this many seconds.
STALE_TMP_AGE_S = 24 * 3600.0


@functools.cache
def version() -> str:
    """The installed mesadyn version (read once per process)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as _v

    try:
        return _v("mesadyn")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0+unknown"


# ---- strict JSON -------------------------------------------------------------------------
def _nonfinite_word(x: float) -> str:
    if math.isnan(x):
        return "NaN (not a number)"
    return "+infinity" if x > 0 else "-infinity"


def _has_nonfinite(obj: Any) -> bool:
    if isinstance(obj, float):
        return not math.isfinite(obj)
    if isinstance(obj, list):
        return any(_has_nonfinite(v) for v in obj)
    return False


def jsonable(obj: Any) -> Any:
    """``obj`` as plain JSON values, with every non-finite float replaced by ``None``.

    numpy scalars and arrays become Python numbers and lists, paths become strings, tuples
    become lists.  In a dict, a key ``k`` whose value is (or contains) a non-finite number gets
    a sibling ``k_reason`` saying what it was (``"NaN (not a number)"``, ``"+infinity"``,
    ``"-infinity"`` or ``"non-finite entries are null"`` for lists), unless the producer
    already put its own ``k_reason`` there (a sentence saying *why*; that one is kept).

    Arguments:
        obj: a tree of dicts, lists, tuples, numbers, strings, numpy values and paths.

    Returns:
        The same tree in plain Python values that :func:`json.dumps` writes as strict JSON.
    """
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        reasons: dict[str, str] = {}
        for k, v in obj.items():
            key = str(k)
            value = _plain(v)
            if isinstance(value, float) and not math.isfinite(value):
                reasons[f"{key}_reason"] = _nonfinite_word(value)
            elif isinstance(value, list) and _has_nonfinite(value):
                reasons[f"{key}_reason"] = "non-finite entries (NaN or infinity) are null"
            out[key] = jsonable(value)
        for rk, why in reasons.items():
            if out.get(rk) is None:
                out[rk] = why
        return out
    value = _plain(obj)
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _plain(obj: Any) -> Any:
    """numpy and path values as plain Python values (one level)."""
    np = sys.modules.get("numpy")  # no numpy value exists unless numpy was imported
    if np is None:
        return list(obj) if isinstance(obj, tuple) else str(obj) if isinstance(
            obj, Path) else obj
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, tuple):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    return obj


def to_json(obj: Any) -> str:
    """Strict JSON text (keys sorted): ``NaN`` and ``Infinity`` are never emitted.

    Non-finite numbers become ``null`` with the reason beside them (see :func:`jsonable`),
    so any RFC 8259 parser reads the output, e.g. ``json.loads(s, parse_constant=...)``
    that rejects ``NaN`` never fires.

    Raises:
        TypeError: ``obj`` holds a value JSON cannot represent (a programming error, not bad
            input: the CLI reports it as an internal error).
    """
    try:
        return json.dumps(jsonable(obj), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cannot write as JSON: {exc}") from None


# ---- checking paths before any work -------------------------------------------------------
def check_writable(path: str | os.PathLike[str], *,
                   suffixes: Iterable[str] | None = None) -> Path:
    """``path`` as a :class:`Path` after checking that a file can be written there.

    Checked before any work starts, so that a long run never ends in an unwritable output:
    the path is not empty, its parent exists, is a directory and is writable, the path itself
    is not a directory nor any other non-regular file (FIFO, device, socket), and its suffix
    is one of ``suffixes`` (case-insensitive) when given, and the folder takes a new file (a
    probe is made and removed).  Nothing else is created.

    Arguments:
        path: the output file.
        suffixes: the allowed suffixes with their dot, e.g. ``(".nc",)``; ``None`` allows any.

    Returns:
        ``Path(path)``.

    Raises:
        MesadynError: naming the path and what is wrong with it.
    """
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip():
        raise MesadynError(f"output path must not be empty, got {text!r}")
    p = Path(text)
    if suffixes is not None:
        allowed = tuple(s.lower() for s in suffixes)
        if p.suffix.lower() not in allowed:
            raise MesadynError(
                f"output {text!r} must end in {' or '.join(allowed)}, got suffix {p.suffix!r}"
            )
    try:
        st = p.stat()
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise MesadynError(f"cannot write {text!r}: a folder on its path is a file") from None
    except OSError as exc:  # e.g. ELOOP, ENAMETOOLONG
        raise MesadynError(f"cannot write {text!r}: {exc.strerror or exc}") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise MesadynError(f"output {text!r} is a directory; give a file name")
        if not stat.S_ISREG(st.st_mode):
            raise MesadynError(f"output {text!r} exists and is not a regular file")
    parent = p.parent
    if not parent.exists():
        raise MesadynError(f"cannot write {text!r}: the folder {str(parent)!r} does not exist")
    if not parent.is_dir():
        raise MesadynError(f"cannot write {text!r}: {str(parent)!r} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise MesadynError(f"cannot write {text!r}: the folder {str(parent)!r} is not writable")
    why = _probe(parent, folder=False)
    if why is not None:
        raise MesadynError(f"cannot write {text!r}: the folder {str(parent)!r} takes no new "
                           f"files ({why})")
    return p


def _probe(where: Path, *, folder: bool) -> str | None:
    """``None`` if ``where`` takes a new file (``folder``: a new folder), made and removed at
    once (``os.access`` says yes for ``/proc``, which takes none); else the reason."""
    import tempfile

    try:
        if folder:
            os.rmdir(tempfile.mkdtemp(prefix=".mesadyn-probe-", dir=where))
        else:
            fd, name = tempfile.mkstemp(prefix=".mesadyn-probe-", dir=where)
            os.close(fd)
            os.unlink(name)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def check_writable_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` as a :class:`Path` after checking that an output folder can live there.

    Either ``path`` is an existing, writable directory, or it does not exist and its nearest
    existing ancestor is a writable directory (the missing folders are created by the
    writer) that takes a new folder (a probe is made and removed).  Nothing else is created.

    Raises:
        MesadynError: naming the path and what is wrong with it.
    """
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip():
        raise MesadynError(f"output folder must not be empty, got {text!r}")
    p = Path(text)
    probe = p
    while True:
        try:
            st = probe.stat()
        except (FileNotFoundError, NotADirectoryError):
            if probe.parent == probe:
                raise MesadynError(f"cannot create the folder {text!r}") from None
            probe = probe.parent
            continue
        except OSError as exc:
            raise MesadynError(f"cannot use the folder {text!r}: {exc.strerror or exc}") from None
        break
    if not stat.S_ISDIR(st.st_mode):
        if probe == p:
            raise MesadynError(f"output folder {text!r} exists and is not a folder")
        raise MesadynError(f"cannot create the folder {text!r}: {str(probe)!r} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise MesadynError(f"cannot write into {text!r}: {str(probe)!r} is not writable")
    why = _probe(probe, folder=probe != p)
    if why is not None:
        raise MesadynError(f"cannot write into {text!r}: {str(probe)!r} takes no new "
                           f"{'folders' if probe != p else 'files'} ({why})")
    return p


# ---- atomic writes and their leftovers ----------------------------------------------------
def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _tmp_prefix(name: str) -> str:
    """``.<name>.<host>-<pid>.``: who writes the temporary file, for :func:`clean_stale_tmp`."""
    host = "".join(c if c.isalnum() or c in "-_" else "_" for c in socket.gethostname())
    return f".{name}.{host or 'host'}-{os.getpid()}."


def _mkstemp_for(path: Path) -> tuple[int, str]:
    return tempfile.mkstemp(prefix=_tmp_prefix(path.name), suffix=TMP_SUFFIX, dir=path.parent)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *,
                       mode: int | None = None) -> Path:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, then rename).

    The file gets ``mode``, by default the usual permissions (0666 less the umask), not
    mkstemp's 0600.  Missing parent folders are created.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _mkstemp_for(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _umask_mode() if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write text atomically (UTF-8)."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OSError:
        return True
    return True


def clean_stale_tmp(folder: str | os.PathLike[str], *,
                    max_age_s: float = STALE_TMP_AGE_S) -> list[Path]:
    """Remove the temporary files of dead writers in ``folder`` (not recursive).

    A temporary file of :func:`atomic_write_bytes` / :func:`save_run` is named
    ``.<target>.<host>-<pid>.<random>.tmp``.  It is stale when its writer ran on this host and
    that process no longer exists, or (writer on another host, or a name without the writer)
    when it was last modified more than ``max_age_s`` seconds ago.  Anything else in the folder
    is left alone; a file that vanishes meanwhile is skipped.

    Returns:
        The paths removed.
    """
    folder = Path(folder)
    removed: list[Path] = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    host = _tmp_prefix("x").split(".")[2].rsplit("-", 1)[0]
    now = time.time()
    for entry in entries:
        name = entry.name
        if not (name.startswith(".") and name.endswith(TMP_SUFFIX)):
            continue
        try:
            st = entry.lstat()
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        stale = now - st.st_mtime > max_age_s
        parts = name[: -len(TMP_SUFFIX)].split(".")
        if not stale and len(parts) >= 4:
            who = parts[-2]
            whost, _, wpid = who.rpartition("-")
            if whost == host and wpid.isdigit() and int(wpid) != os.getpid():
                stale = not _pid_alive(int(wpid))
        if stale:
            try:
                entry.unlink()
            except OSError:
                continue
            removed.append(entry)
    return removed


# ---- reading files a user points at ------------------------------------------------------
def _regular_file(path: Path, what: str) -> None:
    """Raise unless ``path`` is an existing, non-empty regular file."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise MesadynError(f"{what} not found: {str(path)!r}") from None
    except OSError as exc:
        raise MesadynError(f"cannot read {what} {str(path)!r}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise MesadynError(f"{what} {str(path)!r} is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise MesadynError(f"{what} {str(path)!r} is not a regular file")
    if st.st_size == 0:
        raise MesadynError(f"{what} {str(path)!r} is empty")


def load_npy(path: str | os.PathLike[str]) -> np.ndarray:
    """A numeric array from a ``.npy`` file; anything else is a one-line error.

    Refused: a missing, empty or non-regular file, an ``.npz`` or other archive renamed to
    ``.npy``, a pickled (object) array (never unpickled), a foreign file, and a truncated one:
    the header's shape and dtype are checked against the file's size before anything is
    allocated (a 1 kB file whose header claims 10⁸ rows is refused, not read), and so is an
    array that does not fit in memory (the one size guard, :func:`mesadyn.budget.check`).

    Raises:
        MesadynError: naming the path and the problem.
    """
    import numpy as np

    p = Path(path)
    _regular_file(p, "array file")
    with open(p, "rb") as fh:
        head = fh.read(6)
        if head != b"\x93NUMPY":
            kind = ("a zip archive (an .npz?)" if head[:4] == b"PK\x03\x04"
                    else "not a .npy file")
            raise MesadynError(f"cannot read {str(p)!r} as a numpy array: {kind}")
        fh.seek(0)
        try:
            major, _minor = np.lib.format.read_magic(fh)
            read_header = (np.lib.format.read_array_header_1_0 if major == 1
                           else np.lib.format.read_array_header_2_0)
            shape, _fortran, dtype = read_header(fh)
        except (ValueError, OSError, EOFError) as exc:
            msg = " ".join(str(exc).split()) or type(exc).__name__
            raise MesadynError(f"cannot read {str(p)!r} as a numpy array: {msg}") from None
        offset = fh.tell()
    if not dtype.hasobject:
        need = offset + math.prod(shape) * dtype.itemsize
        size = p.stat().st_size
        if size < need:
            raise MesadynError(
                f"cannot read {str(p)!r} as a numpy array: truncated (its header claims shape "
                f"{tuple(shape)} of {dtype}, {need} bytes, but the file has {size})")
        from .budget import Estimate, check

        check(Estimate(f"the array file {str(p)!r} (shape {tuple(shape)} of {dtype})",
                       math.prod(shape) * dtype.itemsize, advice="give a smaller array"))
    try:
        arr = np.load(p, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        msg = " ".join(str(exc).split()) or type(exc).__name__
        raise MesadynError(f"cannot read {str(p)!r} as a numpy array: {msg}") from None
    if not isinstance(arr, np.ndarray):  # pragma: no cover - the magic check excludes npz
        raise MesadynError(f"cannot read {str(p)!r} as a numpy array")
    return arr


# ---- runs on disk ---------------------------------------------------------------------------
def save_run(ds: xr.Dataset, path: str | os.PathLike[str], *, kind: str,
             config: dict[str, Any], seed: int | None = None) -> Path:
    """Save ``ds`` to ``path`` (netCDF) atomically with its provenance attributes."""
    path = Path(path)
    if path.suffix.lower() not in NETCDF_SUFFIXES:
        raise MesadynError(f"run files are netCDF: give a path ending in .nc, got {str(path)!r}")
    ds = ds.copy()
    ds.attrs.update(
        mesadyn_version=version(),
        kind=kind,
        config=to_json(config),
        seed=-1 if seed is None else int(seed),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _mkstemp_for(path)
    os.close(fd)
    try:
        ds.to_netcdf(tmp, engine=ENGINE, invalid_netcdf=True)
        os.chmod(tmp, _umask_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_run(path: str | os.PathLike[str], kind: str | None = None) -> xr.Dataset:
    """Load a run saved by :func:`save_run`; a missing, unreadable or foreign file is an error.

    With ``kind`` given, the file must have been written by that kind of run.  An empty file,
    a directory, a FIFO, a renamed archive or a truncated file gives a one-line error.
    """
    import xarray as xr

    path = Path(path)
    _regular_file(path, "run file")
    with open(path, "rb") as fh:
        head = fh.read(8)
    if head[:4] != b"\x89HDF" and head[:3] != b"CDF":
        raise MesadynError(f"cannot read run file {str(path)!r}: not a netCDF/HDF5 file")
    try:
        with xr.open_dataset(path, engine=ENGINE) as ds:
            ds = ds.load()
    except Exception as exc:  # noqa: BLE001 - any reader failure means unreadable
        raise MesadynError(f"cannot read run file {str(path)!r}: {type(exc).__name__}") from None
    if "mesadyn_version" not in ds.attrs or "config" not in ds.attrs:
        raise MesadynError(f"{str(path)!r} is not a mesadyn run file (no provenance attributes)")
    if kind is not None and ds.attrs.get("kind") != kind:
        raise MesadynError(
            f"{str(path)!r} holds a {ds.attrs.get('kind')!r} run, expected a {kind!r} run"
        )
    return ds


def run_config(ds: xr.Dataset) -> dict[str, Any]:
    """The configuration stored with a run.

    Raises:
        MesadynError: the ``config`` attribute is missing, not JSON, or not a JSON object.
    """
    raw = ds.attrs.get("config")
    try:
        config = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        config = None
    if not isinstance(config, dict):
        raise MesadynError("the run file's config attribute is not a JSON object")
    return config
