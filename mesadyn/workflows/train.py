"""The paper's simulation protocol (Section 6, Appendix B): full-batch GD (``mesadyn train``).

GD on ``m`` training sequences with a held-out test set of ``m_test``, Table 1's step size by
default; records per step ab, train and test loss and Proposition 4.1's ratio, and reports
the final values against Theorem 4.1's ab* at this T (Theorem 4.3's for ones).  With
``incontext`` test lengths, the end point's in-context curve (Proposition 4.1, Theorem 4.2) on
a fresh test set is part of the result.  :func:`run_batch` steps several runs that share one
training set together (the same numbers as one :func:`run` each).

Example:
    ```python
    from mesadyn.workflows import train

    res = train.run(train.Config(x1="gaussian", d=3, T=10, m=200, steps=5))
    res.status, res.run.ab_mean.shape  # (<Outcome.OK: 'ok'>, (6,))
    ```
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import MesadynError, check_choice, check_int, check_positive
from ..outcome import Outcome
from ..progress import ProgressCallback
from ..record import flattened, hidden
from ._common import Init, check_init, set_fields
from ._run import DeviceOptions, RunResult, write_run

if TYPE_CHECKING:
    import xarray as xr

    from ..analysis.incontext import ContextCurve
    from ..train import TrainResult

__all__ = ["INCONTEXT_DRAWS", "INCONTEXT_SEED_OFFSET", "Config", "Result", "run", "run_batch"]

#: Draws of the fresh test set of the in-context curve (``incontext``).
INCONTEXT_DRAWS = 2000
#: The in-context test set is drawn from ``seed + INCONTEXT_SEED_OFFSET``.
INCONTEXT_SEED_OFFSET = 7919


def _lengths(value: object) -> tuple[int, ...]:
    """The test lengths of ``incontext``: a sequence of integers or the text ``"3,5,10"``."""
    if isinstance(value, str):
        text = value
        try:
            value = [int(v) for v in text.replace(" ", "").split(",") if v]
        except ValueError:
            raise MesadynError(f"incontext must be test lengths such as 3,5,10, got "
                               f"{text!r}") from None
    if not isinstance(value, tuple | list):
        raise MesadynError(f"incontext must be test lengths such as 3,5,10, got {value!r}")
    return tuple(check_int("incontext", v, 2) for v in value)


@dataclass(frozen=True)
class Config(DeviceOptions):
    """Options of one GD run; see :func:`mesadyn.train.train` for their meaning.

    The process may go beyond the paper's (``radius``, ``rotation``, ``noise``): GD then runs
    on the finite-sample loss of those sequences; ``ab_theory`` is NaN where there is no
    reduced system (a rotation or noise) and the ratio is NaN off the paper's process.

    ``lr=None`` takes Table 1's step size (an error if the table has none for this process);
    ``m_test=None`` takes ``m``; ``mask="diagonal"`` trains only the diagonals of ``W^KQ_32``
    and ``W^PV_12`` (Theorem 4.3's clipping); ``incontext``: test context lengths of the end
    point's in-context curve (:data:`INCONTEXT_DRAWS` fresh draws from ``seed +``
    :data:`INCONTEXT_SEED_OFFSET`; empty: none); ``out`` is the ``.nc`` run file; ``device``
    (cpu — the default —, auto, cuda) is where GD steps.
    """

    COMMAND = "train"

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
    incontext: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        from ..model import Mask

        super().__post_init__()
        init, a0, b0, sigma_w = check_init(self.init, self.a0, self.b0, self.sigma_w)
        set_fields(
            self, init=init, a0=a0, b0=b0, sigma_w=sigma_w,
            m=check_int("m", self.m, 1),
            m_test=None if self.m_test is None else check_int("m_test", self.m_test, 1),
            steps=check_int("steps", self.steps, 0),
            lr=None if self.lr is None else check_positive("lr", self.lr),
            mask=check_choice("mask", self.mask, Mask),
            eval_every=check_int("eval_every", self.eval_every, 1),
            incontext=_lengths(self.incontext),
        )
        if self.incontext and not self.diagonal_noiseless:
            raise MesadynError("incontext curves need the paper's diagonal W without noise "
                               f"(got rotation={self.rotation!s}, noise={self.noise!r})")
        if self.lr is None:
            from ..train import table1_lr

            table1_lr(self.family())  # names the missing Table 1 entry before any work

    def training_set(self) -> tuple[Any, ...]:
        """What runs must share to be stepped together on one training set
        (:func:`run_batch`): every recorded option but the initialisation."""
        start = {"init", "a0", "b0", "sigma_w"}
        return tuple((k, str(v)) for k, v in self.run_config().items() if k not in start)


@dataclass(frozen=True)
class Result(RunResult):
    """The end of a GD run against the theory; ``run`` holds every recorded step and
    ``context`` the end point's in-context curve (``incontext``)."""

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
    #: Proposition 4.1's ratio bookkeeping (``ratio_used``, ``ratio_excluded``,
    #: ``ratio_imag``, ``ratio_imag_se``); empty when the ratio was never evaluated.
    ratio_info: dict[str, float | int] = flattened(default_factory=dict)
    diverged: bool = False
    diverged_step: int | None = None
    wall_s: float = 0.0
    init: str = "diagonal"
    out: str | None = None
    #: The process beyond the paper's: ``radius`` when not 1, ``rotation`` and ``noise`` when
    #: W is not the noiseless diagonal (empty for the paper's process).
    process: dict[str, float | str] = flattened(default_factory=dict)
    run: TrainResult | None = hidden()
    context: ContextCurve | None = hidden()

    def to_dataset(self) -> xr.Dataset:
        """The GD trace over ``step`` and, with an in-context curve, its ``ctx_*`` variables
        over ``T_te``."""
        import numpy as np

        assert self.run is not None
        ds = self.run.to_dataset()
        if self.context is not None:
            ds = ds.assign_coords(T_te=np.asarray(self.context.T_te))
            for k in ("mse", "mse_se", "baseline", "ratio", "ratio_se"):
                ds[f"ctx_{k}"] = ("T_te", np.asarray(getattr(self.context, k), dtype=np.float64))
        return ds


def run(config: Config, progress: ProgressCallback | None = None) -> Result:
    """Full-batch GD (Section 6) with :func:`mesadyn.train.train`; writes ``config.out``.

    Every input, the device and the output path are checked before the first step, so a
    bad value never costs a run.  A diverging run is returned (``status`` ``diverged``), after
    its partial record is saved to ``out`` when given.

    ## Arguments
    - `config`: the validated options.
    - `progress`: called with the step number after each GD step.

    ## Returns
    A :class:`Result` (``result.run`` is the full :class:`~mesadyn.train.TrainResult`).

    ## Raises
    - `MesadynError`: an unwritable ``out``, CUDA requested but absent.
    """
    if not config.paper_model:
        from ._model_runs import train_model

        return train_model(config, progress)  # type: ignore[return-value]
    (result,) = run_batch([config], progress)
    return result


def run_batch(configs: list[Config], progress: ProgressCallback | None = None) -> list[Result]:
    """Several GD runs that share one training set (equal :meth:`Config.training_set`: they
    differ only in the initialisation), stepped together by :func:`mesadyn.train.train_batch`:
    the same numbers as one :func:`run` per config (tested), with the draws, prefix Grams and
    test sets built once.  Each result is written to its own ``out``.

    ## Raises
    `MesadynError`: no configs, configs of different training sets, or as :func:`run`.
    """
    from ..budget import check
    from ..budget import train as train_estimate
    from ..io import check_writable
    from ..train import table1_lr, train_batch
    from ._common import initial_theta

    if not configs or len({c.training_set() for c in configs}) != 1:
        raise MesadynError("run_batch needs GD configs that share one training set")
    for c in configs:
        c.check_model("train's batched runs (run_batch)")
    for c in configs:
        if c.out is not None:
            check_writable(c.out, suffixes=c.OUT_SUFFIXES)
    c0 = configs[0]
    dev = c0.torch_device
    fam = c0.family()
    lr = table1_lr(fam) if c0.lr is None else c0.lr
    check(train_estimate(fam.d, c0.T, c0.m, c0.m if c0.m_test is None else c0.m_test,
                         c0.steps, runs=len(configs), device=dev))  # before any start
    starts = [initial_theta(Init(c.init), fam.d, c.a0, c.b0, c.sigma_w, c.seed) for c in configs]

    records = train_batch(fam, c0.T, starts, inits=[_init_record(c) for c in configs], m=c0.m,
                          m_test=c0.m_test, steps=c0.steps, lr=lr, seed=c0.seed,
                          mask=str(c0.mask), eval_every=c0.eval_every, device=dev,
                          progress=progress, radius=c0.radius, rotation=str(c0.rotation),
                          noise=c0.noise)
    return [write_run(c, _result(c, rec)) for c, rec in zip(configs, records, strict=True)]


def _init_record(config: Config) -> dict[str, Any]:
    if config.init is Init.GAUSSIAN:
        return {"init": "gaussian", "sigma_w": config.sigma_w}
    return {"init": "diagonal", "a0": config.a0, "b0": config.b0}


def _result(config: Config, rec: TrainResult) -> Result:
    context = None
    if config.incontext and not rec.diverged:
        import torch

        from ..analysis.incontext import context_curve, draw_test_set

        x1, lam = draw_test_set(config.family(), INCONTEXT_DRAWS,
                                config.seed + INCONTEXT_SEED_OFFSET)
        context = context_curve(torch.as_tensor(rec.final_theta), x1, lam, config.incontext)
    s = rec.summary()
    return Result(
        family=s["family"], d=s["d"], T=s["T"], m=s["m"], seed=s["seed"], lr=s["lr"],
        steps=s["steps"], ab=s["ab"], ab_coords=tuple(s["ab_coords"]), ab_theory=s["ab_theory"],
        ab_limit=s["ab_limit"], ab_rel_err=s["ab_rel_err"], train_loss=s["train_loss"],
        test_loss=s["test_loss"], ratio=s["ratio"], ratio_se=s["ratio_se"],
        ratio_theory=s["ratio_theory"], diverged=s["diverged"],
        diverged_step=s["diverged_step"], wall_s=s["wall_s"], init=str(config.init),
        out=config.out, ratio_info={f"ratio_{k}": v for k, v in rec.ratio_info.items()},
        process={k: rec.config[k] for k in ("radius", "rotation", "noise") if k in rec.config},
        run=rec, context=context,
        status=Outcome.DIVERGED if rec.diverged else Outcome.OK, message=rec.message,
    )
