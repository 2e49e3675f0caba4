"""Q8_0 weights (q8.h; SPEC §1.4): blocks of 32 weights, an f16 scale d then 32 int8 q."""

from __future__ import annotations

from typing import Any

from . import _arrays
from . import _turbodecode as _ext

Q8_BLOCK_VALUES = _ext.Q8_BLOCK_VALUES
Q8_BLOCK_BYTES = _ext.Q8_BLOCK_BYTES


def q8_row_bytes(cols: int) -> int:
    """Bytes of one Q8_0 row of ``cols`` weights (a multiple of 32)."""
    return _ext.q8_row_bytes(cols)


def quantize_q8_0(src: Any, dst: Any = None) -> Any:
    """f32 rows [rows, cols] -> Q8_0 uint8 [rows, q8_row_bytes(cols)], on the CPU:
    d = max|x| / 127 (as f16), q = round(x / d)."""
    if dst is None:
        rows, cols = _arrays.shape(src, "src")[:2]
        dst = _arrays.empty(src, (rows, q8_row_bytes(cols)), "uint8")
    _arrays.call("quantize_q8_0", src, src, dst)
    return dst


def q8_matvec(weight: Any, input: Any, out: Any = None) -> Any:
    """out[t][r] = Σ_j weight[r][j]·input[t][j]: weight uint8 [rows, q8_row_bytes(cols)],
    input [T, cols] float32 -> out [T, rows] float32."""
    if out is None:
        rows = _arrays.shape(weight, "weight")[0]
        out = _arrays.empty(input, (_arrays.shape(input, "input")[0], rows), "float32")
    _arrays.call("q8_matvec", input, weight, input, out)
    return out
