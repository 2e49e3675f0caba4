// run_sharded_decode (SPEC §2.10): this rank's decode with lse over its share, an all-gather of
// every rank's (out, lse), and the merge of all of them, on one stream.
#include <cstdint>
#include <string>
#include <utility>

#include "common/validate.h"
#include "turbodecode/sharded_decode.h"

namespace turbodecode {
namespace {

constexpr std::int64_t kAlignBytes = 256;

std::int64_t aligned(std::int64_t bytes) {
  return (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
}

// Workspace (choice): run_decode's workspace, then this rank's partial result, then every
// rank's, gathered. A partial result of n rows is n·H·D outputs followed by n·H lse values, so
// one all-gather moves both.
struct ShardedLayout {
  std::int64_t decode_bytes, partial_bytes;

  explicit ShardedLayout(const DecodePlan& plan)
      : decode_bytes(aligned(plan.workspace_bytes)),
        partial_bytes(
            aligned(plan.max_queries * plan.options.n_heads * (plan.cache.head_dim + 1) * 4)) {}
  std::int64_t bytes(int ranks) const { return decode_bytes + partial_bytes * (1 + ranks); }
};

}  // namespace

std::int64_t sharded_decode_workspace_bytes(const DecodePlan& plan, int ranks) {
  check_arg(ranks >= 1, "ranks", "must be >= 1");
  return ShardedLayout(plan).bytes(ranks);
}

void run_sharded_decode(const DecodePlan& plan, const KvCacheView& cache, const TensorView& q,
                        const TensorView& slot_ids, const TensorView& seq_pos,
                        const DecodeShard& shard, const TensorView& out, const TensorView& lse,
                        const TensorView& workspace, Communicator& communicator, Stream stream) {
  const int ranks = communicator.ranks();
  const Device device = plan.cache.device;
  check_arg(
      communicator.device() == device, "communicator",
      std::string("must exchange tensors on the cache's device (") + device_name(device) + ")");
  check_rows(workspace, "workspace", device, DType::u8, {kAnyExtent});
  const ShardedLayout layout(plan);
  check_arg(workspace.shape[0] >= layout.bytes(ranks), "workspace",
            "must hold sharded_decode_workspace_bytes(plan, " + std::to_string(ranks) +
                ") = " + std::to_string(layout.bytes(ranks)) + " bytes");
  check_rows(q, "q", device, DType::f32, {kAnyExtent, plan.options.n_heads, plan.cache.head_dim});
  // The merge reads the workspace after the decode: nothing else it reads or writes may lie there.
  const std::pair<const TensorView*, const char*> others[] = {
      {&q, "q"}, {&slot_ids, "slot_ids"}, {&seq_pos, "seq_pos"}, {&out, "out"}, {&lse, "lse"}};
  for (const auto& [other, name] : others) check_disjoint(workspace, "workspace", *other, name);
  const std::int64_t n = q.shape[0], heads = plan.options.n_heads, dim = plan.cache.head_dim;
  const std::int64_t count = n * heads * (dim + 1);  // floats of one rank's partial result

  auto* base = static_cast<unsigned char*>(workspace.data);
  const auto floats = [&](std::int64_t offset) { return reinterpret_cast<float*>(base + offset); };
  float* partial = floats(layout.decode_bytes);
  float* gathered = floats(layout.decode_bytes + layout.partial_bytes);
  const TensorView decode_workspace =
      TensorView::contiguous(base, DType::u8, {layout.decode_bytes}, device);
  run_decode(plan, cache, q, slot_ids, seq_pos, shard,
             TensorView::contiguous(partial, DType::f32, {n, heads, dim}, device),
             TensorView::contiguous(partial + n * heads * dim, DType::f32, {n, heads}, device),
             decode_workspace, stream);
  communicator.all_gather(TensorView::contiguous(partial, DType::f32, {count}, device),
                          TensorView::contiguous(gathered, DType::f32, {ranks, count}, device),
                          stream);
  TensorView parts_out =
      TensorView::contiguous(gathered, DType::f32, {ranks, n, heads, dim}, device);
  parts_out.strides[0] = count;
  TensorView parts_lse =
      TensorView::contiguous(gathered + n * heads * dim, DType::f32, {ranks, n, heads}, device);
  parts_lse.strides[0] = count;
  merge_attention(parts_out, parts_lse, out, lse, stream);
}

}  // namespace turbodecode
