// The public calls the API harness exercises, one family per file, and the choices they draw
// from the fuzzer: mostly values a caller would pass, sometimes ones no caller should.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <vector>

namespace turbodecode::fuzz {

void fuzz_codec_call(FuzzedDataProvider& data);
void fuzz_cache_call(FuzzedDataProvider& data);
void fuzz_decode_call(FuzzedDataProvider& data);
void fuzz_hc_call(FuzzedDataProvider& data);
void fuzz_q8_call(FuzzedDataProvider& data);

// An integer in [lo, hi], or now and then one of `wild`. Exhausted data gives lo.
template <class T>
T pick(FuzzedDataProvider& data, T lo, T hi, std::initializer_list<T> wild) {
  if (data.ConsumeIntegralInRange(0, 15) == 15 && wild.size() > 0) {
    return *(wild.begin() + data.ConsumeIntegralInRange<std::size_t>(0, wild.size() - 1));
  }
  return data.ConsumeIntegralInRange<T>(lo, hi);
}

// One of `usual` (the first when data is exhausted), or now and then NaN, ±Inf, a negative
// value or zero.
inline float pick_float(FuzzedDataProvider& data, std::initializer_list<float> usual) {
  const std::vector<float> wild = {std::numeric_limits<float>::quiet_NaN(),
                                   std::numeric_limits<float>::infinity(),
                                   -std::numeric_limits<float>::infinity(), -1.0f, 0.0f};
  if (data.ConsumeIntegralInRange(0, 15) == 15) {
    return wild[data.ConsumeIntegralInRange<std::size_t>(0, wild.size() - 1)];
  }
  return *(usual.begin() + data.ConsumeIntegralInRange<std::size_t>(0, usual.size() - 1));
}

// A valid extent for shapes when a parameter is wild, so operands stay small.
inline std::int64_t sane(std::int64_t value, std::int64_t lo, std::int64_t hi) {
  return value < lo || value > hi ? lo : value;
}

}  // namespace turbodecode::fuzz
