// Tensor operands for the API harness: each starts as the view a call expects and may be broken
// by the fuzzer (dtype, rank, extents, strides, alignment, device, null, aliasing another
// operand). Every view gets memory that holds exactly what it can address, so a read or write
// outside it is a sanitizer report. run() then checks the validation contract (SPEC §7): a call
// either succeeds, writing only the elements of its outputs, or throws a turbodecode::Error and
// writes nothing at all.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <vector>

#include "turbodecode/tensor.h"

namespace turbodecode::fuzz {

enum class Role { input, output };

class Operands {
 public:
  explicit Operands(FuzzedDataProvider& data) : data_(data) {}

  // A view of `shape` (contiguous, on the CPU) that the fuzzer may break, with its memory filled
  // with arbitrary bytes. `optional`: the fuzzer may also pass the view absent.
  TensorView add(Role role, DType dtype, std::initializer_list<std::int64_t> shape,
                 bool optional = false);
  // Writes `values` into an i32 view's elements in row-major order (slot ids, positions, block
  // tables: rank 1 or 2), where they fit.
  static void fill_i32(const TensorView& view, const std::vector<std::int32_t>& values);
  // True when an added view could not be given memory (its span is too large); the input is
  // then skipped.
  bool too_large() const { return too_large_; }

  // Runs `call` and checks the contract; a breach traps.
  void run(const std::function<void()>& call);

 private:
  struct Arena {
    std::unique_ptr<std::byte[]> bytes;
    std::size_t size = 0;
  };
  struct Operand {
    TensorView view;
    Role role;
    int arena;  // -1: no memory (absent or null)
  };
  // How a view's memory is broken, beside its fields.
  struct Breakage {
    bool null = false;
    bool misaligned = false;
    int alias = -1;  // shares the memory of this earlier operand
  };

  // Breaks `view` in up to three ways the fuzzer picks (usually none).
  Breakage mutate(TensorView& view);
  // Marks the bytes of the view's elements in its arena.
  static void mark_elements(const TensorView& view, const Arena& arena,
                            std::vector<bool>& writable);

  FuzzedDataProvider& data_;
  std::vector<Arena> arenas_;
  std::vector<Operand> operands_;
  bool too_large_ = false;
};

}  // namespace turbodecode::fuzz
