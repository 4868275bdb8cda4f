"""Models as a type: the attention models mesadyn trains on the AR process of Section 3.1.

:class:`Model` is the abstract model (parameter layout, forward pass, initialisations, known
continuous symmetries, capabilities); its final classes are the paper's one-layer linear
attention (:class:`LinearAttention`, ``--model linear``, :data:`PAPER`), k-layer linear
attention with the residual stream (:class:`DeepLinearAttention`, ``--model deep --layers k``)
and one-layer softmax attention (:class:`SoftmaxAttention`, ``--model softmax``).
:func:`model_of` is the one way from the CLI's ``(model, layers)`` to a model.  Importing this
package loads no torch.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from ..errors import MesadynError, check_int
from ._base import Block as Block
from ._base import Model as Model
from ._deep import DeepLinearAttention as DeepLinearAttention
from ._linear import LinearAttention as LinearAttention
from ._softmax import SoftmaxAttention as SoftmaxAttention

__all__ = ["PAPER", "Block", "DeepLinearAttention", "LinearAttention", "Model", "ModelName",
           "SoftmaxAttention", "model_from", "model_of"]

#: The paper's model (Section 3.2): the default of every field and command.
PAPER: Model = LinearAttention()


class ModelName(enum.StrEnum):
    """The ``--model`` values."""

    LINEAR = "linear"
    DEEP = "deep"
    SOFTMAX = "softmax"


def model_of(name: object = "linear", layers: object = 1) -> Model:
    """The model ``--model name --layers layers`` names.

    ``linear`` is the paper's model (one layer), ``deep`` k-layer linear attention with the
    residual stream (``layers = k >= 1``), ``softmax`` one-layer softmax attention.

    Raises:
        MesadynError: an unknown name, ``layers`` not an integer >= 1, or ``layers != 1`` for a
            one-layer model (each names the value).
    """
    try:
        kind = ModelName(name if isinstance(name, str) else repr(name))
    except ValueError:
        raise MesadynError(f"unknown model {name!r}; choose "
                           f"{', '.join(m.value for m in ModelName)}") from None
    k = check_int("layers", layers, 1)
    if kind is ModelName.DEEP:
        return DeepLinearAttention(k)
    if k != 1:
        raise MesadynError(f"layers={k} needs model='deep' (k-layer linear attention); the "
                           f"{kind.value} model has one layer")
    return PAPER if kind is ModelName.LINEAR else SoftmaxAttention()


def model_from(description: Mapping[str, object]) -> Model:
    """The model a field's description names (``model``, ``layers``; the paper's when absent)."""
    return model_of(description.get("model", "linear"), description.get("layers", 1))
