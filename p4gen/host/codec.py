"""Block floating point codec for float32 tensors (SwitchML fixed point).

A block (one packet's worth of elements) travels as ``value_width``-bit
signed integers plus one 8-bit biased exponent.  The formulas, which the
Z3 proofs in ``verify/`` restate exactly:

* ``exponent_of(block)``: the smallest integer ``e`` with ``max|x| < 2**e``
  (``np.frexp`` of ``max|x|``), clipped to ``-127..128``; an all-zero block
  gives ``-127``.  Clipping from below keeps ``max|x| < 2**e`` true; float32
  magnitudes are below ``2**128`` so the upper clip never binds.  The header
  field is ``e + EXPONENT_BIAS`` (``0..255``).  Its top value
  ``EXPONENT_FLAG = 255`` (``e = 128``, a block with ``max|x| >= 2**127``)
  doubles as the flag of a tensor that holds NaN or Inf
  (``Worker(flag=True)``): since the switch keeps the maximum, one flagged
  worker flags the result for all of them.  ``p4gen.torch`` skips the
  update of a flagged bucket, so it treats a gradient of magnitude
  ``>= 2**127`` as an overflow, as it does Inf.
* ``scale(e_max, n, w) = (2**(w-1) - 1) / (n * 2**e_max)``.
* ``quantize(x, e_max, n, w) = clip(rint(x * scale), -L, L)`` with
  ``L = floor((2**(w-1) - 1) / n)``, so the sum of ``n`` quantised values is
  at most ``n * L <= 2**(w-1) - 1`` in magnitude: the switch's w-bit
  wrap-around sum never overflows.
* ``dequantize(q_sum, e_max, n, w) = q_sum / scale``.

Error bound.  If every worker's block satisfies ``max|x| < 2**e_max`` (that
is, ``exponent_of(x) <= e_max``), each quantised element is within less than
one unit of ``x * scale`` (rounding: at most 1/2; clipping, which only binds
when ``x * scale`` lies in ``(L, (2**(w-1)-1)/n)``: less than 1).  Hence,
per element of the sum over ``n`` workers::

    |sum(q) / scale - sum(x)| < n / scale = n**2 * 2**e_max / (2**(w-1) - 1)

which :func:`error_bound` returns.  The result of :func:`dequantize` is
float64; casting it to float32 adds at most half a float32 ulp.
"""

from __future__ import annotations

import numpy as np

from ..errors import P4genError

EXPONENT_BIAS = 127
EXPONENT_MIN = -127          # all-zero blocks; field value 0
EXPONENT_MAX = 128           # field value 255
EXPONENT_FLAG = EXPONENT_MAX + EXPONENT_BIAS   # 255: also the NaN/Inf flag (see above)
VALUE_WIDTHS = (16, 32)

__all__ = [
    "EXPONENT_BIAS", "EXPONENT_MIN", "EXPONENT_MAX", "EXPONENT_FLAG", "CodecError",
    "exponent_of", "exponent_field", "field_exponent", "limit", "scale",
    "quantize", "dequantize", "error_bound", "to_wire", "from_wire",
]


class CodecError(P4genError):
    """A tensor or codec parameter cannot be encoded (NaN, Inf, empty, bad n or width)."""


def _check_width(value_width: int) -> int:
    if value_width not in VALUE_WIDTHS:
        raise CodecError(f"value_width={value_width!r} must be one of {', '.join(map(str, VALUE_WIDTHS))}")
    return value_width


def _check_n(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise CodecError(f"n={n!r} workers must be an integer >= 1")
    return int(n)


def check_tensor(x) -> np.ndarray:
    """``x`` as a float array; CodecError for an empty tensor or one that holds NaN or Inf."""
    a = np.asarray(x)
    if a.size == 0:
        raise CodecError("cannot encode an empty tensor")
    if not np.issubdtype(a.dtype, np.floating):
        a = a.astype(np.float32)
    if not np.isfinite(a).all():
        bad = "NaN" if np.isnan(a).any() else "Inf"
        raise CodecError(f"cannot encode a tensor holding {bad}; only finite values have a block exponent")
    return a


def exponent_of(block, axis=None):
    """Smallest integer e with max|x| < 2**e, clipped to -127..128.

    ``axis=None`` reduces the whole block to one int; an integer axis gives
    one exponent per block along that axis (an int array).
    """
    a = check_tensor(block)
    m = np.max(np.abs(a), axis=axis)
    _, e = np.frexp(np.asarray(m, dtype=np.float64))
    e = np.where(m == 0, EXPONENT_MIN, e)
    e = np.clip(e, EXPONENT_MIN, EXPONENT_MAX).astype(np.int64)
    return int(e) if np.ndim(e) == 0 else e


def exponent_field(block, axis=None):
    """The 8-bit header value: exponent_of(block) + 127 (0..255)."""
    e = exponent_of(block, axis=axis)
    return e + EXPONENT_BIAS


def field_exponent(field):
    """Inverse of :func:`exponent_field`: field value (0..255) -> exponent."""
    f = np.asarray(field, dtype=np.int64)
    if np.any((f < 0) | (f > 255)):
        raise CodecError(f"exponent field {field!r} must be in 0..255")
    e = f - EXPONENT_BIAS
    return int(e) if np.ndim(e) == 0 else e


def _check_exponent(e_max) -> np.ndarray:
    e = np.asarray(e_max)
    if not np.issubdtype(e.dtype, np.integer):
        if not np.all(np.isfinite(e)) or np.any(e != np.floor(e)):
            raise CodecError(f"e_max={e_max!r} must be an integer exponent")
        e = e.astype(np.int64)
    if np.any((e < EXPONENT_MIN) | (e > EXPONENT_MAX)):
        raise CodecError(f"e_max={e_max!r} must be in {EXPONENT_MIN}..{EXPONENT_MAX}")
    return e.astype(np.int64)


def limit(n: int, value_width: int = 32) -> int:
    """L = floor((2**(w-1) - 1) / n): the largest magnitude one worker may send."""
    _check_width(value_width)
    return ((1 << (value_width - 1)) - 1) // _check_n(n)


def scale(e_max, n: int, value_width: int = 32):
    """(2**(w-1) - 1) / (n * 2**e_max), as float64 (array if e_max is an array)."""
    _check_width(value_width)
    n = _check_n(n)
    e = _check_exponent(e_max)
    s = np.ldexp(float((1 << (value_width - 1)) - 1) / n, -e)
    return float(s) if np.ndim(s) == 0 else s


def quantize(x, e_max, n: int, value_width: int = 32) -> np.ndarray:
    """clip(rint(x * scale), -L, L) as signed integers of the value width.

    ``e_max`` is a scalar or an array broadcastable against ``x`` (e.g. one
    exponent per block with shape ``(blocks, 1)``).  It must be at least
    ``exponent_of`` of the data for :func:`error_bound` to hold; larger
    values saturate at +-L.
    """
    a = check_tensor(x)
    s = scale(e_max, n, value_width)
    lim = limit(n, value_width)
    q = np.rint(a.astype(np.float64) * s)
    np.clip(q, -lim, lim, out=q)
    return q.astype(np.int32 if value_width == 32 else np.int16)


def dequantize(q_sum, e_max, n: int, value_width: int = 32) -> np.ndarray:
    """q_sum / scale as float64 (q_sum: the switch's sum read as signed integers)."""
    s = scale(e_max, n, value_width)
    return np.asarray(q_sum, dtype=np.float64) / s


def error_bound(e_max, n: int, value_width: int = 32):
    """n / scale = n**2 * 2**e_max / (2**(w-1) - 1): strict bound per element of the sum."""
    n = _check_n(n)
    s = scale(e_max, n, value_width)
    return n / s


def to_wire(q, value_width: int = 32) -> np.ndarray:
    """Signed integers -> unsigned two's complement of the value width (as on the wire)."""
    _check_width(value_width)
    a = np.asarray(q)
    if value_width == 32:
        return (a.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32)
    return (a.astype(np.int64) & 0xFFFF).astype(np.uint16)


def from_wire(u, value_width: int = 32) -> np.ndarray:
    """Unsigned wire values (the switch's wrap-around sums) -> signed int64."""
    _check_width(value_width)
    a = np.asarray(u).astype(np.int64) & ((1 << value_width) - 1)
    half = 1 << (value_width - 1)
    return np.where(a >= half, a - (1 << value_width), a)
