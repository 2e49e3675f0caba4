// CUDA backend of the sharding building blocks (compiled only under TURBODECODE_WITH_CUDA),
// behind plain C++ declarations so that .cpp files never include CUDA headers.
#pragma once

#include <cstdint>

#include "shard/merge_args.h"
#include "turbodecode/tensor.h"

namespace turbodecode::cuda {

// Arguments validated by merge_attention.
void merge_attention(const shard::MergeArgs& args, Stream stream);

// A CUDA event without timing, on the device current when it is made. Move-only.
class Event {
 public:
  Event();
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Marks the work enqueued on `stream` so far.
  void record(Stream stream);
  // Makes work enqueued on `stream` from now on wait for the work the last record marked.
  void order_before(Stream stream) const;

 private:
  void* handle_ = nullptr;
};

// Enqueues a copy of `bytes` between device buffers (of any device of the process) on `stream`.
void copy_device_async(void* dst, const void* src, std::int64_t bytes, Stream stream);

}  // namespace turbodecode::cuda
