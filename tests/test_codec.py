"""Block floating point codec: exponent, no-overflow and error-bound properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from p4gen.host import codec
from p4gen.errors import P4genError
from p4gen.spec import MAX_WORKERS

FINITE32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
BLOCK = hnp.arrays(np.float32, st.integers(1, 64), elements=FINITE32)


@given(BLOCK)
def test_exponent_is_the_smallest_bound(x):
    e = codec.exponent_of(x)
    m = float(np.max(np.abs(x.astype(np.float64))))
    assert codec.EXPONENT_MIN <= e <= codec.EXPONENT_MAX
    assert m < 2.0 ** e
    if e > codec.EXPONENT_MIN:
        assert m >= 2.0 ** (e - 1)
    assert codec.exponent_field(x) == e + codec.EXPONENT_BIAS
    assert 0 <= codec.exponent_field(x) <= 255
    assert codec.field_exponent(codec.exponent_field(x)) == e


def test_exponent_examples():
    assert codec.exponent_of(np.zeros(4, np.float32)) == -127
    assert codec.exponent_of(np.array([1.0], np.float32)) == 1
    assert codec.exponent_of(np.array([0.75, -0.5], np.float32)) == 0
    assert codec.exponent_of(np.array([-3.0e38], np.float32)) == 128
    assert codec.exponent_of(np.array([[1, 3], [0, 0.1]]), axis=1).tolist() == [2, -3]
    assert codec.scale(0, 1, 32) == 2 ** 31 - 1
    assert codec.limit(3, 16) == 32767 // 3


@pytest.mark.slow
@given(n=st.integers(1, MAX_WORKERS), width=st.sampled_from([16, 32]), data=st.data())
def test_sum_never_overflows_and_meets_the_bound(n, width, data):
    size = data.draw(st.integers(1, 16))
    xs = list(data.draw(hnp.arrays(np.float32, (n, size), elements=FINITE32)))
    e = max(codec.exponent_of(x) for x in xs)
    qs = [codec.quantize(x, e, n, width) for x in xs]
    lim = codec.limit(n, width)
    assert all(np.abs(q.astype(np.int64)).max() <= lim for q in qs)
    exact_q = np.sum([q.astype(np.int64) for q in qs], axis=0)
    assert np.abs(exact_q).max() <= 2 ** (width - 1) - 1           # no overflow by construction
    wire = np.zeros(size, dtype=np.uint64)
    for q in qs:                                                    # what the switch does
        wire = (wire + codec.to_wire(q, width).astype(np.uint64)) & np.uint64((1 << width) - 1)
    q_sum = codec.from_wire(wire, width)
    assert np.array_equal(q_sum, exact_q)
    got = codec.dequantize(q_sum, e, n, width)
    exact = np.sum([x.astype(np.float64) for x in xs], axis=0)
    bound = codec.error_bound(e, n, width)
    assert bound == pytest.approx(n * n * 2.0 ** e / (2 ** (width - 1) - 1))
    assert np.all(np.abs(got - exact) < bound)


@given(st.integers(-127, 127), st.integers(1, MAX_WORKERS))
def test_bound_formula(e, n):
    assert codec.error_bound(e, n) == pytest.approx(n / codec.scale(e, n))


@pytest.mark.parametrize("bad", [np.array([1.0, np.nan], np.float32), np.array([np.inf], np.float32),
                                 np.array([], np.float32)])
def test_non_finite_and_empty_raise(bad):
    with pytest.raises(codec.CodecError) as exc:
        codec.quantize(bad, 0, 2)
    assert isinstance(exc.value, P4genError) and "\n" not in str(exc.value)
    with pytest.raises(codec.CodecError):
        codec.exponent_of(bad)


def test_bad_parameters_raise():
    with pytest.raises(codec.CodecError):
        codec.scale(0, 0)
    with pytest.raises(codec.CodecError):
        codec.scale(0, 2, 24)
    with pytest.raises(codec.CodecError):
        codec.scale(200, 2)
    with pytest.raises(codec.CodecError):
        codec.field_exponent(300)
