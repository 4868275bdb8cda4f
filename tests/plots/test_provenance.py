"""``mesadyn.plots._provenance`` and ``_pdf``: a figure's provenance in its own metadata (PDF
Info ``/Subject``, SVG ``dc:description``, PNG ``tEXt``), written deterministically and read
back, checked against independent readers (Pillow for PNG, ElementTree for SVG, matplotlib's
own PDF strings and hand-written PDF syntax for the PDF reader)."""

from __future__ import annotations

import io
import json
import re
import struct
import xml.etree.ElementTree as ET
import zlib

import matplotlib
import pytest

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from mesadyn.errors import MesadynError  # noqa: E402
from mesadyn.plots import read_provenance, render, save  # noqa: E402
from mesadyn.plots._pdf import add_info, info_strings  # noqa: E402
from mesadyn.plots._provenance import MARKER, PNG_KEYWORD, embed, provenance_of  # noqa: E402

PROVENANCE = {
    "kind": "portrait",
    "config": {"x1": "gaussian", "sigma": 0.5, "note": "σ = 0.5, ∇L (a)\\b \"q\" <&>"},
    "result": {"ab_star": 0.1919050885, "window": [-2.5, 2.5], "notes": ["ab ≠ c2/c1 )("]},
    "mesadyn_version": "0.2.0", "seed": 7,
}


def _figure() -> Figure:
    fig = Figure(figsize=(2.0, 1.5))
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1])
    ax.set_title("σ ∇ (a, b)")
    return fig


@pytest.mark.parametrize("fmt", ["pdf", "svg", "png"])
def test_round_trip_with_non_ascii_text(tmp_path, fmt):
    path = tmp_path / f"f.{fmt.upper()}"  # the suffix is case-insensitive
    save(_figure(), path, dpi=40, provenance=PROVENANCE)
    assert read_provenance(path) == PROVENANCE
    data = path.read_bytes()
    save(_figure(), path, dpi=40, provenance=PROVENANCE)  # no date, no random id
    assert path.read_bytes() == data


@pytest.mark.parametrize("fmt", ["pdf", "svg", "png"])
def test_a_figure_without_provenance_is_refused_naming_the_file(tmp_path, fmt):
    path = tmp_path / f"plain.{fmt}"
    save(_figure(), path, dpi=40)
    with pytest.raises(MesadynError, match=r"plain\.\w+'.*no mesadyn provenance"):
        read_provenance(path)


def test_png_chunk_is_read_by_pillow_and_replaced_not_repeated():
    from PIL import Image

    raw = render(_figure(), "png", dpi=40)
    once = embed(raw, "png", PROVENANCE)
    twice = embed(once, "png", {**PROVENANCE, "seed": 8})
    img = Image.open(io.BytesIO(twice))
    img.verify()  # every chunk's CRC, the structure
    text = Image.open(io.BytesIO(twice)).text[PNG_KEYWORD]
    assert text.isascii() and json.loads(text) == {MARKER: 1, **PROVENANCE, "seed": 8}
    assert twice.count(PNG_KEYWORD.encode()) == 1
    assert provenance_of(twice, "png")["seed"] == 8


def test_png_itxt_and_ztxt_chunks_are_read():
    """Other writers may use the compressed or international text chunks."""
    raw = render(_figure(), "png", dpi=40)
    doc = json.dumps({MARKER: 1, **PROVENANCE}, ensure_ascii=False)

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return (struct.pack(">I", len(payload)) + kind + payload
                + struct.pack(">I", zlib.crc32(kind + payload)))

    key = PNG_KEYWORD.encode()
    itxt = chunk(b"iTXt", key + b"\0\x01\0en\0\0" + zlib.compress(doc.encode("utf-8")))
    ztxt = chunk(b"zTXt", key + b"\0\0" + zlib.compress(json.dumps(
        {MARKER: 1, **PROVENANCE}).encode("latin-1")))
    end = raw.rindex(b"IEND") - 4
    for extra in (itxt, ztxt):
        assert provenance_of(raw[:end] + extra + raw[end:], "png") == PROVENANCE


def test_png_corruption_is_a_message():
    data = bytearray(embed(render(_figure(), "png", dpi=40), "png", PROVENANCE))
    at = data.index(PNG_KEYWORD.encode())
    data[at + 40] ^= 0x01  # a bit in the text: its CRC no longer matches
    with pytest.raises(MesadynError, match="CRC"):
        provenance_of(bytes(data), "png")
    with pytest.raises(MesadynError, match="not a PNG"):
        provenance_of(b"GIF89a", "png")


def test_svg_description_is_plain_dublin_core():
    data = embed(render(_figure(), "svg"), "svg", PROVENANCE)
    root = ET.fromstring(data)  # still well-formed
    ns = {"dc": "http://purl.org/dc/elements/1.1/", "svg": "http://www.w3.org/2000/svg"}
    (desc,) = root.findall("svg:metadata//dc:description", ns)
    assert json.loads(desc.text or "") == {MARKER: 1, **PROVENANCE}
    assert "σ = 0.5" in data.decode("utf-8")  # UTF-8 text, not escapes
    # an SVG without <metadata> (another writer) gets a metadata block of its own
    bare = b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"><g/></svg>'
    assert provenance_of(embed(bare, "svg", PROVENANCE), "svg") == PROVENANCE
    with pytest.raises(MesadynError, match="well-formed"):
        provenance_of(b"<svg><metadata>", "svg")


def test_pdf_incremental_update_keeps_the_drawing_and_points_right():
    raw = render(_figure(), "pdf")
    data = embed(raw, "pdf", PROVENANCE)
    assert data.startswith(raw)  # the drawing's bytes untouched
    tail = data[len(raw):]
    assert tail.endswith(b"%%EOF\n") and b"/Prev " in tail
    xref_at = int(re.findall(rb"startxref\s+(\d+)", data)[-1])
    assert data[xref_at:xref_at + 4] == b"xref"
    num, offset = re.search(rb"xref\n(\d+) 1\n(\d{10}) 00000 n \n", tail).groups()
    assert data[int(offset):].startswith(num + b" 0 obj")
    info = info_strings(data)
    assert info["Creator"] == "mesadyn" and info["Producer"] == "mesadyn"  # kept
    assert b"/Subject <FEFF" in tail  # non-ASCII text: UTF-16BE hex with its mark
    ascii_only = embed(raw, "pdf", {"kind": "x", "config": {"a": "(b) \\ c"}})
    assert b"/Subject (" in ascii_only[len(raw):]  # ASCII text: a literal string
    assert provenance_of(ascii_only, "pdf") == {"kind": "x", "config": {"a": "(b) \\ c"}}
    newer = embed(data, "pdf", {**PROVENANCE, "seed": 9})  # the latest update wins
    assert provenance_of(newer, "pdf")["seed"] == 9


def test_pdf_reader_reads_matplotlibs_own_strings():
    """matplotlib writes non-ASCII Info strings as UTF-16BE in a literal string, with
    backslash escapes for the parentheses and backslashes among those bytes."""
    fig = _figure()
    buf = io.BytesIO()
    text = "σ∇ (a) \\ b"
    fig.savefig(buf, format="pdf", metadata={"Subject": text, "Title": "plain (t)"})
    info = info_strings(buf.getvalue())
    assert info["Subject"] == text and info["Title"] == "plain (t)"


def _pdf(info: bytes) -> bytes:
    """A minimal PDF (catalog, pages, Info) with its cross-reference table, written here."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>",
               info]
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 4\r\n0000000000 65535 f\r\n"
    out += b"".join(b"%010d 00000 n\r\n" % o for o in offsets)
    out += b"trailer\n<< /Size 4 /Root 1 0 R /Info 3 0 R >>\nstartxref\n%d\n%%%%EOF" % xref
    return bytes(out)


def test_pdf_string_syntax_escapes_octal_hex_and_utf16():
    info = (b"<< /Title (a\\(b\\)c \\\\ d\\n\\101\\60\\0612 (nested) e\\\nf)\n"
            b"% a comment between entries\n"
            b"/Subject (\\376\\377\\003\\303\\042\\007)\n"
            b"/Keywords <FE FF 00 3C 22\n07 00 3>\n"
            b"/Author <48 69>\n/Od#20d (x) /Count 3 /Ref 5 0 R /List [1 2.5 (s)] >>")
    got = info_strings(_pdf(info))
    assert got["Title"] == "a(b)c \\ d\nA0\x312 (nested) ef"
    assert got["Subject"] == "σ∇"  # UTF-16BE σ (03C3) ∇ (2207) after the byte-order mark
    assert got["Keywords"] == "<∇0"  # whitespace ignored; an odd last digit is padded
    assert got["Author"] == "Hi" and got["Od d"] == "x"
    assert set(got) == {"Title", "Subject", "Keywords", "Author", "Od d"}
    updated = add_info(_pdf(info), {"Subject": "σ (2)"})
    assert info_strings(updated)["Subject"] == "σ (2)"
    assert info_strings(updated)["Title"] == got["Title"]  # the other entries kept


@pytest.mark.parametrize(("data", "match"), [
    (b"not a pdf", "no %PDF- header"),
    (b"%PDF-1.4\n1 0 obj\n<<>>\nendobj\n", "no startxref"),
    (b"%PDF-1.4\nstartxref\n9\n%%EOF", "cross-reference table"),
])
def test_pdf_damage_is_a_message(data, match):
    with pytest.raises(MesadynError, match=match):
        provenance_of(data, "pdf")


def test_read_provenance_refuses_other_files(tmp_path):
    with pytest.raises(MesadynError, match="not found"):
        read_provenance(tmp_path / "missing.pdf")
    (tmp_path / "run.nc").write_bytes(b"CDF")
    with pytest.raises(MesadynError, match=r"\.pdf, \.svg or \.png"):
        read_provenance(tmp_path / "run.nc")
    (tmp_path / "bad.pdf").write_bytes(b"%PDF-1.4 truncated")
    with pytest.raises(MesadynError, match="bad.pdf"):
        read_provenance(tmp_path / "bad.pdf")
