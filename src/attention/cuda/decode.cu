// CUDA backend of plan_decode and run_decode: the chunk policy and persistent grid for the
// device, the workspace, and the kernel arguments resolved from the validated views.
#include <algorithm>
#include <bit>
#include <cstdint>

#include "attention/cuda/decode_cuda.h"
#include "attention/cuda/decode_launch.h"
#include "attention/cuda/decode_params.cuh"
#include "attention/cuda/decode_shape.h"
#include "common/cuda/cuda_check.cuh"
#include "common/cuda_runtime.h"
#include "common/validate.h"

namespace turbodecode::cuda {
namespace {

using decode::DecodeParams;

int run_columns(const DecodePlan& plan) {
  return plan.options.query_tokens * (plan.options.n_heads / plan.cache.n_kv_heads);
}

decode::DecodeKernel kernel_of(const DecodePlan& plan) {
  return decode::select_decode_kernel(plan.cache.head_dim,
                                      decode::columns_per_block(run_columns(plan)),
                                      plan.cache.k_format, plan.cache.v_format);
}

struct TaskShape {
  std::int64_t tasks;
  int task_chunks;
  int task_groups;
  int columns;
  int column_chunks;
  int parts_per_run;
};

TaskShape task_shape(const DecodePlan& plan) {
  TaskShape t{};
  const int q = plan.options.query_tokens;
  t.columns = decode::columns_per_block(run_columns(plan));
  t.column_chunks = (run_columns(plan) + t.columns - 1) / t.columns;
  t.parts_per_run = q > 1 ? 2 : 1;
  const std::int64_t runs = (plan.max_queries + q - 1) / q;
  t.tasks = runs * t.parts_per_run * plan.cache.n_kv_heads * t.column_chunks;
  // A part's rows see at most longest + q − 1 positions together: one chunk more than a row.
  t.task_chunks = plan.max_chunks + 1;
  const int group = decode::merge_group(plan.cache.head_dim);
  t.task_groups = (t.task_chunks + group - 1) / group + 1;
  return t;
}

decode::CacheSide cache_side(RowFormat format, const TensorView& rows, const TensorView& scales,
                             const char* name) {
  const auto element = static_cast<std::int64_t>(dtype_bytes(rows.dtype));
  bool aligned = reinterpret_cast<std::uintptr_t>(rows.data) % 16 == 0;
  for (int dim = 0; dim < 3; ++dim) aligned = aligned && (rows.strides[dim] * element) % 16 == 0;
  check_arg(aligned, name, "CUDA decode needs 16-byte aligned rows and row strides");
  decode::CacheSide side;
  side.rows = static_cast<const unsigned char*>(rows.data);
  side.page_bytes = rows.strides[0] * element;
  side.head_bytes = rows.strides[1] * element;
  side.row_bytes = rows.strides[2] * element;
  if (is_quantized(format)) {
    side.scales = static_cast<const float*>(scales.data);
    side.scale_page = scales.strides[0];
    side.scale_head = scales.strides[1];
    side.scale_row = scales.strides[2];
    side.bits = format_bits(format);
  }
  return side;
}

DecodeParams make_params(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                         const TensorView& slot_ids, const TensorView& seq_pos,
                         const DecodeShard& shard, const TensorView& out, const TensorView& lse,
                         const TensorView& workspace) {
  const KvCacheConfig& config = plan.cache;
  const TaskShape shape = task_shape(plan);
  DecodeParams p;
  p.k = cache_side(config.k_format, cache.k, cache.k_norms, "cache.k");
  p.v = cache_side(config.v_format, cache.v, cache.v_norms, "cache.v");
  if (config.page_size > 0) {
    p.block_table = cache.block_table.as<const std::int32_t>();
    p.table_stride = cache.block_table.strides[0];
    p.page_shift = std::countr_zero(static_cast<unsigned>(config.page_size));
    p.pages = config.pages;
  } else {
    p.pages = config.slots;
  }
  p.slots = config.slots;
  p.capacity = config.capacity;
  p.ring = config.kind == LayerKind::ring;
  p.mask = plan.options.mask;
  p.sliding_window = plan.options.sliding_window;
  p.q = q.as<const float>();
  p.q_stride[0] = q.strides[0];
  p.q_stride[1] = q.strides[1];
  p.slot_ids = slot_ids.as<const std::int32_t>();
  p.seq_pos = seq_pos.as<const std::int32_t>();
  p.slot_stride = slot_ids.strides[0];
  p.pos_stride = seq_pos.strides[0];
  if (shard.begin.present()) {
    p.shard_begin = shard.begin.as<const std::int32_t>();
    p.shard_end = shard.end.as<const std::int32_t>();
    p.shard_begin_stride = shard.begin.strides[0];
    p.shard_end_stride = shard.end.strides[0];
  }
  p.out = out.as<float>();
  p.out_stride[0] = out.strides[0];
  p.out_stride[1] = out.strides[1];
  if (lse.present()) {
    p.lse = lse.as<float>();
    p.lse_stride[0] = lse.strides[0];
    p.lse_stride[1] = lse.strides[1];
  }
  p.n_rows = static_cast<int>(q.shape[0]);
  p.query_tokens = plan.options.query_tokens;
  p.n_runs = p.n_rows / p.query_tokens;
  p.parts_per_run = shape.parts_per_run;
  p.n_heads = plan.options.n_heads;
  p.n_kv_heads = config.n_kv_heads;
  p.group = plan.options.n_heads / config.n_kv_heads;
  p.columns = shape.columns;
  p.tile = decode::tile_positions(config.head_dim);
  p.column_chunks = shape.column_chunks;
  p.chunk_policy = {plan.min_chunk_positions, plan.max_chunks, plan.spread_chunk_positions,
                    plan.options.fixed_chunk_positions};
  p.task_chunks = shape.task_chunks;
  p.task_groups = shape.task_groups;
  p.blocks = plan.device_blocks;
  const decode::WorkspaceLayout layout(shape.tasks, shape.task_chunks, shape.task_groups,
                                       shape.columns, config.head_dim);
  auto* base = workspace.as<unsigned char>();
  p.counters = reinterpret_cast<unsigned*>(base);
  base += layout.counter_bytes;
  p.state_ml = reinterpret_cast<float2*>(base);
  base += layout.state_ml_bytes;
  p.state_o = reinterpret_cast<float*>(base);
  base += layout.state_o_bytes;
  p.group_ml = reinterpret_cast<float2*>(base);
  base += layout.group_ml_bytes;
  p.group_o = reinterpret_cast<float*>(base);
  p.scale = plan.options.scale;
  p.softcap = plan.options.softcap;
  p.scale_factor_d512 = config.scale_factor_d512;
  p.unrotate_output = is_turboquant(config.v_format) && !plan.options.rotated_output;
  return p;
}

}  // namespace

// Chunks of 128 positions (4 tiles at D 256, 8 at D 512) for rows of up to 4K positions, so
// that a lone short query spreads over the SMs; longer rows keep 32 chunks of up to 1024
// positions at D 256 (256 at 8K, 512 at 16K, 1024 from 32K) and up to 512 at D 512, and beyond
// that at most 1024 chunks. 32 chunks of each of 8 KV heads (256 work items) are fewer than
// the device holds blocks, so a lone row is one wave; more, shorter chunks cost their states
// and merges. At D 512 (2 KV heads) a lone row wants more chunks and a batch longer ones; the
// size depends on a row's own length only (batch invariance), so D 512 keeps the 512 cap
// between the two. The sweeps behind these sizes: docs/cuda-attention-design.md.
attention::ChunkLimits chunk_limits(int head_dim) {
  return attention::ChunkLimits{128, 1025, head_dim == 256 ? 1024 : 512};
}

void plan_decode(DecodePlan& plan) {
  const decode::DecodeKernel kernel = kernel_of(plan);
  int resident = 0;
  TD_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &resident, kernel.function, decode::kBlockThreads, kernel.shared_bytes));
  plan.device_blocks = sm_count() * std::max(resident, 1);
  const TaskShape shape = task_shape(plan);
  plan.workspace_bytes = decode::WorkspaceLayout(shape.tasks, shape.task_chunks, shape.task_groups,
                                                 shape.columns, plan.cache.head_dim)
                             .bytes();
}

void run_decode(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                const TensorView& slot_ids, const TensorView& seq_pos, const DecodeShard& shard,
                const TensorView& out, const TensorView& lse, const TensorView& workspace,
                Stream stream) {
  // The kernels index rows with 32-bit arithmetic.
  check_arg(plan.cache.capacity <= (std::int64_t{1} << 30), "cache.capacity",
            "the CUDA backend supports at most 2^30 positions per slot");
  const DecodeParams p = make_params(plan, cache, q, slot_ids, seq_pos, shard, out, lse, workspace);
  kernel_of(plan).launch(p, native(stream));
}

}  // namespace turbodecode::cuda
