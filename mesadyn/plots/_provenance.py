"""A figure's provenance, in the figure file itself: one JSON document in its metadata.

A workflow that writes a figure (``mesadyn portrait --out p.pdf``) records there what a
netCDF run file would hold (:func:`mesadyn.workflows.write_run`): the workflow's ``kind``, its
``config``, its ``result``, the ``mesadyn_version`` and the ``seed``, as one JSON object.
:func:`embed` puts it into the bytes :func:`mesadyn.plots.render` made, in the place each
format keeps text about the file:

- **PDF**: the ``/Subject`` of the document information dictionary, written as an
  incremental update (a new Info object, an xref section and a trailer appended after
  ``%%EOF``; the drawing's bytes are left as they are), as a literal string when the text is
  ASCII and a UTF-16BE hex string (with its byte-order mark) otherwise;
- **SVG**: the ``<dc:description>`` of the file's ``<metadata>`` (RDF, Dublin Core), UTF-8;
- **PNG**: a ``tEXt`` chunk with the keyword :data:`PNG_KEYWORD` before ``IEND`` (the text is
  ASCII: non-ASCII characters are JSON escapes).

Nothing in it depends on the time or the machine, so the same figure gives the same bytes.
:func:`read_provenance` reads it back: a PDF through its last cross-reference section and
trailer to the Info dictionary (strings with escapes, octal codes, UTF-16 and hex), an SVG with
:mod:`xml.etree.ElementTree`, a PNG chunk by chunk with each CRC checked.  The PDF side is
:mod:`mesadyn.plots._pdf`.
"""

from __future__ import annotations

import io
import json
import os
import struct
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from ..errors import MesadynError

__all__ = ["MARKER", "PNG_KEYWORD", "embed", "provenance_of", "read_provenance"]

#: The key that marks the JSON document as mesadyn's provenance (its value: the format, 1).
MARKER = "mesadyn_provenance"
#: The keyword of the PNG text chunk.
PNG_KEYWORD = "mesadyn-provenance"
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_DC = "http://purl.org/dc/elements/1.1/"
_SVG = "http://www.w3.org/2000/svg"


def _document(provenance: Mapping[str, Any], *, ascii_only: bool) -> str:
    from ..io import jsonable

    doc = {MARKER: 1, **jsonable(dict(provenance))}
    return json.dumps(doc, sort_keys=True, allow_nan=False, ensure_ascii=ascii_only,
                      separators=(",", ":"))


def embed(data: bytes, fmt: str, provenance: Mapping[str, Any]) -> bytes:
    """``data`` (a PDF, SVG or PNG, ``fmt``) with ``provenance`` embedded (module docstring).

    ## Raises
    `MesadynError`: an unknown format, or bytes that are not a file of that format.
    """
    if fmt == "png":
        return _png_embed(data, _document(provenance, ascii_only=True))
    if fmt == "svg":
        return _svg_embed(data, _document(provenance, ascii_only=False))
    if fmt == "pdf":
        from ._pdf import add_info

        return add_info(data, {"Subject": _document(provenance, ascii_only=False)})
    raise MesadynError(f"no provenance for the format {fmt!r}; choose pdf, svg or png")


def read_provenance(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The provenance a figure written by mesadyn holds: ``kind``, ``config``, ``result``,
    ``mesadyn_version`` and ``seed`` (the format from the suffix: .pdf, .svg, .png).

    ## Raises
    `MesadynError`: a missing or unreadable file, another suffix, or a figure without
    mesadyn's provenance (one line naming the file).
    """
    p = Path(path)
    fmt = p.suffix.lower().lstrip(".")
    if fmt not in ("pdf", "svg", "png"):
        raise MesadynError(f"{str(path)!r}: a figure's provenance is read from .pdf, .svg or "
                           ".png files")
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise MesadynError(f"figure not found: {str(path)!r}") from None
    except OSError as exc:
        raise MesadynError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    try:
        return provenance_of(data, fmt)
    except MesadynError as exc:
        raise MesadynError(f"{str(path)!r}: {exc}") from None


def provenance_of(data: bytes, fmt: str) -> dict[str, Any]:
    """The provenance embedded in the bytes ``data`` of a ``fmt`` figure (without the
    :data:`MARKER` key).

    ## Raises
    `MesadynError`: bytes that are not such a file, or no provenance in them.
    """
    if fmt == "png":
        texts = _png_texts(data)
    elif fmt == "svg":
        texts = _svg_texts(data)
    elif fmt == "pdf":
        from ._pdf import info_strings

        texts = [v for k, v in info_strings(data).items() if k == "Subject"]
    else:
        raise MesadynError(f"no provenance for the format {fmt!r}; choose pdf, svg or png")
    for text in texts:
        try:
            doc = json.loads(text)
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get(MARKER) == 1:
            return {k: v for k, v in doc.items() if k != MARKER}
    raise MesadynError("no mesadyn provenance in this figure (was it written by mesadyn "
                       "with an out= of a workflow?)")


# ---- PNG --------------------------------------------------------------------------------------
def _png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """``(type, payload)`` of every chunk up to ``IEND``, each CRC checked."""
    if not data.startswith(_PNG_SIGNATURE):
        raise MesadynError("not a PNG file (no PNG signature)")
    out: list[tuple[bytes, bytes]] = []
    pos = len(_PNG_SIGNATURE)
    while True:
        if pos + 8 > len(data):
            raise MesadynError("truncated PNG file (no IEND chunk)")
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        end = pos + 8 + length
        if end + 4 > len(data):
            raise MesadynError(f"truncated PNG chunk {kind!r}")
        payload = data[pos + 8:end]
        (crc,) = struct.unpack(">I", data[end:end + 4])
        if zlib.crc32(kind + payload) != crc:
            raise MesadynError(f"corrupt PNG chunk {kind!r} (CRC mismatch)")
        out.append((kind, payload))
        pos = end + 4
        if kind == b"IEND":
            return out


def _png_chunk(kind: bytes, payload: bytes) -> bytes:
    return (struct.pack(">I", len(payload)) + kind + payload
            + struct.pack(">I", zlib.crc32(kind + payload)))


def _png_embed(data: bytes, text: str) -> bytes:
    keyword = PNG_KEYWORD.encode("latin-1")
    chunks = [c for c in _png_chunks(data) if not (
        c[0] in (b"tEXt", b"zTXt", b"iTXt") and c[1].split(b"\0", 1)[0] == keyword)]
    mine = (b"tEXt", keyword + b"\0" + text.encode("latin-1"))
    chunks.insert(len(chunks) - 1, mine)  # before IEND
    return _PNG_SIGNATURE + b"".join(_png_chunk(k, p) for k, p in chunks)


def _png_texts(data: bytes) -> list[str]:
    """The texts of the PNG's ``tEXt``, ``zTXt`` and ``iTXt`` chunks named :data:`PNG_KEYWORD`."""
    keyword = PNG_KEYWORD.encode("latin-1")
    out = []
    for kind, payload in _png_chunks(data):
        name, sep, rest = payload.partition(b"\0")
        if name != keyword or not sep:
            continue
        try:
            if kind == b"tEXt":
                out.append(rest.decode("latin-1"))
            elif kind == b"zTXt" and rest[:1] == b"\0":  # compression method 0: zlib
                out.append(zlib.decompress(rest[1:]).decode("latin-1"))
            elif kind == b"iTXt" and len(rest) >= 2:
                flag, text = rest[0], rest[2:]
                _language, _, text = text.partition(b"\0")
                _translated, _, text = text.partition(b"\0")
                out.append((zlib.decompress(text) if flag else text).decode("utf-8"))
        except (zlib.error, UnicodeDecodeError):
            raise MesadynError(f"unreadable PNG text chunk {kind!r}") from None
    return out


# ---- SVG --------------------------------------------------------------------------------------
def _svg_embed(data: bytes, text: str) -> bytes:
    svg = data.decode("utf-8")
    element = f"<dc:description>{escape(text)}</dc:description>"
    end = svg.find("</cc:Work>")
    if end >= 0:
        svg = f"{svg[:end]} {element}\n   {svg[end:]}"
    else:
        import re

        root = re.search(r"<svg\b[^>]*>", svg)
        if root is None:
            raise MesadynError("not an SVG file (no <svg> element)")
        block = (
            '\n <metadata>\n  <rdf:RDF xmlns:dc="http://purl.org/dc/elements/1.1/" '
            'xmlns:cc="http://creativecommons.org/ns#" '
            'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\n   <cc:Work>\n    '
            f"{element}\n   </cc:Work>\n  </rdf:RDF>\n </metadata>")
        svg = svg[:root.end()] + block + svg[root.end():]
    return svg.encode("utf-8")


def _svg_texts(data: bytes) -> list[str]:
    """The texts of the ``dc:description`` elements in the SVG's ``<metadata>``."""
    import xml.etree.ElementTree as ET

    out = []
    try:
        for _, elem in ET.iterparse(io.BytesIO(data), events=("end",)):
            if elem.tag == f"{{{_DC}}}description":
                out.append(elem.text or "")
            elif elem.tag == f"{{{_SVG}}}metadata":
                break  # the drawing that follows holds no metadata
    except ET.ParseError as exc:
        raise MesadynError(f"not a well-formed SVG file ({exc})") from None
    return out

