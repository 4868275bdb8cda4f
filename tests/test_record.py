"""Results as data: ``to_dict()`` derived from a dataclass's fields and their markers."""

from __future__ import annotations

import dataclasses
import enum

import numpy as np
import pytest

from mesadyn.record import Record, flattened, hidden, omitted_if, plain, renamed


class Colour(enum.StrEnum):
    RED = "red"


@dataclasses.dataclass(frozen=True)
class Stats(Record):
    nfev: int
    wall_s: float


@dataclasses.dataclass(frozen=True)
class Result(Record):
    DERIVED = ("double",)

    x: float
    colour: Colour
    arr: np.ndarray = dataclasses.field(compare=False)
    stats: Stats = flattened()
    radius: float = omitted_if(1.0)
    out: str | None = omitted_if(None)
    secret: object = hidden()
    spelled: int = renamed("spelt", default=3)

    @property
    def double(self) -> float:
        return 2 * self.x


def test_to_dict_is_the_fields_shaped_by_their_markers():
    r = Result(0.5, Colour.RED, np.arange(3.0), Stats(7, 0.1), secret=object())
    assert r.to_dict() == {"x": 0.5, "colour": "red", "arr": [0.0, 1.0, 2.0], "nfev": 7,
                           "wall_s": 0.1, "spelt": 3, "double": 1.0}
    assert Result(0.5, Colour.RED, np.arange(1.0), Stats(1, 0.0), radius=0.9,
                  out="r.nc").to_dict()["radius"] == 0.9


def test_plain_values():
    assert plain((np.float64(1.5), np.int64(2), {Colour.RED: (1, 2)})) == [1.5, 2, {"red": [1, 2]}]
    with pytest.raises(TypeError, match="hidden"):
        plain(object())
