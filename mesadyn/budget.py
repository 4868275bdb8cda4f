"""The one size guard: what a run will hold, estimated and checked before anything large is
allocated.

Every consumer that can be asked for an arbitrary size — the sampled fields, ``train``,
``ensemble``, ``gdflow``, ``gd`` and the sweep — prices its run with one of the estimates below
and hands it to :func:`check` *before* it allocates: a run that does not fit is refused on one
line naming the size and the estimate (:class:`~mesadyn.errors.MesadynError`, exit 2), never a
``MemoryError``, a killed process or an hour of work that cannot finish.  The exact field
prices itself (its plan's bytes, :mod:`mesadyn.field.exact`) against the same
:func:`memory_budget`.

**Memory.**  :func:`memory_budget` is the tightest of the machine (``MemAvailable``), the
address space (the soft ``RLIMIT_AS``, ``ulimit -v``, minus this process's ``VmSize``) and the
cgroup (``memory.max`` v2 or ``memory.limit_in_bytes`` v1, minus the usage less reclaimable
file pages), and says which one it was.  On a CUDA device the device's free memory
(``torch.cuda.mem_get_info``) bounds what lives there (:attr:`Estimate.device_bytes`).

**Time.**  An estimate may carry its ``seconds``; a consumer that has a go-ahead flag passes its
``time_limit`` and the run is refused above it unless ``force`` (``--yes``): the sampled full
flows of ``integrate`` and ``portrait`` (:mod:`mesadyn.workflows._cost`), the sweep's probe.

The estimates (bytes; float64 = 8, complex128 = 16; ``P = 18d²`` entries of θ; ``S`` steps):

- θ (:func:`theta`, checked where a start is built, :func:`mesadyn.model.diagonal_init`):
  ``8 P·8`` (θ, its gradient and their working copies);
- a sampled field of ``n`` draws (:func:`sampled_field_bytes`): the draws ``24 n d``, two
  chunks of the direct path ``2 c·s`` and, when cached, every sequence's prefix Grams ``n·s``;
  ``s = 16(T d² + 3 T d)`` per sequence (:func:`sequence_bytes`), ``c`` sequences a chunk
  (:func:`chunk_size`: at most :data:`CHUNK_BYTES`, one at least);
- ``train`` (:func:`train`, R runs): the training and test fields, the trace
  ``R (S+1)((P + 3d + 8)·8 +`` :data:`STEP_OVERHEAD` ``)`` and the working set ``8 R P·8``;
- ``ensemble`` (:func:`ensemble`, N starts in chunks of C): the starts and the rows kept
  ``N (3P + 24)·8`` (and ``N·n_save·P·8`` saved), one batched solve ``C (12 P + 3 P²)·8``
  (rodas4's and the saddle verdict's Hessians);
- ``gdflow`` (:func:`gdflow`): per comparison (exact, finite) three trajectories and the flows'
  saved points ``5 (S+1) P·8``, the finite field of ``m`` sequences, a spread run
  ``(S+1) P·8`` and its field;
- ``gd`` (:func:`gd`): the trace ``(S+1)(P + 16)·8`` and the field's own bytes;
- the sweep (:func:`sweep`): :data:`POINT_BYTES` per expanded point and its record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import MesadynError

__all__ = ["CACHE_BYTES", "CHUNK_BYTES", "POINT_BYTES", "STEP_OVERHEAD", "Estimate",
           "MemoryBudget", "address_space_headroom", "available_bytes", "cgroup_headroom",
           "check", "chunk_size", "current_budget", "device_free", "ensemble", "fmt_bytes", "gd",
           "gdflow", "machine_available", "memory_budget", "sampled_field",
           "sampled_field_bytes", "sequence_bytes", "sweep", "theta", "train"]

#: Limits at or above this are "no limit" (cgroup v1 writes 2⁶³ − page size for none).
_UNLIMITED = 2**60
#: A sampled field's direct path keeps its per-sequence prefix Grams up to this many bytes.
CACHE_BYTES = 2**31
#: The direct path's chunk: at most this many bytes of :func:`sequence_bytes` (one sequence
#: at least, whatever its size).
CHUNK_BYTES = 2**27
#: Bytes a recorded GD step costs beyond its arrays' data (four numpy arrays and six Python
#: floats in lists: measured 0.6 kB with ``tracemalloc``).
STEP_OVERHEAD = 700
#: Bytes of one expanded sweep point and its record (measured 0.7 kB for a 6-option point).
POINT_BYTES = 1024


# ---- the budget ----------------------------------------------------------------------------
@dataclass(frozen=True)
class MemoryBudget:
    """Bytes a build may use and the limit they come from (e.g. ``"ulimit -v headroom"``)."""

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


def current_budget() -> MemoryBudget:
    """:func:`memory_budget`, looked up in this module when called: a test that patches
    ``mesadyn.budget.memory_budget`` patches every caller that reads the budget through it."""
    return memory_budget()


def available_bytes() -> int:
    """Bytes a build may use: :func:`memory_budget`'s ``bytes``."""
    return memory_budget().bytes


def device_free(device: str) -> MemoryBudget | None:
    """The free memory of a CUDA ``device`` (``torch.cuda.mem_get_info``); ``None`` for the CPU,
    whose limit is :func:`memory_budget`."""
    if not str(device).startswith("cuda"):
        return None
    import torch

    free, _total = torch.cuda.mem_get_info(torch.device(device))
    return MemoryBudget(int(free), f"free on {device} (torch.cuda.mem_get_info)")


def fmt_bytes(n: float) -> str:
    """``n`` bytes in B, KiB, MiB, GiB or TiB, one decimal (``3.2e+05 TiB`` beyond)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if n < 1e6 else f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} TiB"  # pragma: no cover


# ---- the guard -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Estimate:
    """What a run holds at its peak: ``host_bytes`` in this process and ``device_bytes`` on
    ``device`` (``"cpu"``: counted with the host's), with ``seconds`` where it is priced.
    ``what`` names the run and its sizes (``"train at d=5, T=100, m=10000, steps=200"``);
    ``advice`` says what to make smaller."""

    what: str
    host_bytes: int
    device_bytes: int = 0
    device: str = "cpu"
    seconds: float | None = None
    advice: str = ""

    @property
    def total_host(self) -> int:
        """Bytes this process holds: the host's, and the device's when it is the CPU."""
        on_cpu = not str(self.device).startswith("cuda")
        return int(self.host_bytes) + (int(self.device_bytes) if on_cpu else 0)

    def __add__(self, other: Estimate) -> Estimate:
        seconds = (None if self.seconds is None and other.seconds is None
                   else (self.seconds or 0.0) + (other.seconds or 0.0))
        return Estimate(self.what, self.host_bytes + other.host_bytes,
                        self.device_bytes + other.device_bytes, self.device, seconds,
                        self.advice)


def check(estimate: Estimate, *, force: bool = False,
          time_limit: float | None = None) -> Estimate:
    """Refuse ``estimate`` if it does not fit: its host bytes over :func:`memory_budget`, its
    device bytes over the CUDA device's free memory (:func:`device_free`), or — given a
    ``time_limit`` and without ``force`` — its seconds over that limit.  Returns it otherwise.

    ## Raises
    `MesadynError`: one line naming the run's sizes, the estimate and the limit it exceeds.
    """
    tail = f"; {estimate.advice}" if estimate.advice else ""
    need = estimate.total_host
    budget = memory_budget()
    if need > budget.bytes:
        raise MesadynError(f"{estimate.what} needs about {fmt_bytes(need)} (estimate), more "
                           f"than the {fmt_bytes(budget.bytes)} available ({budget.source})"
                           f"{tail}")
    if estimate.device_bytes and (free := device_free(estimate.device)) is not None \
            and estimate.device_bytes > free.bytes:
        raise MesadynError(f"{estimate.what} needs about {fmt_bytes(estimate.device_bytes)} on "
                           f"{estimate.device} (estimate), more than the {fmt_bytes(free.bytes)} "
                           f"{free.source}{tail}")
    if (time_limit is not None and not force and estimate.seconds is not None
            and estimate.seconds > time_limit):
        raise MesadynError(f"{estimate.what} is expected to take about "
                           f"{estimate.seconds / 60:.1f} min or more here (estimate), more than "
                           f"the {time_limit:g} s a run takes without its go-ahead; pass --yes "
                           f"(force=True) to run it{tail}")
    return estimate


# ---- the estimates -------------------------------------------------------------------------
def _p(d: int) -> int:
    return 18 * d * d


def theta(d: int) -> Estimate:
    """θ of ``P = 18d²`` entries with its gradient and their working copies: ``8 P·8`` bytes."""
    return Estimate(f"θ at d={d} ({_p(d)} entries)", 8 * _p(d) * 8, advice="use a smaller d")


def sequence_bytes(d: int, T: int) -> int:
    """Bytes of one sequence's θ-independent data in a sampled field's direct path, an upper
    bound: ``16·T d²`` for its largest layout's prefix Grams and ``48·T d`` for the rest (its
    phases and targets take ``32·T d``)."""
    return 16 * (T * d * d + 3 * T * d)


def chunk_size(d: int, T: int, m: int) -> int:
    """Sequences per chunk of the direct path: at most :data:`CHUNK_BYTES` of
    :func:`sequence_bytes`, and one at least."""
    return max(1, min(m, CHUNK_BYTES // sequence_bytes(d, T)))


def sampled_field_bytes(d: int, T: int, n: int, *, chunk: int | None = None,
                        cached: bool | None = None) -> int:
    """A sampled field of ``n`` draws at ``(d, T)``: the draws (``24 n d``: x_1 float64, λ
    complex128), two chunks of the direct path (the batch and its backward pass) and, when
    ``cached`` (default: while they fit in :data:`CACHE_BYTES`), every sequence's prefix Grams."""
    per_seq = sequence_bytes(d, T)
    c = chunk_size(d, T, n) if chunk is None else chunk
    keep = per_seq * n <= CACHE_BYTES if cached is None else cached
    return 24 * n * d + 2 * per_seq * c + (per_seq * n if keep else 0)


def sampled_field(d: int, T: int, n: int, *, what: str = "draws", device: str = "cpu",
                  chunk: int | None = None, cached: bool | None = None) -> Estimate:
    """The estimate of a sampled field of ``n`` draws (:func:`sampled_field_bytes`), held on
    ``device``."""
    return Estimate(f"{n} {what} at d={d} T={T}", 0,
                    sampled_field_bytes(d, T, n, chunk=chunk, cached=cached), device,
                    advice=f"use fewer {what} or a smaller T")


def train(d: int, T: int, m: int, m_test: int, steps: int, *, runs: int = 1,
          device: str = "cpu") -> Estimate:
    """``train``: ``runs`` GD runs of ``steps`` steps on ``m`` training and ``m_test`` test
    sequences, recording every step (module table)."""
    P = _p(d)
    trace = runs * (steps + 1) * ((P + 3 * d + 8) * 8 + STEP_OVERHEAD)
    work = runs * 8 * P * 8
    fields = (sampled_field_bytes(d, T, m, cached=False)
              + sampled_field_bytes(d, T, m_test, cached=False))
    return Estimate(f"train at d={d}, T={T}, m={m}, m_test={m_test}, steps={steps}", trace,
                    work + fields, device, advice="use a smaller d, T, m or steps")


def ensemble(d: int, n: int, *, chunk: int, n_save: int = 0, hessians: bool = True,
             device: str = "cpu") -> Estimate:
    """``ensemble``: ``n`` starts solved in chunks of ``chunk`` rows (module table);
    ``hessians``: the batched Hessians of rodas4 and of the saddle verdict."""
    P = _p(d)
    c = min(chunk, n)
    rows = n * (3 * P + 24) * 8 + n * n_save * P * 8
    solve = c * (12 * P + (3 * P * P if hessians else 0)) * 8
    return Estimate(f"an ensemble of n={n} starts at d={d}" + (
        f" with n_save={n_save}" if n_save else ""), rows + solve, 0, device,
        advice="use fewer starts" + (" or a smaller n_save" if n_save else ""))


def gdflow(d: int, T: int, steps: int, *, m: int, spread_m: tuple[int, ...] = (),
           device: str = "cpu") -> Estimate:
    """``gdflow``: GD, the flow and the modified flow of ``steps`` steps on the exact field and
    (``m > 0``) a finite one, and the spread runs over ``spread_m`` (module table)."""
    P = _p(d)
    per = 5 * (steps + 1) * P * 8
    comparisons = 2 if m > 0 else 1
    fields = sampled_field_bytes(d, T, m) if m > 0 else 0
    spread = ((steps + 1) * P * 8 + sampled_field_bytes(d, T, max(spread_m))
              if spread_m else 0)
    return Estimate(f"gdflow at d={d}, T={T}, steps={steps}, m={m}", comparisons * per + spread,
                    fields, device, advice="use fewer steps or a smaller m")


def gd(d: int, steps: int, *, field_bytes: int = 0, device: str = "cpu",
       reduced: bool = False) -> Estimate:
    """``gd``: a GD trace of ``steps`` steps (θ and 16 scalars a step; θ is ``(a, b)`` for the
    reduced map) and the field's own bytes."""
    P = 2 if reduced else _p(d)
    return Estimate(f"gd at d={d}, steps={steps}", (steps + 1) * (P + 16) * 8, field_bytes,
                    device, advice="use fewer steps")


def sweep(points: int) -> Estimate:
    """A sweep of ``points`` points: each expanded point and its record (:data:`POINT_BYTES`)."""
    return Estimate(f"a sweep of {points} points", points * POINT_BYTES,
                    advice="use fewer axis values")
