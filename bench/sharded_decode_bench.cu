// Sharded decode (SPEC §2.10) over R = 1, 2, … ranks on the same total context: each rank
// holds L / R of every slot's positions and runs run_sharded_decode (decode with lse over its
// share, all-gather, merge) from its own thread. Ranks are the GPUs 0..R−1 through NCCL
// (--communicator nccl, in a build with NCCL) or R streams of the current GPU in one process
// (--communicator local: the sharding's own cost, no speed-up to expect). Times are medians of
// host wall time per step (a barrier, every rank's launches, every rank's stream synchronised),
// beside the unsharded run_decode on one GPU at the same L. The caches far exceed L2.
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpu_timing.cuh"
#include "turbodecode/attention.h"
#include "turbodecode/buffer.h"
#include "turbodecode/sharded_decode.h"

#ifdef TURBODECODE_WITH_NCCL
#include "turbodecode/nccl_communicator.h"
#endif

namespace turbodecode::bench {
namespace {

struct Settings {
  std::string communicator = "local";
  std::vector<int> ranks = {1, 2};
  std::int64_t length = 1 << 20;
  std::int64_t batch = 1;
  int heads = 16, kv_heads = 8, dim = 256;
  RowFormat k_format = RowFormat::f16, v_format = RowFormat::tq8;
  int steps = 30;
};

// One rank's cache (L / R positions of every slot, random bytes), shard ranges and buffers.
struct Rank {
  Rank(const Settings& s, int rank, int ranks, int device) {
    TD_CUDA_CHECK(cudaSetDevice(device));
    TD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const std::int64_t share = (s.length + ranks - 1) / ranks;
    KvCacheConfig config{.slots = s.batch,
                         .n_kv_heads = s.kv_heads,
                         .capacity = share,
                         .head_dim = s.dim,
                         .k_format = s.k_format,
                         .v_format = s.v_format,
                         .device = Device::cuda};
    cache = std::make_unique<KvCache>(config);
    // F16 rows and norms uniform in [-1, 1), codes one byte pattern: timing does not depend on
    // the values.
    for (const TensorView& part :
         {cache->view().k, cache->view().k_norms, cache->view().v, cache->view().v_norms}) {
      if (!part.present()) continue;
      if (part.dtype == DType::u8) {
        TD_CUDA_CHECK(cudaMemset(part.data, 0x5a, static_cast<std::size_t>(part.span_bytes())));
      } else {
        fill_uniform(part.data, part.dtype, part.numel(), 0x5eed + rank, nullptr);
      }
    }
    TD_CUDA_CHECK(cudaDeviceSynchronize());  // the fills ran on the default stream
    plan = plan_decode(config, {.n_heads = s.heads}, s.batch);
    std::vector<std::int32_t> slots, positions, begin, end;
    for (std::int64_t b = 0; b < s.batch; ++b) {
      slots.push_back(static_cast<std::int32_t>(b));
      positions.push_back(static_cast<std::int32_t>(s.length - 1));
      begin.push_back(static_cast<std::int32_t>(share * rank));
      end.push_back(rank + 1 == ranks ? INT32_MAX : static_cast<std::int32_t>(share * (rank + 1)));
    }
    const auto upload = [&](const std::vector<std::int32_t>& v) {
      Buffer b(Device::cuda, static_cast<std::int64_t>(v.size()) * 4);
      b.copy_from_host(v.data(), b.bytes());
      return b;
    };
    slot_ids = upload(slots);
    seq_pos = upload(positions);
    shard_begin = upload(begin);
    shard_end = upload(end);
    q = Buffer(Device::cuda, s.batch * s.heads * s.dim * 4);
    fill_uniform(q.data(), DType::f32, s.batch * s.heads * s.dim, 7, nullptr);
    out = Buffer(Device::cuda, s.batch * s.heads * s.dim * 4);
    workspace = Buffer(Device::cuda, sharded_decode_workspace_bytes(plan, ranks));
    workspace.fill_bytes(0);
  }

  void run(const Settings& s, Communicator& communicator) const {
    run_sharded_decode(
        plan, cache->view(), q.view(DType::f32, {s.batch, s.heads, s.dim}),
        slot_ids.view(DType::i32, {s.batch}), seq_pos.view(DType::i32, {s.batch}),
        {shard_begin.view(DType::i32, {s.batch}), shard_end.view(DType::i32, {s.batch})},
        out.view(DType::f32, {s.batch, s.heads, s.dim}), {},
        workspace.view(DType::u8, {workspace.bytes()}), communicator, Stream{stream});
  }
  void run_unsharded(const Settings& s) const {
    run_decode(plan, cache->view(), q.view(DType::f32, {s.batch, s.heads, s.dim}),
               slot_ids.view(DType::i32, {s.batch}), seq_pos.view(DType::i32, {s.batch}),
               out.view(DType::f32, {s.batch, s.heads, s.dim}),
               workspace.view(DType::u8, {plan.workspace_bytes}), Stream{stream});
  }

  cudaStream_t stream{};
  std::unique_ptr<KvCache> cache;
  DecodePlan plan;
  Buffer slot_ids, seq_pos, shard_begin, shard_end, q, out, workspace;
};

std::vector<std::unique_ptr<Communicator>> communicators(const std::string& kind, int ranks) {
#ifdef TURBODECODE_WITH_NCCL
  if (kind == "nccl") return nccl_communicators_all_devices(ranks);
#endif
  if (kind != "local") throw std::runtime_error("unknown or unavailable communicator " + kind);
  return local_communicators(ranks, Device::cuda);
}

// Median host wall time (µs) of `steps` steps in which every rank runs `step` from its thread.
double time_steps(int ranks, int steps, const std::function<void(int)>& step) {
  std::barrier<> meet(ranks);
  std::vector<double> times;
  const auto body = [&](int rank) {
    for (int i = -3; i < steps; ++i) {  // three warm-up steps
      meet.arrive_and_wait();
      const auto start = std::chrono::steady_clock::now();
      step(rank);
      meet.arrive_and_wait();
      if (rank == 0 && i >= 0) {
        times.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < ranks; ++r) threads.emplace_back(body, r);
  body(0);
  for (std::thread& t : threads) t.join();
  return median(times);
}

void run(const Settings& s) {
  const KvCacheConfig token{.n_kv_heads = s.kv_heads,
                            .capacity = 1,
                            .head_dim = s.dim,
                            .k_format = s.k_format,
                            .v_format = s.v_format};
  // Cache bytes of one token: every KV head's K and V rows.
  const auto bytes_per_token = static_cast<double>(bytes_per_position(token) * s.kv_heads);
  double single_us = 0.0;
  std::printf("%-6s %4s %10s %6s %12s %10s %8s\n", "comm", "R", "L", "B", "step_us", "GB/s/rank",
              "vs_R1");
  for (int ranks : s.ranks) {
    auto group = communicators(s.communicator, ranks);
    std::vector<std::unique_ptr<Rank>> shards;
    for (int r = 0; r < ranks; ++r) {
      shards.push_back(std::make_unique<Rank>(s, r, ranks, s.communicator == "nccl" ? r : 0));
    }
    const auto sync = [&](int r) {
      TD_CUDA_CHECK(cudaStreamSynchronize(shards[static_cast<std::size_t>(r)]->stream));
    };
    if (ranks == 1) {
      single_us = time_steps(1, s.steps, [&](int r) {
        shards[0]->run_unsharded(s);
        sync(r);
      });
      std::printf("%-6s %4d %10lld %6lld %12.1f %10.0f %8s\n", "none", 1,
                  static_cast<long long>(s.length), static_cast<long long>(s.batch), single_us,
                  bytes_per_token * s.length * s.batch / single_us / 1e3, "1.00");
    }
    const double step_us = time_steps(ranks, s.steps, [&](int r) {
      TD_CUDA_CHECK(cudaSetDevice(s.communicator == "nccl" ? r : 0));
      shards[static_cast<std::size_t>(r)]->run(s, *group[static_cast<std::size_t>(r)]);
      sync(r);
    });
    std::printf("%-6s %4d %10lld %6lld %12.1f %10.0f %8.2f\n", s.communicator.c_str(), ranks,
                static_cast<long long>(s.length), static_cast<long long>(s.batch), step_us,
                bytes_per_token * s.length * s.batch / ranks / step_us / 1e3,
                single_us > 0 ? step_us / single_us : 0.0);
    for (auto& shard : shards) TD_CUDA_CHECK(cudaStreamDestroy(shard->stream));
  }
}

}  // namespace
}  // namespace turbodecode::bench

int main(int argc, char** argv) {
  using turbodecode::bench::Settings;
  Settings s;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i], value = argv[i + 1];
    if (arg == "--communicator") {
      s.communicator = value;
    } else if (arg == "--ranks") {
      s.ranks.clear();
      for (std::size_t at = 0; at < value.size();) {
        const std::size_t comma = value.find(',', at);
        s.ranks.push_back(std::stoi(value.substr(at, comma - at)));
        at = comma == std::string::npos ? value.size() : comma + 1;
      }
    } else if (arg == "--length") {
      s.length = std::stoll(value);
    } else if (arg == "--batch") {
      s.batch = std::stoll(value);
    } else if (arg == "--steps") {
      s.steps = std::stoi(value);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--communicator local|nccl] [--ranks 1,2] [--length L] "
                   "[--batch B] [--steps N]\n",
                   argv[0]);
      return 2;
    }
  }
  turbodecode::bench::run(s);
  return 0;
}
