"""How much memory a build may still use: the tightest of the machine, ``ulimit -v`` and cgroups.

``MemAvailable`` alone is not enough: a process under ``ulimit -v`` (``RLIMIT_AS``) or in a
cgroup with a memory limit dies with ``MemoryError`` (or is killed) long before the machine runs
out.  :func:`memory_budget` takes the smallest headroom of

* the machine: ``MemAvailable`` from ``/proc/meminfo``;
* the address space: the soft ``RLIMIT_AS`` minus this process's ``VmSize``;
* the cgroup: ``memory.max`` (v2) or ``memory.limit_in_bytes`` (v1) minus the current usage
  less reclaimable file pages,

and says which one it was, so a refusal can name it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

#: Limits at or above this are "no limit" (cgroup v1 writes 2⁶³ − page size for none).
_UNLIMITED = 2**60


@dataclass(frozen=True)
class MemoryBudget:
    """Bytes a build may use and the limit they come from (e.g. ``"ulimit -v"``)."""

    bytes: int
    source: str


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text == "max":
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _stat_value(path: Path, names: tuple[str, ...]) -> int:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and parts[0] in names and parts[1].isdigit():
            return int(parts[1])
    return 0


def machine_available(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """``MemAvailable`` in bytes, else free pages; ``None`` if neither can be read."""
    try:
        with open(meminfo) as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - exotic platforms
        return None


def address_space_headroom(status: Path = Path("/proc/self/status")) -> int | None:
    """Soft ``RLIMIT_AS`` minus the current ``VmSize``; ``None`` when unlimited."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft < 0 or soft >= _UNLIMITED:
        return None
    used = 0
    try:
        for line in status.read_text().splitlines():
            if line.startswith("VmSize:"):
                used = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    return max(0, int(soft) - used)


def _cgroup_dirs(root: Path, proc_cgroup: Path) -> list[tuple[Path, str]]:
    """Candidate cgroup directories (own path first, then the mount root) with their version."""
    own_v1: str | None = None
    own_v2: str | None = None
    try:
        for line in proc_cgroup.read_text().splitlines():
            hier, _, rest = line.partition(":")
            controllers, _, path = rest.partition(":")
            if hier == "0" and controllers == "":
                own_v2 = path
            elif "memory" in controllers.split(","):
                own_v1 = path
    except OSError:
        pass
    out: list[tuple[Path, str]] = []
    if own_v2 is not None:
        out.append((root / own_v2.lstrip("/"), "v2"))
    out.append((root, "v2"))
    if own_v1 is not None:
        out.append((root / "memory" / own_v1.lstrip("/"), "v1"))
    out.append((root / "memory", "v1"))
    return out


def cgroup_headroom(root: Path = Path("/sys/fs/cgroup"),
                    proc_cgroup: Path = Path("/proc/self/cgroup")) -> int | None:
    """The cgroup memory limit minus current usage (less inactive file pages); ``None`` if no
    limit applies (v2 ``memory.max``, v1 ``memory.limit_in_bytes``)."""
    best: int | None = None
    for directory, version in _cgroup_dirs(root, proc_cgroup):
        if version == "v2":
            limit = _read_int(directory / "memory.max")
            usage = _read_int(directory / "memory.current")
            inactive = _stat_value(directory / "memory.stat", ("inactive_file",))
        else:
            limit = _read_int(directory / "memory.limit_in_bytes")
            usage = _read_int(directory / "memory.usage_in_bytes")
            inactive = _stat_value(directory / "memory.stat",
                                   ("total_inactive_file", "inactive_file"))
        if limit is None or limit >= _UNLIMITED:
            continue
        used = max(0, (usage or 0) - inactive)
        room = max(0, limit - used)
        best = room if best is None else min(best, room)
    return best


def memory_budget() -> MemoryBudget:
    """The tightest of :func:`machine_available`, :func:`address_space_headroom` (``ulimit -v``)
    and :func:`cgroup_headroom` (2³⁴ bytes if none can be read)."""
    candidates = [(machine_available(), "available memory"),
                  (address_space_headroom(), "ulimit -v headroom"),
                  (cgroup_headroom(), "cgroup memory limit headroom")]
    known = [(b, s) for b, s in candidates if b is not None]
    if not known:  # pragma: no cover - exotic platforms
        return MemoryBudget(2**34, "assumed")
    b, s = min(known, key=lambda bs: bs[0])
    return MemoryBudget(int(b), s)


def available_bytes() -> int:
    """Bytes a build may use: :func:`memory_budget`'s ``bytes``."""
    return memory_budget().bytes
