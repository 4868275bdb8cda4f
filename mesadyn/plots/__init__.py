"""Phase portraits and the paper's figures.  Every function returns ``(Figure, Axes)``.

Use :func:`save` to write PDF, SVG or PNG deterministically; :func:`style` scopes the
publication rcParams to a ``with`` block.
"""

from ._data import ab_path
from ._style import (
    CYCLE,
    FORMATS,
    MAX_DPI,
    MAX_PIXELS,
    OKABE_ITO,
    WIDTHS,
    check_raster_size,
    figsize,
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
    "CYCLE", "DEFAULT_INITS", "FORMATS", "MAX_DPI", "MAX_PIXELS", "OKABE_ITO", "PortraitWarning",
    "WIDTHS", "ab_convergence", "ab_path", "check_raster_size", "figsize", "incontext_curves",
    "jacobian_spectrum", "loss_curves", "output_format", "portrait", "reduced_trajectory",
    "spectra_panels",
    "render", "save", "style", "weight_heatmaps",
]
