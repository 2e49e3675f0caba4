"""turbodecode: decode-time kernels for LLM inference, from Python.

The same objects and calls as the C++ library (include/turbodecode/): KvCache and append_kv,
plan_decode / run_decode, the row codec, the DeepSeek-V4 hyper-connection operators and the
Q8_0 matvec. Arrays are numpy arrays (CPU) or torch tensors (CPU and CUDA), used in place without
copies. With torch installed, every operator is also ``torch.ops.turbodecode.<name>``, a custom
op that runs on torch's current CUDA stream and works inside torch.compile(fullgraph=True) and
CUDA-graph capture; the functions here route torch tensors through it.

Errors: turbodecode.InvalidArgument (a ValueError) names the argument and the rule, and nothing
was written; a value that is not an array, or has an unsupported dtype, raises TypeError.
"""

from . import _arrays
from ._turbodecode import CudaError, Error, InvalidArgument, cuda_available, cuda_sm_count
from .attention import (
    MAX_QUERY_TOKENS,
    DecodeOptions,
    DecodePlan,
    MaskKind,
    plan_decode,
    run_decode,
)
from .codec import (
    CodecParams,
    RowFormat,
    decode_rows,
    encode_rows,
    format_bits,
    is_quantized,
    is_turboquant,
    norms_per_row,
    rotate_rows,
    row_bytes,
    row_scales,
    unrotate_rows,
)
from .hc import (
    MAX_HC_STREAMS,
    HcParams,
    HcPrePlan,
    hc_collapse,
    hc_expand,
    hc_expand_q8,
    hc_expand_shared_q8,
    hc_head_weights,
    hc_mix_width,
    hc_norm_mix,
    hc_pre,
    hc_rms_norm,
    hc_split,
    hc_split_collapse,
    hc_split_collapse_norm,
    plan_hc_pre,
)
from .kv_cache import (
    PAGE_SIZES,
    KvCache,
    KvCacheConfig,
    LayerKind,
    append_kv,
    bytes_per_position,
    pages_per_slot,
)
from .q8 import q8_matvec, q8_row_bytes, quantize_q8_0

if _arrays.torch is not None:
    from . import _torch_ops  # noqa: F401  (registers torch.ops.turbodecode.*)

__version__ = "0.1.0"
__all__ = [
    "q8_matvec",
    "q8_row_bytes",
    "quantize_q8_0",
    "append_kv",
    "bytes_per_position",
    "CodecParams",
    "cuda_available",
    "cuda_sm_count",
    "CudaError",
    "decode_rows",
    "DecodeOptions",
    "DecodePlan",
    "encode_rows",
    "Error",
    "format_bits",
    "hc_collapse",
    "hc_expand",
    "hc_expand_q8",
    "hc_expand_shared_q8",
    "hc_head_weights",
    "hc_mix_width",
    "hc_norm_mix",
    "hc_pre",
    "hc_rms_norm",
    "hc_split",
    "hc_split_collapse",
    "hc_split_collapse_norm",
    "HcParams",
    "HcPrePlan",
    "InvalidArgument",
    "is_quantized",
    "is_turboquant",
    "KvCache",
    "KvCacheConfig",
    "LayerKind",
    "MaskKind",
    "MAX_HC_STREAMS",
    "MAX_QUERY_TOKENS",
    "norms_per_row",
    "PAGE_SIZES",
    "pages_per_slot",
    "plan_decode",
    "plan_hc_pre",
    "rotate_rows",
    "row_bytes",
    "row_scales",
    "RowFormat",
    "run_decode",
    "unrotate_rows",
]
