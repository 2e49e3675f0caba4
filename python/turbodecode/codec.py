"""Row formats and the row codec (tq_codec.h; SPEC §1.2, §1.5, §1.6).

FP8 E4M3 rows carry one f32 scale; TurboQuant-HB rows (random signs + Walsh-Hadamard rotation
R_D, per-row norms, Lloyd-Max codebook indices, bit-packed) decode into the rotated basis.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from . import _arrays
from . import _turbodecode as _ext
from ._enums import as_member, name_of


class RowFormat(str, enum.Enum):
    """How one cache row is stored. Anywhere a format is taken, its name works too ("tq8")."""

    f16 = "f16"  #: D half floats
    fp8 = "fp8"  #: D E4M3 bytes (torch.float8_e4m3fn) + one f32 scale; not rotated
    tq3 = "tq3"  #: TurboQuant-HB, 3-bit codes (bit-packed) + f32 norms
    tq4 = "tq4"  #: 4-bit codes, nibble-packed
    tq5 = "tq5"  #: 5-bit codes, bit-packed
    tq6 = "tq6"  #: 6-bit codes, bit-packed
    tq8 = "tq8"  #: 8-bit codes, one byte each


def is_quantized(format: RowFormat | str) -> bool:
    """Not f16: the row has f32 side values (FP8 scale or TQ norms) beside its bytes."""
    return _ext.is_quantized(name_of(format))


def is_turboquant(format: RowFormat | str) -> bool:
    """A TurboQuant-HB format (tq3 … tq8): rotated codes and norms."""
    return _ext.is_turboquant(name_of(format))


def format_bits(format: RowFormat | str) -> int:
    """16 for f16, 8 for fp8, b for tqb."""
    return _ext.format_bits(name_of(format))


def row_bytes(format: RowFormat | str, head_dim: int) -> int:
    """Bytes of one stored row of ``head_dim`` elements: 2·D (f16), D (fp8, tq8), b·D/8 (tqb)."""
    return _ext.row_bytes(name_of(format), head_dim)


def norms_per_row(head_dim: int) -> int:
    """f32 norms of one TQ row: 1 for D = 256, 2 for D = 512 (one per half)."""
    return _ext.norms_per_row(head_dim)


def row_scales(format: RowFormat | str, head_dim: int) -> int:
    """f32 side values per row: 0 (f16), 1 (fp8: the scale), norms_per_row(D) (TQ)."""
    return _ext.row_scales(name_of(format), head_dim)


@dataclass(frozen=True)
class CodecParams:
    """Parameters of encode_rows / decode_rows."""

    head_dim: int = 256  #: 256 or 512
    format: RowFormat | str = RowFormat.tq8  #: a quantized format
    scale_factor_d512: float = 1.0  #: ``sf`` of SPEC §1.2, D = 512 TQ only
    #: Bytes of one encoded row, and its f32 side values (norms or the FP8 scale).
    row_bytes: int = field(init=False, repr=False, compare=False)
    row_scales: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "format", as_member(RowFormat, self.format))
        object.__setattr__(self, "row_bytes", row_bytes(self.format, self.head_dim))
        object.__setattr__(self, "row_scales", row_scales(self.format, self.head_dim))


def encode_rows(params: CodecParams, x: Any, codes: Any = None,
                norms: Any = None) -> tuple[Any, Any]:
    """Encodes rows: x [rows, D] float32/float16/bfloat16 -> (codes [rows, row_bytes] uint8,
    norms [rows, row_scales] float32: the TQ norms or the FP8 scale). Outputs not given are
    allocated like ``x``; the given ones are written in place."""
    rows = _arrays.shape(x, "x")[0]
    if codes is None:
        codes = _arrays.empty(x, (rows, params.row_bytes), "uint8")
    if norms is None:
        norms = _arrays.empty(x, (rows, params.row_scales), "float32")
    _arrays.call("encode_rows", x, params.head_dim, name_of(params.format),
                 params.scale_factor_d512, x, codes, norms)
    return codes, norms


def decode_rows(params: CodecParams, codes: Any, norms: Any, y: Any = None) -> Any:
    """Decodes rows: codes + norms -> y [rows, D] float32; for TQ the decoded row in the ROTATED
    basis (ŷ ≈ R_D x; unrotate_rows recovers x̂), for FP8 the row itself."""
    if y is None:
        y = _arrays.empty(codes, (_arrays.shape(codes, "codes")[0], params.head_dim), "float32")
    _arrays.call(
        "decode_rows", codes, params.head_dim, name_of(params.format),
        params.scale_factor_d512, codes, norms, y,
    )
    return y


def rotate_rows(head_dim: int, x: Any, y: Any = None) -> Any:
    """y = R_D(x) for rows of D float32 values; ``y`` may be ``x`` (in place)."""
    if y is None:
        y = _arrays.empty(x, _arrays.shape(x, "x"), "float32")
    _arrays.call("rotate_rows", x, head_dim, x, y)
    return y


def unrotate_rows(head_dim: int, y: Any, x: Any = None) -> Any:
    """x = R_D⁻¹(y) for rows of D float32 values; ``x`` may be ``y`` (in place)."""
    if x is None:
        x = _arrays.empty(y, _arrays.shape(y, "y"), "float32")
    _arrays.call("unrotate_rows", y, head_dim, y, x)
    return x
