// CUDA backend of the row codec calls (encode_rows, decode_rows, rotate/unrotate_rows) for
// TurboQuant-HB and FP8 rows: a warp per row, kRowsPerBlock rows per block, grid-stride over
// the rows.
#include "common/cuda/cuda_check.cuh"
#include "tq/cuda/codec_cuda.h"
#include "tq/cuda/row_launch.h"
#include "tq/cuda/warp_row.cuh"

namespace turbodecode::cuda {

namespace {

constexpr int kRowsPerBlock = 4;
constexpr int kThreads = kRowsPerBlock * warp_row::kLanes;

// A row-major [rows, ...] operand seen by the kernels: base address and row stride in bytes.
struct RowOperand {
  unsigned char* data;
  std::int64_t row_bytes;

  __device__ unsigned char* row(std::int64_t r) const { return data + r * row_bytes; }
};

RowOperand operand(const TensorView& t) {
  return {static_cast<unsigned char*>(t.data), stride_bytes(t, 0)};
}

struct CodecLaunch {
  RowOperand values, codes, norms;  // values: x (encode) or y (decode)
  DType values_dtype;
  std::int64_t rows;
  RowEncoding encoding;  // fp8 or tq
  float scale_factor_d512;
  bool vectorised;
};

__device__ __forceinline__ int warp_index() {
  return static_cast<int>(threadIdx.x) / 32;
}
__device__ __forceinline__ int lane_index() {
  return static_cast<int>(threadIdx.x) % 32;
}
__device__ __forceinline__ std::int64_t first_row() {
  return static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + warp_index();
}
__device__ __forceinline__ std::int64_t row_step() {
  return static_cast<std::int64_t>(gridDim.x) * kRowsPerBlock;
}

template <int D>
__global__ void __launch_bounds__(kThreads) encode_rows_kernel(const CodecLaunch p) {
  __shared__ code_buckets::CodeBucket buckets[code_buckets::kMaxBuckets];
  __shared__ __align__(16) float scratch[kRowsPerBlock][D];
  const bool tq = p.encoding.kind == RowKind::tq;
  if (tq) tq_tables::fill_code_buckets(p.encoding.bits, buckets);
  __syncthreads();
  const int lane = lane_index();
  const unsigned signs = warp_row::lane_sign_bits<D>(lane);
  for (std::int64_t r = first_row(); r < p.rows; r += row_step()) {
    float v[warp_row::kPerLane<D>];
    warp_row::load_lane_values(p.values.row(r), p.values_dtype, p.vectorised, lane, v);
    auto* side_values = reinterpret_cast<float*>(p.norms.row(r));
    if (!tq) {
      warp_row::store_fp8<D>(warp_row::encode_fp8<D>(v), lane, p.codes.row(r), side_values,
                             p.vectorised);
      continue;
    }
    warp_row::rotate_forward<D>(v, lane, signs);
    float* scratch_row = scratch[warp_index()];
    warp_row::store_rotated<D>(warp_row::encode_rotated<D>(v, p.encoding.bits, p.scale_factor_d512,
                                                           buckets, scratch_row, lane),
                               p.encoding.bits, scratch_row, lane, p.codes.row(r), side_values,
                               p.vectorised);
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads) decode_rows_kernel(const CodecLaunch p) {
  __shared__ float codebook[tq_tables::kMaxTableEntries];
  const bool tq = p.encoding.kind == RowKind::tq;
  if (tq) {
    tq_tables::stage_in_block(tq_tables::codebook(p.encoding.bits), 1 << p.encoding.bits, codebook);
  }
  const int lane = lane_index();
  for (std::int64_t r = first_row(); r < p.rows; r += row_step()) {
    float y[warp_row::kPerLane<D>];
    const auto* side_values = reinterpret_cast<const float*>(p.norms.row(r));
    if (tq) {
      warp_row::decode_lane<D>(p.codes.row(r), side_values, p.encoding.bits, p.scale_factor_d512,
                               codebook, lane, p.vectorised, y);
    } else {
      warp_row::decode_fp8_lane<D>(p.codes.row(r), side_values[0], lane, p.vectorised, y);
    }
    warp_row::store_lane_f32(y, p.values.row(r), lane, p.vectorised);
  }
}

// In place is allowed: a warp reads its whole row into registers before writing it.
template <int D>
__global__ void __launch_bounds__(kThreads)
    rotate_rows_kernel(const RowOperand in, const RowOperand out, std::int64_t rows, bool inverse,
                       bool vectorised) {
  const int lane = lane_index();
  const unsigned signs = warp_row::lane_sign_bits<D>(lane);
  for (std::int64_t r = first_row(); r < rows; r += row_step()) {
    float v[warp_row::kPerLane<D>];
    warp_row::load_lane_values(in.row(r), DType::f32, vectorised, lane, v);
    if (inverse) {
      warp_row::rotate_inverse<D>(v, lane, signs);
    } else {
      warp_row::rotate_forward<D>(v, lane, signs);
    }
    warp_row::store_lane_f32(v, out.row(r), lane, vectorised);
  }
}

// `values` is the row operand of real numbers: x for encode, y for decode.
CodecLaunch codec_launch(const CodecParams& params, const TensorView& values,
                         const TensorView& codes, const TensorView& norms) {
  CodecLaunch p{};
  p.values = operand(values);
  p.codes = operand(codes);
  p.norms = operand(norms);
  p.values_dtype = values.dtype;
  p.rows = codes.shape[0];
  p.encoding = row_encoding(params.format);
  p.scale_factor_d512 = params.scale_factor_d512;
  p.vectorised = allows_vector_access(values) && allows_vector_access(codes);
  return p;
}

}  // namespace

void encode_rows(const CodecParams& params, const TensorView& x, const TensorView& codes,
                 const TensorView& norms, Stream stream) {
  const CodecLaunch p = codec_launch(params, x, codes, norms);
  const unsigned blocks = grid_blocks(p.rows, kRowsPerBlock);
  if (params.head_dim == 256) {
    encode_rows_kernel<256><<<blocks, kThreads, 0, native(stream)>>>(p);
  } else {
    encode_rows_kernel<512><<<blocks, kThreads, 0, native(stream)>>>(p);
  }
  TD_CUDA_CHECK_LAUNCH("encode_rows_kernel");
}

void decode_rows(const CodecParams& params, const TensorView& codes, const TensorView& norms,
                 const TensorView& y, Stream stream) {
  const CodecLaunch p = codec_launch(params, y, codes, norms);
  const unsigned blocks = grid_blocks(p.rows, kRowsPerBlock);
  if (params.head_dim == 256) {
    decode_rows_kernel<256><<<blocks, kThreads, 0, native(stream)>>>(p);
  } else {
    decode_rows_kernel<512><<<blocks, kThreads, 0, native(stream)>>>(p);
  }
  TD_CUDA_CHECK_LAUNCH("decode_rows_kernel");
}

void rotate_rows(int head_dim, bool inverse, const TensorView& in, const TensorView& out,
                 Stream stream) {
  const std::int64_t rows = in.shape[0];
  const bool vectorised = allows_vector_access(in) && allows_vector_access(out);
  const unsigned blocks = grid_blocks(rows, kRowsPerBlock);
  if (head_dim == 256) {
    rotate_rows_kernel<256><<<blocks, kThreads, 0, native(stream)>>>(operand(in), operand(out),
                                                                     rows, inverse, vectorised);
  } else {
    rotate_rows_kernel<512><<<blocks, kThreads, 0, native(stream)>>>(operand(in), operand(out),
                                                                     rows, inverse, vectorised);
  }
  TD_CUDA_CHECK_LAUNCH("rotate_rows_kernel");
}

}  // namespace turbodecode::cuda
