"""The document information dictionary of a PDF: read it, and add entries by an incremental
update (ISO 32000-1 §7.5.6), for :mod:`mesadyn.plots._provenance`.

:func:`info_strings` follows the file's last cross-reference table and its trailer (and each
``/Prev`` before it) to the Info dictionary and returns its strings as text: literal strings
with their escapes (``\\n``, ``\\(``, octal ``\\ddd``, line continuations), hex strings,
UTF-16BE after a byte-order mark, UTF-8 after its mark, PDFDocEncoding otherwise.
:func:`add_info` appends a new Info object, a one-entry cross-reference section and a trailer
after ``%%EOF``: the bytes before are left as they are, and nothing depends on the time, so
the output is as deterministic as the input.  Files with cross-reference streams (PDF 1.5
object streams, which matplotlib does not write) are refused with a message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import MesadynError

__all__ = ["add_info", "info_strings"]


_WHITE = b"\x00\t\n\x0c\r "
_DELIMITERS = b"()<>[]{}/%"
_ESCAPES = {ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t", ord("b"): b"\b",
            ord("f"): b"\f", ord("("): b"(", ord(")"): b")", ord("\\"): b"\\"}


class _Name(str):
    """A PDF name (``/Subject``), its text without the slash."""


class _Ref(tuple[int, int]):
    """An indirect reference ``num gen R``."""


class _Reader:
    """The PDF object grammar (ISO 32000-1 §7.3) over ``data`` from ``pos``: enough of it for
    cross-reference tables, trailers and dictionaries of strings, names and numbers."""

    def __init__(self, data: bytes, pos: int) -> None:
        self.data, self.pos = data, pos

    def _fail(self, what: str) -> MesadynError:
        return MesadynError(f"malformed PDF ({what} at byte {self.pos})")

    def skip(self) -> None:
        data = self.data
        while self.pos < len(data):
            c = data[self.pos]
            if c in _WHITE:
                self.pos += 1
            elif c == ord("%"):  # a comment runs to the end of the line
                while self.pos < len(data) and data[self.pos] not in b"\r\n":
                    self.pos += 1
            else:
                return

    def token(self) -> bytes:
        """The next run of regular characters (a number, a keyword)."""
        self.skip()
        start = self.pos
        while self.pos < len(self.data) and self.data[self.pos] not in _WHITE + _DELIMITERS:
            self.pos += 1
        if self.pos == start:
            raise self._fail("a token expected")
        return self.data[start:self.pos]

    def integer(self) -> int:
        tok = self.token()
        try:
            return int(tok)
        except ValueError:
            raise self._fail(f"an integer expected, got {tok[:20]!r}") from None

    def at(self, text: bytes) -> bool:
        self.skip()
        return self.data.startswith(text, self.pos)

    def value(self) -> Any:
        """The next object: dict, array, name, string (bytes), number, bool, null, reference."""
        self.skip()
        if self.pos >= len(self.data):
            raise self._fail("unexpected end")
        c = self.data[self.pos:self.pos + 1]
        if self.data.startswith(b"<<", self.pos):
            self.pos += 2
            out: dict[str, Any] = {}
            while not self.at(b">>"):
                key = self.value()
                if not isinstance(key, _Name):
                    raise self._fail("a name expected as a dictionary key")
                out[key] = self.value()
            self.pos += 2
            return out
        if c == b"[":
            self.pos += 1
            items = []
            while not self.at(b"]"):
                items.append(self.value())
            self.pos += 1
            return items
        if c == b"<":
            return self._hex()
        if c == b"(":
            return self._literal()
        if c == b"/":
            self.pos += 1
            raw = self.token() if self.pos < len(self.data) and self.data[self.pos] not in (
                _WHITE + _DELIMITERS) else b""
            return _Name(_unescape_name(raw))
        if c in (b")", b">", b"]", b"{", b"}"):
            raise self._fail(f"unexpected {c!r}")
        tok = self.token()
        words: dict[bytes, Any] = {b"true": True, b"false": False, b"null": None}
        if tok in words:
            return words[tok]
        try:
            number = int(tok)
        except ValueError:
            try:
                return float(tok)
            except ValueError:
                raise self._fail(f"unknown token {tok[:20]!r}") from None
        mark = self.pos
        try:  # ``num gen R``
            gen = self.integer()
            if self.token() == b"R":
                return _Ref((number, gen))
        except MesadynError:
            pass
        self.pos = mark
        return number

    def _hex(self) -> bytes:
        end = self.data.find(b">", self.pos)
        if end < 0:
            raise self._fail("unterminated hex string")
        digits = bytes(b for b in self.data[self.pos + 1:end] if b not in _WHITE)
        self.pos = end + 1
        try:
            return bytes.fromhex((digits + b"0" * (len(digits) % 2)).decode("ascii"))
        except ValueError:
            raise self._fail("bad hex string") from None

    def _literal(self) -> bytes:
        data, out, depth = self.data, bytearray(), 1
        i = self.pos + 1
        while i < len(data):
            c = data[i]
            if c == ord("\\") and i + 1 < len(data):
                e = data[i + 1]
                if e in _ESCAPES:
                    out += _ESCAPES[e]
                    i += 2
                elif ord("0") <= e <= ord("7"):  # up to three octal digits
                    j = i + 1
                    while j < min(i + 4, len(data)) and ord("0") <= data[j] <= ord("7"):
                        j += 1
                    out.append(int(data[i + 1:j], 8) & 0xFF)
                    i = j
                elif e in b"\r\n":  # a backslash at the end of a line continues the string
                    i += 3 if data.startswith(b"\r\n", i + 1) else 2
                else:  # an unknown escape is the character itself
                    out.append(e)
                    i += 2
                continue
            if c == ord("("):
                depth += 1
            elif c == ord(")"):
                depth -= 1
                if depth == 0:
                    self.pos = i + 1
                    return bytes(out)
            elif c == ord("\r"):  # an end of line inside a string reads as \n
                out += b"\n"
                i += 2 if data.startswith(b"\r\n", i) else 1
                continue
            out.append(c)
            i += 1
        raise self._fail("unterminated string")


def _unescape_name(raw: bytes) -> str:
    out, i = bytearray(), 0
    while i < len(raw):
        if raw[i] == ord("#") and i + 3 <= len(raw):
            try:
                out.append(int(raw[i + 1:i + 3], 16))
                i += 3
                continue
            except ValueError:
                pass
        out.append(raw[i])
        i += 1
    return out.decode("utf-8", errors="replace")


def _text(value: bytes) -> str:
    """A PDF text string: UTF-16BE after its byte-order mark, UTF-8 after its mark (PDF 2.0),
    else PDFDocEncoding (read as Latin-1, which it equals on the printable ASCII range)."""
    if value.startswith(b"\xfe\xff"):
        return value[2:].decode("utf-16-be", errors="replace")
    if value.startswith(b"\xef\xbb\xbf"):
        return value[3:].decode("utf-8", errors="replace")
    return value.decode("latin-1")


def _literal_bytes(value: bytes) -> bytes:
    out = bytearray(b"(")
    for c in value:
        if c in b"()\\":
            out += b"\\" + bytes([c])
        elif 32 <= c < 127:
            out.append(c)
        else:
            out += b"\\%03o" % c
    return bytes(out + b")")


def _pdf_repr(value: Any) -> bytes:
    """``value`` in PDF syntax: a ``str`` as a text string (literal when ASCII, UTF-16BE hex
    otherwise), ``bytes`` as a literal string, names, references, numbers, arrays, dicts."""
    if isinstance(value, _Name):
        return b"/" + b"".join(bytes([c]) if 33 <= c < 127 and c not in _DELIMITERS + b"#"
                               else b"#%02X" % c for c in value.encode("utf-8"))
    if isinstance(value, _Ref):
        return b"%d %d R" % value
    if isinstance(value, bool) or value is None:
        return {True: b"true", False: b"false", None: b"null"}[value]
    if isinstance(value, int):
        return b"%d" % value
    if isinstance(value, float):
        return format(value, "f").encode("ascii")
    if isinstance(value, bytes):
        return _literal_bytes(value)
    if isinstance(value, str):
        if value.isascii():
            return _literal_bytes(value.encode("ascii"))
        return b"<FEFF" + value.encode("utf-16-be").hex().upper().encode("ascii") + b">"
    if isinstance(value, list):
        return b"[" + b" ".join(_pdf_repr(v) for v in value) + b"]"
    if isinstance(value, dict):
        return b"<< " + b" ".join(_pdf_repr(_Name(k)) + b" " + _pdf_repr(v)
                                  for k, v in value.items()) + b" >>"
    raise TypeError(f"no PDF form for {type(value).__qualname__}")


def _startxref(data: bytes) -> int:
    if not data.startswith(b"%PDF-"):
        raise MesadynError("not a PDF file (no %PDF- header)")
    at = data.rfind(b"startxref", max(0, len(data) - 4096))
    if at < 0:
        raise MesadynError("malformed PDF (no startxref)")
    return _Reader(data, at + len(b"startxref")).integer()


def _xref_sections(data: bytes) -> list[tuple[dict[int, int], dict[str, Any]]]:
    """Every cross-reference section, newest first (following ``/Prev``): the byte offsets of
    its objects in use and its trailer."""
    out: list[tuple[dict[int, int], dict[str, Any]]] = []
    offset: Any = _startxref(data)
    seen: set[int] = set()
    while isinstance(offset, int) and offset not in seen:
        seen.add(offset)
        r = _Reader(data, offset)
        if r.token() != b"xref":
            raise MesadynError("the PDF has no cross-reference table (a cross-reference stream "
                               "is not read here)")
        objects: dict[int, int] = {}
        while not r.at(b"trailer"):
            start, count = r.integer(), r.integer()
            for k in range(count):
                where, _gen, kind = r.integer(), r.integer(), r.token()
                if kind == b"n":
                    objects[start + k] = where
        r.pos += len(b"trailer")
        trailer = r.value()
        if not isinstance(trailer, dict):
            raise MesadynError("malformed PDF (its trailer is no dictionary)")
        out.append((objects, trailer))
        offset = trailer.get("Prev")
    return out


def _resolve(data: bytes, sections: list[tuple[dict[int, int], dict[str, Any]]],
             ref: _Ref) -> Any:
    num, gen = ref
    for objects, _ in sections:
        if num in objects:
            r = _Reader(data, objects[num])
            if (r.integer(), r.integer(), r.token()) != (num, gen, b"obj"):
                raise MesadynError(f"malformed PDF (object {num} {gen} is not where its "
                                   "cross-reference says)")
            return r.value()
    raise MesadynError(f"malformed PDF (object {num} {gen} is in no cross-reference section)")


def _info_dict(data: bytes, sections: list[tuple[dict[int, int], dict[str, Any]]]
               ) -> dict[str, Any]:
    for _, trailer in sections:
        ref = trailer.get("Info")
        if isinstance(ref, _Ref):
            info = _resolve(data, sections, ref)
            return info if isinstance(info, dict) else {}
    return {}


def info_strings(data: bytes) -> dict[str, str]:
    """The string entries of the PDF's document information dictionary, as text."""
    info = _info_dict(data, _xref_sections(data))
    return {str(k): _text(v) for k, v in info.items() if isinstance(v, bytes)}


def add_info(data: bytes, entries: Mapping[str, str]) -> bytes:
    """``data`` with ``entries`` added to its Info dictionary, by an incremental update."""
    sections = _xref_sections(data)
    prev = _startxref(data)
    trailer = sections[0][1]
    size = trailer.get("Size")
    if not isinstance(size, int) or size < 1:
        raise MesadynError("malformed PDF (its trailer has no /Size)")
    info: dict[str, Any] = {**_info_dict(data, sections), **entries}
    body = data if data.endswith(b"\n") else data + b"\n"
    obj = b"%d 0 obj\n" % size + _pdf_repr(info) + b"\nendobj\n"
    xref_at = len(body) + len(obj)
    xref = b"xref\n%d 1\n%010d 00000 n \n" % (size, len(body))
    kept = {k: v for k, v in trailer.items() if k not in ("Size", "Prev", "Info", "XRefStm")}
    new = {"Size": size + 1, **kept, "Info": _Ref((size, 0)), "Prev": prev}
    return (body + obj + xref + b"trailer\n" + _pdf_repr(new)
            + b"\nstartxref\n%d\n%%%%EOF\n" % xref_at)
