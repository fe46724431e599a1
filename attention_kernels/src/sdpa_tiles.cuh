// Warp-level tensor-core (WMMA) building blocks of the SDPA kernels. A block holds 64-row tiles
// in shared memory; warp w owns rows [16w, 16w+16) of the "row" operand and of every result.
#ifndef SPILLWAY_ATTENTION_KERNELS_SRC_SDPA_TILES_CUH_
#define SPILLWAY_ATTENTION_KERNELS_SRC_SDPA_TILES_CUH_

#include <mma.h>

#include "attention_kernels/src/kernel_common.cuh"
#include "attention_kernels/src/tiling.h"

namespace spillway::attention::kernels {

namespace wmma = nvcuda::wmma;

using Accumulator = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

static_assert(kSdpaBlockM == kSdpaBlockN, "the kernels reuse one tile shape for rows and columns");
static_assert(kSdpaThreads == 4 * 32 && kSdpaBlockM == 4 * 16, "4 warps x 16 rows");

// out[16w.., 0..64) = rows[16w.., :kDim] * cols[0..64, :kDim]^T, fp32, pitch kSdpaScorePitch.
// `rows` and `cols` are input tiles (pitch SdpaInputPitch(kDim)).
template <typename T, int kDim>
__device__ __forceinline__ void RowsTimesColsT(const T* rows, const T* cols, float* out, int warp) {
  constexpr int kPitch = SdpaInputPitch(kDim);
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b;
  Accumulator acc;
#pragma unroll
  for (int j = 0; j < kSdpaBlockN / 16; ++j) {
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int k = 0; k < kDim / 16; ++k) {
      wmma::load_matrix_sync(a, rows + warp * 16 * kPitch + k * 16, kPitch);
      wmma::load_matrix_sync(b, cols + j * 16 * kPitch + k * 16, kPitch);  // cols^T, col-major
      wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(out + warp * 16 * kSdpaScorePitch + j * 16, acc, kSdpaScorePitch,
                            wmma::mem_row_major);
  }
}

// acc[j] += probs[16w.., 0..64) * inputs[0..64, 16j..16j+16) for every j < kDim/16: the warp's
// 16 rows of a (64-wide prob tile, pitch kSdpaProbPitch) x (input tile) product.
template <typename T, int kDim>
__device__ __forceinline__ void AccumulateProbsTimes(Accumulator (&acc)[kDim / 16], const T* probs,
                                                     const T* inputs, int warp) {
  constexpr int kPitch = SdpaInputPitch(kDim);
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
#pragma unroll
  for (int k = 0; k < kSdpaBlockN / 16; ++k) {
    wmma::load_matrix_sync(a, probs + warp * 16 * kSdpaProbPitch + k * 16, kSdpaProbPitch);
#pragma unroll
    for (int j = 0; j < kDim / 16; ++j) {
      wmma::load_matrix_sync(b, inputs + k * 16 * kPitch + j * 16, kPitch);
      wmma::mma_sync(acc[j], a, b, acc[j]);
    }
  }
}

// Writes the warp's 16 rows of `acc` * scale to global rows (`base` + row * row_stride), rows at
// or past `valid_rows` skipped, staging through `stage` (fp32, pitch SdpaAccPitch(kDim)).
template <typename T, int kDim>
__device__ __forceinline__ void StoreAccumulatorRows(Accumulator (&acc)[kDim / 16], float scale,
                                                     float* stage, T* base, int64_t row_stride,
                                                     int valid_rows, int warp, int lane) {
  constexpr int kPitch = SdpaAccPitch(kDim);
#pragma unroll
  for (int j = 0; j < kDim / 16; ++j) {
    for (int t = 0; t < acc[j].num_elements; ++t) acc[j].x[t] *= scale;
    wmma::store_matrix_sync(stage + warp * 16 * kPitch + j * 16, acc[j], kPitch,
                            wmma::mem_row_major);
  }
  __syncwarp();
  for (int r = 0; r < 16; ++r) {
    const int row = warp * 16 + r;
    if (row >= valid_rows) break;
    for (int d = lane; d < kDim; d += 32) {
      base[row * row_stride + d] = FromFloat<T>(stage[row * kPitch + d]);
    }
  }
  __syncwarp();
}

// Loads per-row log-sum-exp (as log2, +inf for a row that sees nothing, so its probabilities are
// 0) and D for query rows [m0, m0+64) of head h. Threads 0..63 each load one row. lse is indexed
// by token, D by padded row (workspace.h).
__device__ __forceinline__ void LoadRowStats(const float* lse, const float* delta,
                                             const Sequence& seq, int num_heads_q, int h, int m0,
                                             float* s_lse, float* s_delta) {
  const int r = threadIdx.x;
  if (r >= kSdpaBlockM) return;
  const int i = m0 + r;
  float l = INFINITY, d = 0.0f;
  if (i < seq.len_q) {
    l = lse[(seq.token_q + i) * num_heads_q + h];
    l = l == -INFINITY ? INFINITY : l * kLog2e;
    d = delta[(seq.row_q + i) * num_heads_q + h];
  }
  s_lse[r] = l;
  s_delta[r] = d;
}

}  // namespace spillway::attention::kernels

#endif  // SPILLWAY_ATTENTION_KERNELS_SRC_SDPA_TILES_CUH_
