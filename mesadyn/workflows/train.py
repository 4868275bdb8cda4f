"""The paper's simulation protocol (Section 6, Appendix B): full-batch GD (``mesadyn train``).

GD on ``m`` training sequences with a held-out test set of ``m_test``, Table 1's step size by
default; records per step ab, train and test loss and Proposition 4.1's ratio, and reports
the final values against Theorem 4.1's ab* at this T (Theorem 4.3's for ones).

Example:
    >>> from mesadyn.workflows import train
    >>> res = train.run(train.Config(x1="gaussian", d=3, T=10, m=200, steps=5))
    >>> res.status, res.run.ab_mean.shape
    ('ok', (6,))
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import MesadynError, check_int, check_positive
from ..progress import ProgressCallback
from ._common import Init, check_init, choice, optional_path, set_fields
from ._device import Device, DeviceOptions

if TYPE_CHECKING:
    from ..train import TrainResult

__all__ = ["Config", "Device", "Result", "Status", "run"]


class Status(enum.StrEnum):
    """How a GD run ended."""

    OK = "ok"
    DIVERGED = "diverged"


@dataclass(frozen=True)
class Config(DeviceOptions):
    """Options of one GD run; see :func:`mesadyn.train.train` for their meaning.

    The process may go beyond the paper's (``radius``, ``rotation``, ``noise``): GD then runs
    on the finite-sample loss of those sequences; ``ab_theory`` is NaN where there is no
    reduced system (a rotation or noise) and the ratio is NaN off the paper's process.

    ``lr=None`` takes Table 1's step size (an error if the table has none for this process);
    ``m_test=None`` takes ``m``; ``mask="diagonal"`` trains only the diagonals of ``W^KQ_32``
    and ``W^PV_12`` (Theorem 4.3's clipping); ``out`` is a ``.nc`` run file.
    """

    m: int = 10_000
    m_test: int | None = None
    steps: int = 200
    lr: float | None = None
    init: str = "diagonal"
    a0: float = 0.1
    b0: float = 0.1
    sigma_w: float = 0.01
    mask: str = "none"
    eval_every: int = 1
    out: str | None = None
    device: str = field(default=Device.AUTO.value, kw_only=True)

    def __post_init__(self) -> None:
        from ..io import NETCDF_SUFFIXES
        from ..model import Mask

        super().__post_init__()
        init, a0, b0, sigma_w = check_init(self.init, self.a0, self.b0, self.sigma_w)
        set_fields(
            self, init=init, a0=a0, b0=b0, sigma_w=sigma_w,
            m=check_int("m", self.m, 1),
            m_test=None if self.m_test is None else check_int("m_test", self.m_test, 1),
            steps=check_int("steps", self.steps, 0),
            lr=None if self.lr is None else check_positive("lr", self.lr),
            mask=choice("mask", self.mask, Mask),
            eval_every=check_int("eval_every", self.eval_every, 1),
            out=optional_path("out", self.out),
        )
        if self.out is not None and not self.out.lower().endswith(NETCDF_SUFFIXES):
            raise MesadynError(f"run files are netCDF: give a path ending in .nc, got {self.out!r}")
        if self.lr is None:
            from ..train import table1_lr

            table1_lr(self.family())  # names the missing Table 1 entry before any work


@dataclass(frozen=True)
class Result:
    """The end of a GD run against the theory; ``run`` holds every recorded step."""

    family: str
    d: int
    T: int
    m: int
    seed: int
    lr: float
    steps: int
    ab: float
    ab_coords: tuple[float, ...]
    ab_theory: float
    ab_limit: float
    ab_rel_err: float
    train_loss: float
    test_loss: float
    ratio: float
    ratio_se: float
    ratio_theory: float
    diverged: bool
    diverged_step: int | None
    wall_s: float
    init: str
    out: str | None
    message: str = ""
    #: Proposition 4.1's ratio bookkeeping (used / excluded positions, imaginary part and SE);
    #: empty when the ratio was never evaluated.
    ratio_info: dict[str, float | int] = field(default_factory=dict)
    #: The process beyond the paper's: ``radius`` when not 1, ``rotation`` and ``noise`` when
    #: W is not the noiseless diagonal (empty for the paper's process).
    process: dict[str, float | str] = field(default_factory=dict)
    run: TrainResult | None = field(default=None, repr=False, compare=False)

    @property
    def status(self) -> Status:
        """``ok``, or ``diverged`` (then ``message`` says where and why)."""
        return Status.DIVERGED if self.diverged else Status.OK

    def to_dict(self) -> dict[str, Any]:
        """The ``mesadyn train --json`` object."""
        return {
            "family": self.family, "d": self.d, "T": self.T, "m": self.m, "seed": self.seed,
            "lr": self.lr, "steps": self.steps, "ab": self.ab, "ab_coords": list(self.ab_coords),
            "ab_theory": self.ab_theory, "ab_limit": self.ab_limit,
            "ab_rel_err": self.ab_rel_err, "train_loss": self.train_loss,
            "test_loss": self.test_loss, "ratio": self.ratio, "ratio_se": self.ratio_se,
            "ratio_theory": self.ratio_theory,
            **{f"ratio_{k}": v for k, v in self.ratio_info.items()},
            "diverged": self.diverged, "diverged_step": self.diverged_step,
            "wall_s": self.wall_s, "init": self.init, "out": self.out, **self.process,
        }


def run(config: Config, progress: ProgressCallback | None = None) -> Result:
    """Full-batch GD (Section 6) with :func:`mesadyn.train.train`; saves ``config.out``.

    Every input, the device and the output path are checked before the first step, so a
    bad value never costs a run.  A diverging run is returned (``status == "diverged"``), after
    its partial record is saved to ``out`` when given.

    ## Arguments
    - `config`: the validated options.
    - `progress`: called with the step number after each GD step.

    ## Returns
    A :class:`Result` (``result.run`` is the full :class:`~mesadyn.train.TrainResult`).

    ## Raises
    - `MesadynError`: an unwritable ``out``, CUDA requested but absent.
    """
    from ..io import NETCDF_SUFFIXES, check_writable, save_run
    from ..train import TrainingDiverged, table1_lr, train
    from ._common import initial_theta

    if config.out is not None:
        check_writable(config.out, suffixes=NETCDF_SUFFIXES)
    dev = config.torch_device
    fam = config.family()
    init = Init(config.init)
    theta0 = initial_theta(init, fam.d, config.a0, config.b0, config.sigma_w, config.seed)
    lr = table1_lr(fam) if config.lr is None else config.lr

    def callback(k: int, _rec: dict[str, float]) -> None:
        if progress is not None:
            progress(float(k))

    try:
        rec = train(fam, config.T, m=config.m, m_test=config.m_test, steps=config.steps, lr=lr,
                    theta0=theta0, seed=config.seed, mask=str(config.mask),
                    eval_every=config.eval_every, device=dev, callback=callback,
                    radius=config.radius, rotation=str(config.rotation), noise=config.noise)
    except TrainingDiverged as exc:
        rec = exc.result
    if config.out is not None:
        cfg = {**rec.config, "init": init.value, "a0": config.a0, "b0": config.b0,
               "sigma_w": config.sigma_w}
        if init is Init.GAUSSIAN:
            cfg.update(a0=None, b0=None)
        else:
            cfg.update(sigma_w=None)
        save_run(rec.to_dataset(), config.out, kind="train", config=cfg, seed=config.seed)
    s = rec.summary()
    info = {k[len("ratio_"):]: v for k, v in s.items()
            if k.startswith("ratio_") and k not in ("ratio_se", "ratio_theory")}
    return Result(
        family=s["family"], d=s["d"], T=s["T"], m=s["m"], seed=s["seed"], lr=s["lr"],
        steps=s["steps"], ab=s["ab"], ab_coords=tuple(s["ab_coords"]), ab_theory=s["ab_theory"],
        ab_limit=s["ab_limit"], ab_rel_err=s["ab_rel_err"], train_loss=s["train_loss"],
        test_loss=s["test_loss"], ratio=s["ratio"], ratio_se=s["ratio_se"],
        ratio_theory=s["ratio_theory"], diverged=s["diverged"],
        diverged_step=s["diverged_step"], wall_s=s["wall_s"], init=init.value, out=config.out,
        message=rec.message, ratio_info=info,
        process={k: rec.config[k] for k in ("radius", "rotation", "noise") if k in rec.config},
        run=rec,
    )
