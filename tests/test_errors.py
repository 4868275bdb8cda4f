"""The input checks every Config uses: numpy scalars are numbers, strings are never booleans."""

from __future__ import annotations

import enum

import numpy as np
import pytest

from mesadyn.errors import (
    MesadynError,
    check_bool,
    check_choice,
    check_finite,
    check_int,
    check_positive,
)


@pytest.mark.parametrize("value", [20, np.int64(20), np.int32(20), 20.0, np.float64(20.0)])
def test_integral_numbers_are_integers(value):
    assert check_int("T", value, 3) == 20 and type(check_int("T", value, 3)) is int


@pytest.mark.parametrize("value", [True, np.bool_(True), 2.5, np.float64(2.5), "20", None])
def test_non_integers_are_refused_naming_the_value(value):
    with pytest.raises(MesadynError, match="T must be an integer"):
        check_int("T", value, 0)


def test_numpy_floats_are_numbers():
    assert check_positive("sigma", np.float32(0.5)) == 0.5
    assert check_finite("mu", np.float64(-1.0)) == -1.0


@pytest.mark.parametrize("value", ["no", "false", 0, 1, None, "True"])
def test_only_booleans_are_booleans(value):
    with pytest.raises(MesadynError, match="force must be true or false"):
        check_bool("force", value)


def test_booleans_and_numpy_booleans():
    assert check_bool("force", True) is True
    assert check_bool("force", np.bool_(False)) is False


def test_a_config_refuses_a_string_for_a_flag_and_takes_numpy_ints():
    from mesadyn.workflows import integrate, theory

    assert theory.Config(T=np.int64(20)).T == 20
    with pytest.raises(MesadynError, match="force must be true or false"):
        integrate.Config(force="no")


@pytest.mark.parametrize("check", [check_finite, check_positive])
@pytest.mark.parametrize("value", [True, False, np.bool_(True)])
def test_booleans_are_not_numbers(check, value):
    """``float(True)`` is 1.0: a boolean given for a number (``sigma_w=True``) was read as 1."""
    with pytest.raises(MesadynError, match="must be a"):
        check("sigma_w", value)


@pytest.mark.parametrize("check", [check_finite, check_positive])
def test_numpy_scalars_are_numbers(check):
    assert check("x", np.float32(0.5)) == 0.5 and check("x", np.int64(3)) == 3.0


class _Colour(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


def test_a_choice_is_a_member_or_one_line_naming_it_and_the_choices():
    assert check_choice("colour", "red", _Colour) is _Colour.RED
    assert check_choice("colour", _Colour.BLUE, _Colour) is _Colour.BLUE
    for bad in ("green", 3, None):
        with pytest.raises(MesadynError, match="unknown colour .*; choose red, blue") as err:
            check_choice("colour", bad, _Colour)
        assert "\n" not in str(err.value)
