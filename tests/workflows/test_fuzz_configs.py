"""Property-based fuzzing of the Python API: every workflow ``Config`` of
:data:`mesadyn.registry.REGISTRY`, each field given a generated value of any type.

Properties (``docs/reliability.md``):

- a value is refused with the package's error (:class:`~mesadyn.errors.MesadynError`, its
  message naming the field or the value) or taken; never a raw ``TypeError``/``ValueError``
  (a mixture given as a list of tuples, ``init=0.5`` to portrait);
- a boolean field takes ``True``/``False`` (and numpy's booleans) only: ``"no"``, ``1``,
  ``None`` are refused, never read as true;
- a number is not a boolean: ``True`` given for a numeric field is refused (``sigma_w=True``
  was read as 1.0);
- numpy scalars are numbers: a field that takes a Python number takes the same number as a
  numpy scalar, with the same recorded configuration.

Derandomised as the CLI fuzz tests (``MESADYN_FUZZ_RANDOM``, ``MESADYN_FUZZ_SCALE``);
:data:`EXAMPLES` cases (configuration only: no run).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mesadyn.errors import MesadynError
from mesadyn.registry import REGISTRY

#: Cases per run.
EXAMPLES = 60
RANDOM = os.environ.get("MESADYN_FUZZ_RANDOM", "") not in ("", "0")
SCALE = max(1, int(os.environ.get("MESADYN_FUZZ_SCALE", "1") or 1))
#: What a Config needs besides its defaults to be valid.
BASE: dict[str, dict[str, object]] = {"continuation": {"parameter": "sigma", "stop": 1.2,
                                                        "d": 2, "T": 5}}

ANY_VALUE = st.one_of(
    st.integers(-10**20, 10**20), st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(), st.none(), st.text(max_size=6),
    st.sampled_from(["no", "yes", "true", "0", "1e3", "nan", "gaussian", "", "a,b"]),
    st.sampled_from([np.float64(1.5), np.int64(3), np.float32(0.25), np.bool_(True),
                     np.array([1.0, 2.0]), np.array(1.0), 1 + 2j, b"x", object(),
                     [(0.5, "ones"), (0.5, "gaussian")], {"a": 1}, (1, 2), [], ()]),
)


def _config(name: str) -> type:
    return importlib.import_module(REGISTRY[name].module).Config


def _fields(name: str) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(_config(name)) if f.init]


CASES = st.sampled_from(sorted(REGISTRY)).flatmap(
    lambda name: st.tuples(st.just(name), st.sampled_from(_fields(name)), ANY_VALUE))


def _build(name: str, **kw: object) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _config(name)(**{**BASE.get(name, {}), **kw})


@settings(max_examples=EXAMPLES * SCALE, deadline=None, derandomize=not RANDOM, database=None,
          suppress_health_check=list(HealthCheck))
@given(CASES)
def test_fuzz_every_config_refuses_or_takes_a_value(case):
    name, field, value = case
    try:
        config = _build(name, **{field.name: value})
    except MesadynError:
        return
    except Exception as exc:  # noqa: BLE001 - the property: only the package's error
        pytest.fail(f"{name}.Config({field.name}={value!r}) raised {type(exc).__name__}: {exc}")
    default = field.default
    kind = type(value)
    is_bool = isinstance(value, bool) or kind.__name__ in ("bool", "bool_")
    if isinstance(default, bool):
        assert is_bool, f"{name}.{field.name}={value!r} was taken as a boolean"
    elif isinstance(default, (int, float)) and is_bool:
        pytest.fail(f"{name}.{field.name}={value!r}: a boolean taken as a number")
    assert config is not None


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_numpy_scalars_are_numbers_in_every_config(name):
    """``theory.Config(T=np.int64(20))`` was refused; every numeric field of every Config takes
    numpy integers and floats as the numbers they are, recording the same configuration."""
    base = _build(name)
    for f in _fields(name):
        v = getattr(base, f.name)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        np_v = np.int64(v) if isinstance(v, int) else np.float64(v)
        again = _build(name, **{f.name: np_v})
        assert again.run_config() == base.run_config(), (name, f.name)
