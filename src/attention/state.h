// The online-softmax state of a chunk of positions and its associative merge (SPEC §2.5). The CPU backend
// and the CUDA merge kernel both call these.
#pragma once

#include <cmath>

#include "common/host_device.h"

namespace turbodecode::attention {

// (m, l) of a chunk: running max of the scores and Σ exp(s − m). O (Σ exp(s − m)·v) is kept
// beside it as a row of D floats. A chunk that saw nothing is {-inf, 0} with O = 0.
struct SoftmaxState {
  float m;
  float l;
};

TD_HOST_DEVICE SoftmaxState empty_state() { return {-INFINITY, 0.0f}; }

// Weight of a part whose max is m_part in a merge whose max is m_total; empty parts weigh 0,
// so no -inf − -inf ever reaches exp.
TD_HOST_DEVICE float merge_weight(float m_part, float m_total) {
  return m_part == -INFINITY ? 0.0f : expf(m_part - m_total);
}

// Merged max of two states.
TD_HOST_DEVICE float merged_max(SoftmaxState a, SoftmaxState b) { return fmaxf(a.m, b.m); }

// The final normaliser: 1/l, or 0 for a query that saw nothing (its output is zeros).
TD_HOST_DEVICE float output_scale(float l) { return l > 0.0f ? 1.0f / l : 0.0f; }

}  // namespace turbodecode::attention
