"""What every workflow shares: the process options and the initialisation options.

Every ``Config`` of :mod:`mesadyn.workflows` starts with the process options of
:class:`ProcessOptions` (``x1, sigma, scale, d, T, seed`` and the data models of docs/design.md §6:
``mu, moments, mixture, radius, rotation, noise``); the ones that start a flow or a
training run from a point validate ``init, a0, b0, sigma_w`` with :func:`check_init`.  Both are
validated on construction, so a bad value fails before any work, naming the value.
Family construction itself lives in :func:`mesadyn.process.family`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import MesadynError, check_choice, check_finite, check_int, check_positive
from ..process import NoReducedSystem

if TYPE_CHECKING:  # torch-backed types: imported where they are built
    import torch

    from ..field import FieldKind, FieldSpec
    from ..models import Model
    from ..process import Family
    from ..theory import Constants

#: Largest accepted seed (numpy and torch generators take 64-bit seeds).
MAX_SEED = 2**63 - 1
#: Commands that run a model other than the paper's (``--model``, ``--layers``): the full flow,
#: the fixed point and its spectrum, continuation, ensembles, finite-sample training, and GD
#: against the flow.  Every other command (the paper's closed forms, its 2-D portrait, its GD
#: map) refuses such a model on construction (:meth:`ProcessOptions.check_model`), naming it.
MODEL_COMMANDS = frozenset({"continuation", "ensemble", "gdflow", "integrate", "stability",
                            "train"})


class Init(enum.StrEnum):
    """How θ starts: Assumption 3.1's diagonal point, or iid ``N(0, σ_w²)`` entries."""

    DIAGONAL = "diagonal"
    GAUSSIAN = "gaussian"


def check_seed(seed: object) -> int:
    """A seed in ``0 .. 2**63 − 1`` (a bigger one does not fit the generators)."""
    s = check_int("seed", seed, 0)
    if s > MAX_SEED:
        raise MesadynError(f"seed must be <= 2**63 - 1, got seed={s}")
    return s


def optional_path(name: str, value: object) -> str | None:
    """``None`` or a non-empty path string."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise MesadynError(f"{name} must be a file path, got {value!r}")
    return value


@dataclass(frozen=True)
class ProcessOptions:
    """The process: initial-token family ``x1`` (Section 3.1) with its ``sigma``/``scale``,
    dimension ``d``, training length ``T`` and the random ``seed``; and the data models beyond
    the paper (docs/design.md §6): the token mean ``mu`` (shifted), the ``moments`` text
    (``"m1,...,m6"``, ``;`` between per-coordinate sequences), the ``mixture`` text
    (``"0.3:ones,0.7:gaussian"``), the ``radius`` r of ``W = r·diag(λ)``, the ``rotation``
    (:class:`~mesadyn.process.Rotation`) and the AR ``noise`` scale; and the attention
    ``model`` with its ``layers`` (:func:`mesadyn.models.model_of`: ``linear``, the paper's,
    ``deep`` with k layers, ``softmax``).  The defaults are the paper's process and model."""

    #: The workflow these options belong to (set by each workflow's ``Config``).
    COMMAND: ClassVar[str] = ""

    x1: str = "gaussian"
    sigma: float = 1.0
    scale: float = 1.0
    d: int = 5
    T: int = 100
    seed: int = 1
    mu: float = 0.0
    moments: str | None = None
    mixture: str | None = None
    radius: float = 1.0
    rotation: str = "diagonal"
    noise: float = 0.0
    model: str = "linear"
    layers: int = 1

    def __post_init__(self) -> None:
        from ..process import Rotation, check_noise, check_radius
        from ..theory import check_T

        # the family's own constructor names a bad family, d, sigma, scale, mu, moments or
        # mixture
        fam = self.family()
        radius = check_radius(self.radius)
        rotation = check_choice("rotation", self.rotation, Rotation)
        noise = check_noise(self.noise)
        if rotation is Rotation.REAL and fam.d % 2:
            raise MesadynError(f"real rotations need an even d, got d={fam.d}")
        set_fields(self, d=fam.d, T=check_T(self.T), seed=check_seed(self.seed),
                   sigma=check_finite("sigma", self.sigma),
                   scale=check_finite("scale", self.scale),
                   mu=check_finite("mu", self.mu), radius=radius, rotation=rotation,
                   noise=noise)
        if not (isinstance(self.model, str) and self.model == "linear"
                and type(self.layers) is int and self.layers == 1):  # the paper's: no import
            model = self.attention()  # names an unknown model or a bad layers
            set_fields(self, model=model.name, layers=model.layers)
            self.check_model()

    def attention(self) -> Model:
        """The attention model these options name (:func:`mesadyn.models.model_of`)."""
        from ..models import model_of

        return model_of(self.model, self.layers)

    @property
    def paper_model(self) -> bool:
        """Whether the model is the paper's one-layer linear attention."""
        return self.model == "linear"

    def check_model(self, what: str | None = None) -> None:
        """Refuse a model other than the paper's where ``what`` (default: this command, unless
        it is one of :data:`MODEL_COMMANDS`) has no path for it, naming the model."""
        if self.paper_model or (what is None and self.COMMAND in MODEL_COMMANDS):
            return
        where = what or f"mesadyn {_cli_name(self.COMMAND)}"
        raise MesadynError(f"model={self.attention()} is not supported by {where}: it "
                           "computes the paper's one-layer quantities; the other models run "
                           f"in mesadyn {', '.join(sorted(MODEL_COMMANDS))}")

    def family(self) -> Family:
        """The :class:`~mesadyn.process.Family` these options name."""
        from ..process import family

        return family(self.x1, self.d, sigma=self.sigma, scale=self.scale, mu=self.mu,
                      moments=self.moments, mixture=self.mixture)

    @property
    def diagonal_noiseless(self) -> bool:
        """Whether W is the paper's ``r·diag(λ)`` without noise (every field applies)."""
        return self.rotation == "diagonal" and self.noise == 0

    def check_exact_reach(self) -> None:
        """Refuse a process that the exact field does not reach (one line naming the value):
        Haar W with noise or beyond its reach (``FieldSpec`` names it, :mod:`mesadyn.field.
        _reach`).  The exact field counts real rotations and AR noise (diagonal or real W) and
        Haar W within its reach (``docs/data-models.md``); the sampled fields take every
        process."""
        self.field_spec("exact")

    def check_paper_process(self, what: str, why: str) -> None:
        """Refuse any data model beyond the paper's W = diag(λ) in ``what`` (one line naming
        the value and ``why``): a radius r ≠ 1, a real/Haar rotation or noise."""
        if self.radius != 1:
            raise MesadynError(f"radius={self.radius!r} is not supported by {what}: {why}")
        if self.rotation != "diagonal":
            raise MesadynError(f"rotation={self.rotation!s} is not supported by {what}: {why}")
        if self.noise != 0:
            raise MesadynError(f"noise={self.noise!r} is not supported by {what}: {why}")

    def constants(self) -> Constants:
        """c1, c2 of the 2-D reduced system (Lemma 5.2) for this process: the paper's and
        noisy diagonal W (:func:`mesadyn.theory.constants` at this radius and noise), Haar W
        (:func:`mesadyn.theory.haar_constants`; both keep the diagonal manifold invariant by
        the phase symmetry ``W → e^{iψ}W``).

        Raises:
            NoReducedSystem: real rotations (their reduced system is 3-D:
                :mod:`mesadyn.analysis.rotation_manifold`), Haar W with noise, or a family with
                no reduced system.
        """
        from ..theory import constants, haar_constants

        if self.rotation == "real":
            raise NoReducedSystem(
                "rotation=real has no 2-D reduced system: the diagonal manifold is not "
                "invariant (the gradient at a diagonal point has W^KQ_23 = c·I, c ≠ 0); the flow "
                "keeps the 3-D manifold (W^KQ_32, W^KQ_23, W^PV_12) = (a, c, b)·I "
                "(mesadyn.analysis.rotation_manifold)")
        if self.rotation == "haar":
            if self.noise != 0:
                raise NoReducedSystem(f"noise={self.noise!r} with rotation=haar has no reduced "
                                      "system (its moments are not derived)")
            return haar_constants(self.family(), self.T, radius=self.radius)
        return constants(self.family(), self.T, radius=self.radius, noise=self.noise)

    def field_spec(self, kind: FieldKind | str, **options: Any) -> FieldSpec:
        """The :class:`~mesadyn.field.FieldSpec` of this process (family, T, radius, rotation,
        noise) and model with the kind's ``options`` (samples, m, seed, batches, device).

        Raises:
            MesadynError: a real/Haar rotation or noise with the exact kind (it has no exact
                field; the sampled kinds draw whole sequences), the exact kind for a model that
                has none (softmax), or a bad option.
        """
        from ..field import FieldSpec

        model = None if self.paper_model else self.attention()
        return FieldSpec(kind, self.family(), self.T, radius=self.radius,
                         rotation=self.rotation, noise=self.noise, model=model, **options)


def _cli_name(command: str) -> str:
    """The CLI command of a workflow (``continuation`` is ``mesadyn continue``)."""
    from ..registry import REGISTRY

    wf = REGISTRY.get(command)
    return wf.command if wf is not None else (command or "this command")


def check_init(init: object, a0: object, b0: object,
               sigma_w: object) -> tuple[Init, float, float, float]:
    """The validated start options ``(init, a0, b0, sigma_w)``: diagonal is Assumption 3.1's
    ``W^KQ_32 = a0 I``, ``W^PV_12 = b0 I``; gaussian draws every entry from ``N(0, sigma_w²)``."""
    return (check_choice("init", init, Init), check_finite("a0", a0), check_finite("b0", b0),
            check_positive("sigma_w", sigma_w))


def set_fields(config: object, **values: object) -> None:
    """Store validated values on a frozen dataclass (inside its ``__post_init__``)."""
    for name, value in values.items():
        object.__setattr__(config, name, value)


def initial_theta(init: Init, d: int, a0: float, b0: float, sigma_w: float,
                  seed: int, model: Model | None = None) -> torch.Tensor:
    """θ0 from the init options (:func:`mesadyn.model.diagonal_init` / ``gaussian_init``; for
    another ``model`` its own, Assumption 3.1 in every layer)."""
    from ..model import diagonal_init, gaussian_init

    if model is not None and not model.is_paper:
        if init is Init.DIAGONAL:
            return model.diagonal_init(d, a0, b0)
        return model.gaussian_init(d, sigma_w, seed)
    if init is Init.DIAGONAL:
        return diagonal_init(d, a0, b0)
    return gaussian_init(d, sigma_w, seed)
