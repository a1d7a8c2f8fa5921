"""Test tensors and result checks, shared by the worker emulators and the harness.

Each worker's tensor is a pure function of (seed, rank, size, dtype,
density), so the harness recomputes every input to get the exact sum
without shipping tensors between processes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from p4gen.host import codec

DTYPES = ("float32", "int32")


def make_tensor(rank: int, size: int, dtype: str = "float32", seed: int = 0, density: float = 1.0,
                block: int = 256) -> np.ndarray:
    """Worker ``rank``'s input: N(0, 1) floats (or ints in -1000..1000); with ``density`` < 1,
    each block of ``block`` elements is non-zero with that probability (at least one block is)."""
    rng = np.random.default_rng([seed, rank])
    if dtype == "float32":
        x = rng.standard_normal(size, dtype=np.float32)
    elif dtype == "int32":
        x = rng.integers(-1000, 1001, size, dtype=np.int32)
    else:
        raise ValueError(f"dtype={dtype!r} must be one of {', '.join(DTYPES)}")
    if density < 1.0:
        blocks = -(-size // block)
        keep = rng.random(blocks) < density
        if not keep.any():
            keep[rng.integers(blocks)] = True
        mask = np.repeat(keep, block)[:size]
        x[~mask] = 0
    return x


@dataclass
class Check:
    max_abs_error: float
    max_bound: float          # largest per-element error bound that applied
    within_bound: bool
    exact: bool               # the integer sums are exact (int mode: result == sum; float: dequantised sum of quantised inputs)

    @property
    def correct(self) -> bool:
        return self.within_bound and self.exact


def expected(n: int, size: int, dtype: str, seed: int, density: float, block: int) -> tuple[np.ndarray, list]:
    """(exact float64 / int64 sum, per-worker inputs)."""
    xs = [make_tensor(r, size, dtype, seed, density, block) for r in range(n)]
    total = np.zeros(size, dtype=np.float64 if dtype == "float32" else np.int64)
    for x in xs:
        total += x
    return total, xs


def check_switchml(result: np.ndarray, xs: list[np.ndarray], total: np.ndarray, k: int,
                   value_width: int = 32) -> Check:
    """Check a SwitchML result: error within codec.error_bound per packet, and exact integer sums.

    Float mode: every packet of ``k`` elements is quantised with the maximum exponent over the
    workers (what the switch keeps), so the result must equal the dequantised sum of the
    quantised inputs bit for bit, and lie within the stated bound of the float64 sum.
    Int mode: the wrap-around sum of the inputs, exactly.
    """
    n = len(xs)
    size = total.size
    if not np.issubdtype(xs[0].dtype, np.floating):
        want = (total & ((1 << value_width) - 1)).astype(np.uint64)
        got = np.asarray(result).astype(np.uint64) & np.uint64((1 << value_width) - 1)
        ok = bool(np.array_equal(got, want))
        wrong = int(np.count_nonzero(codec.from_wire(got, value_width) != total))
        return Check(float(wrong), 0.0, ok, ok)
    chunks = -(-size // k)
    pad = chunks * k - size
    emax = None
    for x in xs:
        e = codec.exponent_of(np.pad(x, (0, pad)).reshape(chunks, k), axis=1)
        emax = e if emax is None else np.maximum(emax, e)
    qsum = np.zeros((chunks, k), dtype=np.int64)
    for x in xs:
        qsum += codec.quantize(np.pad(x, (0, pad)).reshape(chunks, k), emax[:, None], n, value_width)
    want = codec.dequantize(qsum, emax[:, None], n, value_width).astype(np.float32).reshape(-1)[:size]
    res = np.asarray(result, dtype=np.float32).reshape(-1)
    exact = bool(np.array_equal(res, want))
    bound = np.repeat(codec.error_bound(emax, n, value_width), k)[:size]
    bound = bound + np.spacing(np.abs(total).astype(np.float32)).astype(np.float64)   # float32 rounding
    err = np.abs(res.astype(np.float64) - total)
    return Check(float(err.max()), float(bound.max()), bool(np.all(err <= bound)), exact)


def check_omnireduce(result: np.ndarray, xs: list[np.ndarray], total: np.ndarray, k: int, streams: int,
                     value_width: int = 32) -> Check:
    """Check an OmniReduce result (``p4gen.host.omni_worker``): exact integer sums, zeros where every worker
    had zeros.

    Float mode: block ``b`` belongs to stream ``b mod streams`` and every block of a stream is
    quantised with one exponent, the maximum over the workers' non-zero blocks of that stream
    (agreed in the stream's discovery round).  So the result must equal the dequantised sum of
    the quantised inputs bit for bit and lie within ``codec.error_bound`` of that exponent.
    Int mode: the wrap-around sum, exactly (as :func:`check_switchml`).
    """
    if not np.issubdtype(xs[0].dtype, np.floating):
        return check_switchml(result, xs, total, k, value_width)
    n = len(xs)
    size = total.size
    blocks = -(-size // k)
    pad = blocks * k - size
    emax = np.full(blocks, codec.EXPONENT_MIN, dtype=np.int64)
    for x in xs:
        emax = np.maximum(emax, codec.exponent_of(np.pad(x, (0, pad)).reshape(blocks, k), axis=1))
    per_stream = np.array([emax[j::streams].max() for j in range(streams)])
    e = per_stream[np.arange(blocks) % streams]
    qsum = np.zeros((blocks, k), dtype=np.int64)
    for x in xs:
        qsum += codec.quantize(np.pad(x, (0, pad)).reshape(blocks, k), e[:, None], n, value_width)
    want = codec.dequantize(qsum, e[:, None], n, value_width).astype(np.float32).reshape(-1)[:size]
    res = np.asarray(result, dtype=np.float32).reshape(-1)
    exact = bool(np.array_equal(res, want))
    bound = np.repeat(codec.error_bound(e, n, value_width), k)[:size]
    bound = bound + np.spacing(np.abs(total).astype(np.float32)).astype(np.float64)
    err = np.abs(res.astype(np.float64) - total)
    zero = np.repeat(~np.any([np.pad(x, (0, pad)).reshape(blocks, k).any(axis=1) for x in xs], axis=0), k)[:size]
    exact = exact and not res[zero].any()
    return Check(float(err.max()), float(bound.max()), bool(np.all(err <= bound)), exact)


def check_float(result: np.ndarray, total: np.ndarray, rtol: float = 1e-5) -> Check:
    """A float all-reduce without a stated bound (Gloo): max abs error, and closeness to the sum."""
    res = np.asarray(result, dtype=np.float64).reshape(-1)
    err = np.abs(res - total)
    bound = rtol * (np.abs(total) + 1.0)
    return Check(float(err.max()), float(bound.max()), bool(np.all(err <= bound)), True)


def save_array(path: str, array: np.ndarray) -> None:
    """``array`` as a .npy file in the network's (private) work directory, written as p4gen writes files."""
    import io

    from p4gen.filewrite import WORK, write_file

    from .errors import TestbedError

    buf = io.BytesIO()
    np.save(buf, array)
    write_file(path, buf.getvalue(), WORK, "result array", TestbedError)
