// The whole public API of turbodecode.
#pragma once

#include "turbodecode/attention.h"       // plan_decode / run_decode
#include "turbodecode/buffer.h"          // Buffer, cuda_available, synchronize
#include "turbodecode/error.h"           // Error, InvalidArgument, CudaError
#include "turbodecode/f16.h"             // f32 <-> f16 / bf16 on the host
#include "turbodecode/hc.h"              // DeepSeek-V4 hyper-connection operators
#include "turbodecode/io.h"              // .npy / .safetensors files
#include "turbodecode/kv_cache.h"        // KvCache, append_kv
#include "turbodecode/mask_kind.h"       // MaskKind, visible_positions
#include "turbodecode/q8.h"              // Q8_0 matvec and its HC fusions
#include "turbodecode/sharded_decode.h"  // merge_attention, Communicator
#include "turbodecode/tensor.h"          // TensorView, DType, Device, Stream, cpu_threads
#include "turbodecode/tq_codec.h"        // TurboQuant-HB codec
