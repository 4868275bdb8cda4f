"""The exact field's torch contractions on a device against the scipy path.

Every test runs on the CPU with the same code that runs on CUDA (the device is a parameter);
the CUDA cases are skipped, with the reason, when this machine has no CUDA.

- loss, ∇L, HVP and ∇²L by torch CSR on the device = the scipy/numpy closed forms to 1e-12
  relative, at random dense θ, for gaussian, sparse, ones, a mixture and radius 0.9;
- both against autograd of the differentiable torch loss (an independent computation);
- results come back on θ's device; no numpy conversion during an evaluation;
- the CPU default is the scipy path, and torch's CSR products agree with scipy's to the
  rounding of a sum taken in another order (the library picks the order, not the code);
- ``device="cuda"`` without CUDA is a one-line MesadynError; a build that would not fit the
  device's free memory (``torch.cuda.mem_get_info``) is refused before anything is built, with
  the estimate in the message.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import mesadyn.field.exact as exact_mod
from mesadyn.errors import MesadynError
from mesadyn.field import ExactField, FieldSpec, make_field
from mesadyn.field.exact import Contractions, check_device, device_bytes
from mesadyn.outcome import Outcome
from mesadyn.process import gaussian, mixture, ones, sparse

CASES = {  # name: (family, T, radius)
    "gaussian": (lambda: gaussian(3, 0.8), 12, 1.0),
    "sparse": (lambda: sparse(3, 1.3), 9, 1.0),
    "ones": (lambda: ones(3), 8, 1.0),
    "mixture": (lambda: mixture([(0.3, ones(2)), (0.7, gaussian(2, 0.9))]), 10, 1.0),
    "gaussian-r0.9": (lambda: gaussian(3, 1.1), 10, 0.9),
}


def _rel(got: torch.Tensor, want: torch.Tensor) -> float:
    """max |got − want| / max |want| (both moved to the CPU)."""
    got, want = got.detach().cpu(), want.detach().cpu()
    return float((got - want).abs().max() / want.abs().max())


@pytest.fixture(scope="module")
def fields(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ExactField]:
    cache = tmp_path_factory.mktemp("exact-cache")
    return {name: ExactField(fam(), T, radius=r, cache_dir=cache)
            for name, (fam, T, r) in CASES.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_torch_contractions_match_scipy(name: str, device: str,
                                         fields: dict[str, ExactField], tmp_path: Path) -> None:
    fam, T, r = CASES[name]
    ref = fields[name]
    dev = ExactField(fam(), T, radius=r, device=device, contractions="torch",
                     cache_dir=tmp_path)
    assert dev._contractions is Contractions.TORCH and ref._contractions is Contractions.SCIPY
    gen = torch.Generator().manual_seed(7)
    for _ in range(3):  # random dense θ (every entry nonzero, inactive ones included)
        theta = 0.6 * torch.randn(ref.n_params, dtype=torch.float64, generator=gen)
        v = torch.randn(ref.n_params, dtype=torch.float64, generator=gen)
        L0, g0 = ref.loss_and_grad(theta)
        th_d, v_d = theta.to(device), v.to(device)
        L1, g1 = dev.loss_and_grad(th_d)
        assert L1.device == th_d.device and g1.device == th_d.device
        assert abs(float(L1) - float(L0)) <= 1e-12 * abs(float(L0))
        assert _rel(g1, g0) <= 1e-12
        assert _rel(dev.grad(th_d), g0) <= 1e-12
        assert _rel(dev.rhs(0.0, th_d), -g0) <= 1e-12
        assert _rel(dev.hvp(th_d, v_d), ref.hvp(theta, v)) <= 1e-12
        H0 = ref.hessian(theta)
        H1 = dev.hessian(th_d)
        assert H1.device == th_d.device
        assert _rel(H1, H0) <= 1e-12
        # exact: the code makes ∇²L symmetric entry by entry (HAA as (HAA + HAAᵀ)/2, HPP from
        # the symmetrised R, HPA and HPAᵀ as copies), whatever the order of its sums
        assert torch.equal(H1, H1.T)


def test_torch_contractions_match_autograd(device: str, fields: dict[str, ExactField],
                                           tmp_path: Path) -> None:
    """Independent of the closed forms: autograd of the differentiable loss (COO index_add)."""
    fam, T, r = CASES["ones"]
    dev = ExactField(fam(), T, radius=r, device=device, cache_dir=tmp_path)
    assert dev._contractions is (Contractions.SCIPY if device == "cpu" else Contractions.TORCH)
    dev = ExactField(fam(), T, radius=r, device=device, contractions="torch",
                     cache_dir=tmp_path)
    theta = 0.5 * torch.randn(dev.n_params, dtype=torch.float64,
                              generator=torch.Generator().manual_seed(3)).to(device)
    v = torch.ones_like(theta)
    L, g = dev.loss_and_grad(theta)
    L_ad, g_ad = super(ExactField, dev).loss_and_grad(theta)
    assert abs(float(L) - float(L_ad)) <= 1e-12 * abs(float(L_ad))
    assert _rel(g, g_ad) <= 1e-12
    assert _rel(dev.hvp(theta, v), super(ExactField, dev).hvp(theta, v)) <= 1e-11
    assert _rel(dev.hessian(theta), super(ExactField, dev).hessian(theta)) <= 1e-11


def test_torch_path_makes_no_host_copy(fields: dict[str, ExactField], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """An evaluation on the device converts nothing to numpy (no host round trip)."""
    fam, T, r = CASES["gaussian"]
    dev = ExactField(fam(), T, radius=r, contractions="torch", cache_dir=tmp_path)
    theta = torch.randn(dev.n_params, dtype=torch.float64)

    def no_numpy(self: torch.Tensor, *args: object, **kwargs: object) -> None:
        raise AssertionError("a tensor was converted to numpy during an evaluation")

    monkeypatch.setattr(torch.Tensor, "numpy", no_numpy)
    dev.loss_and_grad(theta)
    dev.hvp(theta, theta)
    dev.hessian(theta)
    with pytest.raises(AssertionError, match="numpy"):  # the scipy path does convert
        fields["gaussian"].loss_and_grad(theta)


def test_cpu_default_is_scipy_and_torch_csr_agrees(fields: dict[str, ExactField]) -> None:
    """The default CPU field is the scipy path; torch's CSR products (the device path) give
    scipy's to within the rounding of a reordered sum.

    The code fixes each row's terms, not the order in which they are added: scipy's
    ``csr_matvec`` adds a row left to right, torch's CPU kernel as its build decides (MKL's
    sums differ in 124 of 1296 entries on an AVX-512 Xeon, by up to 7e-15 relative).  Any
    order of adding the n products of a row is within ``γ_n Σ|terms|`` (``γ_n = nu/(1 − nu)``,
    u the unit roundoff) of the exact sum, so two orders differ by at most ``2γ_n (|G||a|)_i``
    in entry i, n the longest row: about 1e-15 of the vector's scale here.
    """
    assert exact_mod.DEFAULT_CPU_CONTRACTIONS is Contractions.SCIPY
    f = fields["gaussian"]
    assert f._contractions is Contractions.SCIPY
    u = float(np.finfo(np.float64).eps) / 2
    gen = torch.Generator().manual_seed(11)
    for G in (f._G1, f._G2):
        a = torch.randn(G.shape[1], dtype=torch.float64, generator=gen)
        got = (exact_mod._csr_to(G, torch.device("cpu")) @ a).numpy()
        want = G @ a.numpy()
        n = int(np.diff(G.indptr).max())
        bound = 2 * n * u / (1 - n * u) * (abs(G) @ np.abs(a.numpy()))
        assert np.all(np.abs(got - want) <= bound)
        assert float(bound.max()) <= 1e-14 * float(np.abs(want).max())  # the bound is tight
        wrong = G @ (a.numpy() * (1 + 1e-12))  # a change far above rounding is seen
        assert not np.all(np.abs(got - wrong) <= bound)


def test_bad_contractions() -> None:
    with pytest.raises(MesadynError, match="unknown contractions 'blas'"):
        ExactField(gaussian(2), 5, contractions="blas")


def test_cuda_without_cuda_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for make in (lambda: make_field(FieldSpec("exact", gaussian(3), 10, device="cuda"),
                                    reuse=False),
                 lambda: ExactField(gaussian(3), 10, device="cuda:0")):
        with pytest.raises(MesadynError) as err:
            make()
        msg = str(err.value)  # one line that says why and names the way out
        assert "CUDA is not available" in msg and "\n" not in msg and "cpu" in msg


def test_bad_device_names() -> None:
    with pytest.raises(MesadynError, match="'gpu'"):
        check_device("gpu")
    assert check_device(None) == torch.device("cpu")
    with pytest.raises(MesadynError, match="'meta'"):
        check_device("meta")


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="MPS is available here")
def test_unavailable_backend_is_one_line() -> None:
    with pytest.raises(MesadynError) as err:
        ExactField(gaussian(2), 5, device="mps")
    msg = str(err.value)
    assert "\n" not in msg and "'mps'" in msg


def test_scipy_refused_off_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(MesadynError, match="CPU only"):
        ExactField(gaussian(2), 5, device="cuda", contractions="scipy")
    with pytest.raises(MesadynError, match="1 CUDA device"):
        ExactField(gaussian(2), 5, device="cuda:3")


def test_device_memory_refused_before_building(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    """The CUDA memory check runs on the CPU with torch.cuda faked: it compares the estimate
    with mem_get_info's free bytes and refuses before anything is counted or loaded."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    free = 10 * 2**20
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 80 * 2**30))

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("built although the field does not fit the device")

    monkeypatch.setattr(exact_mod, "build", no_build)
    with pytest.raises(MesadynError) as err:
        make_field(FieldSpec("exact", gaussian(8), 20, device="cuda"), reuse=False,
                   cache_dir=tmp_path)
    msg = str(err.value)
    assert "\n" not in msg and "(estimate)" in msg and "mem_get_info" in msg
    need = device_bytes(8, exact_mod.plan(gaussian(8), 20).nnz, Contractions.TORCH)
    assert need > free
    assert exact_mod._fmt_bytes(need) in msg and "10.0 MiB" in msg


def test_device_estimate_covers_the_tensors(fields: dict[str, ExactField], tmp_path: Path) -> None:
    """The estimate (from the plan's nnz, before the build) bounds what the field holds."""
    fam, T, r = CASES["ones"]
    f = ExactField(fam(), T, radius=r, contractions="torch", cache_dir=tmp_path)
    held = (f._C.numel() * 8 + f._iqa.numel() * 8 + f._ia2.numel() * 8 + f._val.numel() * 8
            + sum(m.values().numel() * 8 + m.col_indices().numel() * 4
                  + m.crow_indices().numel() * 4 for m in (f._G1t, f._G2t)))
    n4 = f._n**4
    assert held <= f.device_estimate - 8 * (4 * n4 + f.n_params**2) + 1
    assert f.device_estimate <= 2 * (held + 8 * (4 * n4 + f.n_params**2))


@pytest.mark.parametrize("solver", ["torchdiffeq:dopri5", "scipy:LSODA"])
def test_flow_runs_on_the_torch_contractions(device: str, solver: str, tmp_path: Path) -> None:
    """The flow (torchdiffeq backend, and LSODA with the exact Jacobian) gives the same path
    with the torch contractions on the device as with the scipy ones."""
    from mesadyn.flow import integrate
    from mesadyn.model import diagonal_init, gaussian_init

    fam = gaussian(2, 0.9)
    ref = ExactField(fam, 6, cache_dir=tmp_path)
    dev = ExactField(fam, 6, device=device, contractions="torch", cache_dir=tmp_path)
    theta0 = diagonal_init(2, 0.4, 0.6) + gaussian_init(2, 0.05, seed=2)
    runs = [integrate(f, theta0, t_end=0.5, solver=solver, n_save=5, steady_tol=None)
            for f in (ref, dev)]
    assert [r.status for r in runs] == [Outcome.T_END, Outcome.T_END]
    scale = float(abs(runs[0].final).max())
    assert float(abs(runs[1].final - runs[0].final).max()) <= 1e-10 * scale
