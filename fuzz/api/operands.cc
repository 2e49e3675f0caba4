#include "api/operands.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <limits>

#include "common/f16.h"
#include "common/validate.h"
#include "turbodecode/error.h"

namespace turbodecode::fuzz {
namespace {

// The most memory one operand may address; a view beyond it skips the input.
constexpr std::int64_t kMaxSpanBytes = std::int64_t{1} << 20;
// Memory behind views that no call may accept (negative extents or strides).
constexpr std::size_t kInvalidViewBytes = 64;
constexpr std::int64_t kHuge = std::int64_t{1} << 62;
// Valid (below the 2^48 limit of check_tensor) but far beyond any memory.
constexpr std::int64_t kLargeStride = std::int64_t{1} << 40;
constexpr std::int64_t kInvalid = -1, kTooLarge = -2;

// Bytes from the first element to one past the last (0 when empty), or kInvalid / kTooLarge.
std::int64_t span_of(const TensorView& view) {
  if (view.rank < 0 || view.rank > kMaxRank) return kInvalid;
  bool empty = false;
  for (int d = 0; d < view.rank; ++d) {
    if (view.shape[d] < 0 || view.strides[d] < 0) return kInvalid;
    empty = empty || view.shape[d] == 0;
  }
  if (empty) return 0;
  std::int64_t last = 0;
  for (int d = 0; d < view.rank; ++d) {
    if (!product_at_most({view.shape[d] - 1, view.strides[d]}, kMaxSpanBytes)) return kTooLarge;
    last += (view.shape[d] - 1) * view.strides[d];
  }
  const auto element = static_cast<std::int64_t>(dtype_bytes(view.dtype));
  if (!product_at_most({last + 1, element}, kMaxSpanBytes)) return kTooLarge;
  return (last + 1) * element;
}

// An extent or stride clamped to what memory can back, so it may be doubled.
std::int64_t bounded(std::int64_t value) {
  return std::clamp<std::int64_t>(value, 0, kMaxSpanBytes);
}

// Values that exercise the kernels: mostly moderate, sometimes zero, tiny, huge, Inf or NaN.
float value_of(std::uint32_t bits) {
  const float unit = static_cast<float>(bits >> 8) / 8388608.0f - 1.0f;  // [-1, 1)
  switch (bits & 15) {
    case 0:
      return 0.0f;
    case 1:
      return std::numeric_limits<float>::quiet_NaN();
    case 2:
      return unit < 0 ? -std::numeric_limits<float>::infinity()
                      : std::numeric_limits<float>::infinity();
    case 3:
      return unit * 1e30f;
    case 4:
      return unit * 1e-40f;
    default:
      return unit * 4.0f;
  }
}

void fill(std::byte* bytes, std::size_t size, DType dtype, std::uint32_t seed) {
  std::uint32_t state = seed | 1u;
  const std::size_t element = dtype_bytes(dtype);
  for (std::size_t at = 0; at + element <= size; at += element) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    std::uint32_t stored = state;
    if (dtype == DType::f32) {
      const float value = value_of(state);
      std::memcpy(&stored, &value, 4);
    } else if (dtype == DType::f16) {
      stored = f32_to_f16(value_of(state));
    } else if (dtype == DType::bf16) {
      stored = f32_to_bf16(value_of(state));
    }
    std::memcpy(bytes + at, &stored, element);
  }
}

}  // namespace

TensorView Operands::add(Role role, DType dtype, std::initializer_list<std::int64_t> shape,
                         bool optional) {
  if (optional && data_.ConsumeIntegralInRange(0, 7) == 7) {
    operands_.push_back({TensorView{}, role, -1});
    return {};
  }
  TensorView view = TensorView::contiguous(nullptr, dtype, shape);
  const Breakage broken = mutate(view);
  const std::int64_t span = span_of(view);
  if (span == kTooLarge) {
    too_large_ = true;
    return view;
  }
  int arena = -1;
  if (!broken.null) {
    const std::size_t need =
        (span == kInvalid ? kInvalidViewBytes : static_cast<std::size_t>(span)) +
        (broken.misaligned ? 1 : 0);
    if (broken.alias >= 0 && operands_[static_cast<std::size_t>(broken.alias)].arena >= 0 &&
        arenas_[static_cast<std::size_t>(operands_[broken.alias].arena)].size >= need) {
      arena = operands_[static_cast<std::size_t>(broken.alias)].arena;
    } else {
      arena = static_cast<int>(arenas_.size());
      Arena& fresh = arenas_.emplace_back();
      fresh.bytes = std::make_unique<std::byte[]>(need);
      fresh.size = need;
      fill(fresh.bytes.get(), need, view.dtype, data_.ConsumeIntegral<std::uint32_t>());
    }
    view.data = arenas_[static_cast<std::size_t>(arena)].bytes.get() + (broken.misaligned ? 1 : 0);
  }
  operands_.push_back({view, role, arena});
  return view;
}

Operands::Breakage Operands::mutate(TensorView& view) {
  Breakage broken;
  const int rounds = std::max(0, data_.ConsumeIntegralInRange(0, 7) - 4);
  for (int round = 0; round < rounds; ++round) {
    // A wild rank (the last kind) may lie outside [0, kMaxRank]: no dimension to change then.
    if (view.rank < 0 || view.rank > kMaxRank) break;
    const int dim = view.rank > 0 ? data_.ConsumeIntegralInRange(0, view.rank - 1) : 0;
    const std::int64_t extent = view.rank > 0 ? view.shape[dim] : 0;
    switch (data_.ConsumeIntegralInRange(0, 10)) {
      case 0:
        view.dtype = static_cast<DType>(data_.ConsumeIntegralInRange(0, 4));
        break;
      case 1:  // one dimension more or less
        if (data_.ConsumeBool() && view.rank > 0) {
          --view.rank;
        } else if (view.rank < kMaxRank) {
          view.shape[view.rank] = data_.ConsumeIntegralInRange(0, 3);
          view.strides[view.rank] = 1;
          ++view.rank;
        }
        break;
      case 2:  // another extent, up to about twice the one expected
        if (view.rank > 0) {
          view.shape[dim] = data_.ConsumeIntegralInRange<std::int64_t>(-1, 2 * bounded(extent) + 2);
        }
        break;
      case 3:
        if (view.rank > 0) {
          view.strides[dim] =
              data_.ConsumeIntegralInRange<std::int64_t>(-1, 2 * bounded(view.strides[dim]) + 2);
        }
        break;
      case 4:  // a huge extent where another one is 0: nothing to address
        if (view.rank > 1) {
          view.shape[dim] = kHuge;
          view.shape[(dim + 1) % view.rank] = 0;
        }
        break;
      case 5:  // a huge stride on a dimension of extent 1: nothing beyond its first element
        if (view.rank > 0) {
          view.shape[dim] = 1;
          view.strides[dim] = data_.ConsumeBool() ? kHuge : kLargeStride;
        }
        break;
      case 6:
        broken.misaligned = true;
        break;
      case 7:
        broken.null = true;
        break;
      case 8:
        view.device = Device::cuda;
        break;
      case 9:
        if (!operands_.empty()) {
          broken.alias = data_.ConsumeIntegralInRange(0, static_cast<int>(operands_.size()) - 1);
        }
        break;
      default:
        view.rank = data_.ConsumeIntegralInRange(-1, kMaxRank + 1);
        break;
    }
  }
  return broken;
}

void Operands::fill_i32(const TensorView& view, const std::vector<std::int32_t>& values) {
  // Only into memory the view owns: a view too large for memory was given none.
  if (!view.present() || view.dtype != DType::i32 || view.rank < 1 || view.rank > 2 ||
      span_of(view) <= 0 || reinterpret_cast<std::uintptr_t>(view.data) % 4 != 0) {
    return;
  }
  const std::int64_t cols = view.rank == 2 ? view.shape[1] : 1;
  const std::int64_t col_stride = view.rank == 2 ? view.strides[1] : 0;
  // A zero stride lets an extent exceed memory, so the count is bounded before it is formed:
  // shape[0] * cols <= wanted when shape[0] <= wanted / cols (cols > 0: the view is not empty).
  const auto wanted = static_cast<std::int64_t>(values.size());
  const std::int64_t count = view.shape[0] > wanted / cols ? wanted : view.shape[0] * cols;
  for (std::int64_t i = 0; i < count; ++i) {
    view.as<std::int32_t>()[i / cols * view.strides[0] + i % cols * col_stride] =
        values[static_cast<std::size_t>(i)];
  }
}

void Operands::mark_elements(const TensorView& view, const Arena& arena,
                             std::vector<bool>& writable) {
  if (span_of(view) <= 0) return;
  const auto element = static_cast<std::int64_t>(dtype_bytes(view.dtype));
  const std::int64_t base = static_cast<const std::byte*>(view.data) - arena.bytes.get();
  std::array<std::int64_t, kMaxRank> index{};
  for (;;) {
    std::int64_t offset = 0;
    for (int d = 0; d < view.rank; ++d) offset += index[d] * view.strides[d];
    for (std::int64_t b = 0; b < element; ++b) {
      writable[static_cast<std::size_t>(base + offset * element + b)] = true;
    }
    int d = view.rank - 1;
    while (d >= 0 && ++index[d] == view.shape[d]) index[d--] = 0;
    if (d < 0) return;
  }
}

void Operands::run(const std::function<void()>& call) {
  std::vector<std::vector<std::byte>> before;
  for (const Arena& arena : arenas_)
    before.emplace_back(arena.bytes.get(), arena.bytes.get() + arena.size);
  bool succeeded = true;
  try {
    call();
  } catch (const Error&) {
    succeeded = false;
  }
  for (std::size_t a = 0; a < arenas_.size(); ++a) {
    const Arena& arena = arenas_[a];
    if (arena.size == 0 || std::memcmp(arena.bytes.get(), before[a].data(), arena.size) == 0) {
      continue;
    }
    std::vector<bool> writable(arena.size, false);
    for (const Operand& operand : operands_) {
      if (succeeded && operand.role == Role::output && operand.arena == static_cast<int>(a)) {
        mark_elements(operand.view, arena, writable);
      }
    }
    for (std::size_t i = 0; i < arena.size; ++i) {
      if (arena.bytes[i] != before[a][i] && !writable[i]) {
        std::fprintf(stderr, "%s wrote byte %zu of arena %zu outside its outputs\n",
                     succeeded ? "a call" : "a rejected call", i, a);
        __builtin_trap();
      }
    }
  }
}

}  // namespace turbodecode::fuzz
