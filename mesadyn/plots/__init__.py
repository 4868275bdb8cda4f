"""Phase portraits and the paper's figures.  Every function returns ``(Figure, Axes)``.

Use :func:`save` to write PDF, SVG or PNG deterministically; :func:`style` scopes the
publication rcParams to a ``with`` block.  Every figure keys an initialisation by one colour
(:data:`INIT_COLOURS`, :func:`init_colours`), names a family with its parameter
(:func:`family_title`) and labels a logarithmic axis with plain numbers (:func:`log_ticks`).
"""

from . import gd_phase as gd_phase  # GD as a map: regimes, limits, cycles, central flow
from ._axes import log_ticks
from ._data import ab_path
from ._provenance import read_provenance
from ._style import (
    CYCLE,
    FORMATS,
    INIT_COLOURS,
    MAX_DPI,
    MAX_PIXELS,
    OKABE_ITO,
    WIDTHS,
    DiagonalInit,
    GaussianInit,
    check_raster_size,
    family_label,
    family_title,
    figsize,
    init_colours,
    init_of,
    output_format,
    render,
    save,
    style,
)
from .figures import (
    ab_convergence,
    incontext_curves,
    jacobian_spectrum,
    loss_curves,
    spectra_panels,
    weight_heatmaps,
)
from .portrait import DEFAULT_INITS, PortraitWarning, portrait, reduced_trajectory

__all__ = [
    "CYCLE", "DEFAULT_INITS", "FORMATS", "INIT_COLOURS", "MAX_DPI", "MAX_PIXELS", "OKABE_ITO",
    "DiagonalInit", "GaussianInit", "PortraitWarning", "WIDTHS", "ab_convergence", "ab_path",
    "check_raster_size", "family_label", "family_title", "figsize", "incontext_curves",
    "init_colours", "init_of", "jacobian_spectrum", "log_ticks", "loss_curves",
    "output_format", "portrait", "read_provenance", "reduced_trajectory", "render", "save",
    "spectra_panels",
    "style", "weight_heatmaps",
]
