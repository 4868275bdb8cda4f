"""The AR process of Section 3.1: initial-token families, their moments, and sequences.

``x_1 ~ D`` (real), ``W = diag(λ_1..λ_d)`` with ``λ_k = exp(iθ_k)``, ``θ_k ~ U[0, 2π)``
independent and fresh for every sequence, ``x_{t+1} = W x_t``.  Sequences are complex128.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from .errors import MesadynError, check_int, check_positive

FAMILIES = ("gaussian", "sparse", "ones", "rademacher", "uniform")

Sampler = Callable[[int, torch.Generator, torch.device], torch.Tensor]


def default_device() -> torch.device:
    """CUDA when available, CPU otherwise."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def make_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A seeded torch generator on ``device``: the same seed gives the same samples."""
    gen = torch.Generator(device=torch.device(device))
    gen.manual_seed(int(seed))
    return gen


@dataclass(frozen=True)
class Family:
    """An initial-token distribution ``D`` on ``R^d`` (Section 3.1, Assumption 4.1).

    ``kind`` is ``"iid"`` (zero-mean coordinates fixed by ``m2, m4, m6``), ``"sparse"``
    (Example 4.1: ``±c e_i``, ``i`` uniform) or ``"fixed"`` (``x_1 = v`` always).
    """

    name: str
    d: int
    kind: str
    m2: float = 0.0
    m4: float = 0.0
    m6: float = 0.0
    scale: float = 1.0
    vector: tuple[float, ...] | None = None
    params: dict[str, float] = field(default_factory=dict, compare=False)
    sampler: Sampler | None = field(default=None, compare=False, repr=False)

    # ---- moments -----------------------------------------------------------------
    @property
    def assumption_41(self) -> bool:
        """Whether Assumption 4.1 holds (zero odd mixed moments up to order 4)."""
        return self.kind in ("iid", "sparse")

    @property
    def kappa1(self) -> float:
        """κ1 = E[x_j⁴] (Assumption 4.1); for ``x_1 = c·1_d`` the analogue c⁴ (Lemma A.5)."""
        if self.kind == "iid":
            return self.m4
        if self.kind == "sparse":
            return self.scale**4 / self.d
        return self._uniform_vector_value() ** 4

    @property
    def kappa2(self) -> float:
        """κ2 = E[x_j⁶]."""
        if self.kind == "iid":
            return self.m6
        if self.kind == "sparse":
            return self.scale**6 / self.d
        return self._uniform_vector_value() ** 6

    @property
    def kappa3(self) -> float:
        """κ3 = Σ_{r≠j} E[x_j² x_r⁴]."""
        if self.kind == "iid":
            return (self.d - 1) * self.m2 * self.m4
        if self.kind == "sparse":
            return 0.0
        return (self.d - 1) * self._uniform_vector_value() ** 6

    @property
    def second_moment(self) -> float:
        """E[x_j²] (the same for every coordinate j)."""
        if self.kind == "iid":
            return self.m2
        if self.kind == "sparse":
            return self.scale**2 / self.d
        return self._uniform_vector_value() ** 2

    @property
    def mean_sq_norm(self) -> float:
        """E‖x_1‖²."""
        if self.kind == "fixed":
            assert self.vector is not None
            return float(sum(v * v for v in self.vector))
        return self.d * self.second_moment

    def _uniform_vector_value(self) -> float:
        self._require_moments()
        assert self.vector is not None
        v = self.vector
        if any(abs(abs(vi) - abs(v[0])) > 0 for vi in v):
            raise MesadynError(
                f"κ1, κ2, κ3 are defined only for x_1 = c·1_d; got x_1 = {list(v)}"
            )
        return abs(v[0])

    def _require_moments(self) -> None:
        if self.kind == "sampled":
            raise MesadynError(
                f"family {self.name!r} is known only through its sampler and has no exact "
                "moments; use the Monte-Carlo field (--field mc)"
            )

    def moment(self, counts: np.ndarray) -> np.ndarray:
        """Exact joint moment ``E[Π_k x_k^{n_k}]`` for each row of ``counts`` (shape (N, d))."""
        self._require_moments()
        counts = np.asarray(counts, dtype=np.int64)
        if counts.ndim != 2 or counts.shape[1] != self.d:
            raise MesadynError(f"counts must have shape (N, {self.d}), got {counts.shape}")
        if self.kind == "iid":
            table = np.array([1.0, 0.0, self.m2, 0.0, self.m4, 0.0, self.m6])
            if counts.max(initial=0) >= len(table):
                raise MesadynError(f"moments above order 6 are not known, got {counts.max()}")
            return np.prod(table[counts], axis=1)
        if self.kind == "sparse":
            total = counts.sum(axis=1)
            single = (counts == total[:, None]).any(axis=1)
            out = np.where(single & (total % 2 == 0), self.scale**total / self.d, 0.0)
            return np.where(total == 0, 1.0, out)
        assert self.vector is not None
        v = np.asarray(self.vector, dtype=np.float64)
        return np.prod(v[None, :] ** counts, axis=1)

    # ---- sampling ----------------------------------------------------------------
    def sample(
        self, n: int, generator: torch.Generator, device: torch.device | str | None = None
    ) -> torch.Tensor:
        """Draw ``n`` initial tokens, a float64 tensor of shape (n, d)."""
        device = torch.device(device) if device is not None else generator.device
        d = self.d
        if self.kind == "fixed":
            assert self.vector is not None
            v = torch.tensor(self.vector, dtype=torch.float64, device=device)
            return v.expand(n, d).clone()
        if self.kind == "sparse":
            idx = torch.randint(d, (n,), generator=generator, device=device)
            sign = torch.randint(2, (n,), generator=generator, device=device) * 2 - 1
            x = torch.zeros(n, d, dtype=torch.float64, device=device)
            x[torch.arange(n, device=device), idx] = self.scale * sign.to(torch.float64)
            return x
        if self.sampler is None:
            raise MesadynError(
                f"family {self.name!r} has moments but no sampler; give one to sample from it"
            )
        return self.sampler(n, generator, device).to(torch.float64)

    def describe(self) -> dict[str, object]:
        """A JSON-ready description (the key of caches and the provenance of runs)."""
        out: dict[str, object] = {"family": self.name, "kind": self.kind, "d": self.d}
        out.update(self.params)
        if self.kind == "iid":
            out.update(m2=self.m2, m4=self.m4, m6=self.m6)
        if self.kind == "fixed":
            out["vector"] = list(self.vector or ())
        return out


# ---- constructors --------------------------------------------------------------------
def gaussian(d: int, sigma: float = 1.0) -> Family:
    """``x_1 ~ N(0, σ² I_d)``: κ1 = 3σ⁴, κ2 = 15σ⁶, κ3 = 3(d−1)σ⁶."""
    d = check_int("d", d, 1)
    s = check_positive("sigma", sigma)

    def sampler(n: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
        return s * torch.randn(n, d, generator=gen, device=device, dtype=torch.float64)

    return Family(
        "gaussian", d, "iid", m2=s**2, m4=3 * s**4, m6=15 * s**6,
        params={"sigma": s}, sampler=sampler,
    )


def sparse(d: int, c: float = 1.0) -> Family:
    """Example 4.1: ``x_1 = ±c e_i`` with ``i`` uniform: κ1 = c⁴/d, κ2 = c⁶/d, κ3 = 0."""
    d = check_int("d", d, 1)
    c = check_positive("scale", c)
    return Family("sparse", d, "sparse", scale=c, params={"scale": c})


def rademacher(d: int) -> Family:
    """iid ±1 coordinates: κ1 = κ2 = 1, κ3 = d − 1."""
    d = check_int("d", d, 1)

    def sampler(n: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
        return torch.randint(2, (n, d), generator=gen, device=device).to(torch.float64) * 2 - 1

    return Family("rademacher", d, "iid", m2=1.0, m4=1.0, m6=1.0, sampler=sampler)


def uniform(d: int) -> Family:
    """iid U[−1, 1] coordinates: κ1 = 1/5, κ2 = 1/7, κ3 = (d − 1)/15."""
    d = check_int("d", d, 1)

    def sampler(n: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
        u = torch.rand(n, d, generator=gen, device=device, dtype=torch.float64)
        return 2 * u - 1

    return Family("uniform", d, "iid", m2=1 / 3, m4=1 / 5, m6=1 / 7, sampler=sampler)


def iid(d: int, m2: float, m4: float, m6: float, sampler: Sampler | None = None,
        name: str = "iid") -> Family:
    """Any iid zero-mean family, fixed by its moments ``m2, m4, m6`` (Assumption 4.1)."""
    d = check_int("d", d, 1)
    m2, m4, m6 = (check_positive(k, v) for k, v in (("m2", m2), ("m4", m4), ("m6", m6)))
    if m4 < m2**2 or m6 * m2 < m4**2:
        raise MesadynError(f"moments m2={m2}, m4={m4}, m6={m6} are not those of a distribution")
    return Family(name, d, "iid", m2=m2, m4=m4, m6=m6,
                  params={"m2": m2, "m4": m4, "m6": m6}, sampler=sampler)


def fixed(vector: list[float] | np.ndarray | tuple[float, ...], name: str = "fixed") -> Family:
    """A fixed initial token ``x_1 = v`` (Section 4.3 uses ``v = 1_d``)."""
    v = tuple(float(x) for x in np.asarray(vector, dtype=np.float64).ravel())
    if len(v) < 1 or not all(math.isfinite(x) for x in v):
        raise MesadynError(f"the fixed initial token must be a finite vector, got {list(v)}")
    return Family(name, len(v), "fixed", vector=v)


def sampled(d: int, sampler: Sampler, name: str = "sampled") -> Family:
    """A family known only through ``sampler(n, generator, device) -> (n, d)`` (kind
    ``"sampled"``): it has no exact moments, so only sampled fields apply to it."""
    d = check_int("d", d, 1)
    if not callable(sampler):
        raise MesadynError(f"sampler must be callable, got {sampler!r}")
    return Family(name, d, "sampled", sampler=sampler)


def ones(d: int) -> Family:
    """``x_1 = 1_d`` (Section 4.3); Assumption 4.1 fails."""
    d = check_int("d", d, 1)
    return fixed([1.0] * d, name="ones")


def family(name: str, d: int, sigma: float = 1.0, scale: float = 1.0) -> Family:
    """The family called ``name`` (one of :data:`FAMILIES`)."""
    if name == "gaussian":
        return gaussian(d, sigma)
    if name == "sparse":
        return sparse(d, scale)
    if name == "ones":
        return ones(d)
    if name == "rademacher":
        return rademacher(d)
    if name == "uniform":
        return uniform(d)
    raise MesadynError(f"unknown family {name!r}; choose one of {', '.join(FAMILIES)}")


# ---- sequences -----------------------------------------------------------------------
def sample_lambdas(n: int, d: int, generator: torch.Generator,
                   device: torch.device | str | None = None) -> torch.Tensor:
    """Diagonal of W: ``λ_k = exp(iθ_k)``, ``θ_k ~ U[0, 2π)``; complex128 of shape (n, d)."""
    device = torch.device(device) if device is not None else generator.device
    theta = 2 * math.pi * torch.rand(n, d, generator=generator, device=device,
                                     dtype=torch.float64)
    return torch.polar(torch.ones_like(theta), theta)


def sequences(x1: torch.Tensor, lam: torch.Tensor, T: int) -> torch.Tensor:
    """``x_t = λ^{t−1} ⊙ x_1`` for t = 1..T; complex128 of shape (n, T, d)."""
    T = check_int("T", T, 1)
    powers = torch.arange(T, device=lam.device, dtype=torch.float64)
    angle = torch.angle(lam)[:, None, :] * powers[None, :, None]
    lam_pow = torch.polar(torch.ones_like(angle), angle)
    return lam_pow * x1.to(torch.complex128)[:, None, :]


def sample(fam: Family, n: int, T: int, generator: torch.Generator,
           device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw ``n`` initial tokens and transition diagonals: ``(x1 (n, d) real, λ (n, d) complex)``.

    Draws ``x_1`` first, then ``λ``, from one generator, so a seed fixes both.
    """
    n = check_int("n", n, 1)
    check_int("T", T, 1)
    x1 = fam.sample(n, generator, device)
    lam = sample_lambdas(n, fam.d, generator, device)
    return x1, lam
