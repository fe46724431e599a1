// SDPA forward, FlashAttention-2 style: one block per (64 query rows, head, sequence) walks the
// key tiles with an online softmax, so memory is O(sequence); writes O and the log-sum-exp.
#include <cuda_runtime.h>

#include "attention_kernels/src/kernel_common.cuh"
#include "attention_kernels/src/launch.h"
#include "attention_kernels/src/sdpa_tiles.cuh"
#include "attention_kernels/src/tiling.h"

namespace spillway::attention::kernels {
namespace {

constexpr int kM = kSdpaBlockM;
constexpr int kN = kSdpaBlockN;

template <typename T, int kDim>
__global__ void __launch_bounds__(kSdpaThreads)
    SdpaForwardKernel(spillway_attention_sdpa_forward_args_t a, float scale) {
  constexpr int kLdT = SdpaInputPitch(kDim);
  constexpr int kLdS = kSdpaScorePitch;
  constexpr int kLdP = kSdpaProbPitch;
  constexpr int kLdO = SdpaAccPitch(kDim);
  extern __shared__ __align__(128) unsigned char smem[];
  T* s_q = reinterpret_cast<T*>(smem);
  T* s_k = s_q + kM * kLdT;
  T* s_v = s_k + kN * kLdT;
  float* s_s = reinterpret_cast<float*>(s_v + kN * kLdT);
  T* s_p = reinterpret_cast<T*>(s_s + kM * kLdS);
  float* s_o = reinterpret_cast<float*>(s_p + kM * kLdP);

  const spillway_attention_sdpa_problem_t& p = a.problem;
  const int b = blockIdx.z, h = blockIdx.y, m0 = blockIdx.x * kM;
  const Sequence seq = GetSequence(p, b);
  if (m0 >= seq.len_q) return;
  const int hk = h / (p.num_heads_q / p.num_heads_kv);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int diag = seq.len_k - seq.len_q;  // causal: key j visible to query i iff j <= i + diag
  const float scale_log2 = scale * kLog2e;

  const T* q = static_cast<const T*>(a.q.data) + RowOffset(a.q, seq, seq.token_q, h, m0);
  const T* k = static_cast<const T*>(a.k.data) + RowOffset(a.k, seq, seq.token_k, hk, 0);
  const T* v = static_cast<const T*>(a.v.data) + RowOffset(a.v, seq, seq.token_k, hk, 0);
  const T* bias = a.bias.data == nullptr ? nullptr
                                         : static_cast<const T*>(a.bias.data) +
                                               b * a.bias.batch_stride + h * a.bias.head_stride;
  LoadRows<T, kM, kDim, kLdT, kSdpaThreads>(s_q, q, a.q.seq_stride, seq.len_q - m0);
  for (int i = threadIdx.x; i < kM * kLdO; i += kSdpaThreads) s_o[i] = 0.0f;

  // Running max (log2 units) and sum of the warp's 16 rows; every lane holds all 16.
  float row_max[16], row_sum[16];
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    row_max[r] = -INFINITY;
    row_sum[r] = 0.0f;
  }
  const int n_end = p.causal ? min(seq.len_k, m0 + kM + diag) : seq.len_k;
  for (int n0 = 0; n0 < n_end; n0 += kN) {
    __syncthreads();  // the previous tile's K and V are no longer read
    LoadRows<T, kN, kDim, kLdT, kSdpaThreads>(s_k, k + n0 * a.k.seq_stride, a.k.seq_stride,
                                              seq.len_k - n0);
    LoadRows<T, kN, kDim, kLdT, kSdpaThreads>(s_v, v + n0 * a.v.seq_stride, a.v.seq_stride,
                                              seq.len_k - n0);
    __syncthreads();
    RowsTimesColsT<T, kDim>(s_q, s_k, s_s, warp);  // S = Q K^T
    __syncwarp();
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const int row = warp * 16 + r;
      const int i = m0 + row;
      float x[2];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int c = lane + 32 * half;
        const int j = n0 + c;
        const bool visible = i < seq.len_q && j < seq.len_k && (!p.causal || j <= i + diag);
        float logit = s_s[row * kLdS + c] * scale_log2;
        if (bias != nullptr && visible) {
          logit += ToFloat(bias[int64_t{i} * a.bias.row_stride + j]) * kLog2e;
        }
        x[half] = visible ? logit : -INFINITY;
      }
      const float m_new = fmaxf(row_max[r], WarpMax(fmaxf(x[0], x[1])));
      const float m_base = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing visible yet
      const float p0 = exp2f(x[0] - m_base);
      const float p1 = exp2f(x[1] - m_base);
      const float alpha = exp2f(row_max[r] - m_base);
      row_sum[r] = row_sum[r] * alpha + WarpSum(p0 + p1);
      row_max[r] = m_new;
      s_p[row * kLdP + lane] = FromFloat<T>(p0);
      s_p[row * kLdP + lane + 32] = FromFloat<T>(p1);
      for (int d = lane; d < kDim; d += 32) s_o[row * kLdO + d] *= alpha;
    }
    __syncwarp();
    // O += P V, the accumulator round-tripping through shared memory (rescaled above).
    Accumulator acc[kDim / 16];
#pragma unroll
    for (int j = 0; j < kDim / 16; ++j) {
      wmma::load_matrix_sync(acc[j], s_o + warp * 16 * kLdO + j * 16, kLdO, wmma::mem_row_major);
    }
    AccumulateProbsTimes<T, kDim>(acc, s_p, s_v, warp);
#pragma unroll
    for (int j = 0; j < kDim / 16; ++j) {
      wmma::store_matrix_sync(s_o + warp * 16 * kLdO + j * 16, acc[j], kLdO, wmma::mem_row_major);
    }
    __syncwarp();
  }
  __syncthreads();

  T* o = static_cast<T*>(a.o.data) + RowOffset(a.o, seq, seq.token_q, h, m0);
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int row = warp * 16 + r;
    const int i = m0 + row;
    if (i >= seq.len_q) continue;
    const float inv = row_sum[r] > 0.0f ? 1.0f / row_sum[r] : 0.0f;
    for (int d = lane; d < kDim; d += 32) {
      o[row * a.o.seq_stride + d] = FromFloat<T>(s_o[row * kLdO + d] * inv);
    }
    if (lane == 0) {
      a.lse[(seq.token_q + i) * p.num_heads_q + h] =
          row_sum[r] > 0.0f ? row_max[r] * kLn2 + logf(row_sum[r]) : -INFINITY;
    }
  }
}

template <typename T, int kDim>
Check Launch(const spillway_attention_sdpa_forward_args_t& a, float scale, void* workspace,
             cudaStream_t stream) {
  static SmemOptIn opt_in;
  if (a.problem.cu_seqlens_q != nullptr) {
    if (Check c = LaunchVarlenCheck(a.problem, workspace, stream); !c.ok()) return c;
  }
  const dim3 grid((a.problem.seqlen_q + kM - 1) / kM, a.problem.num_heads_q, a.problem.batch);
  return LaunchKernelWithSmem(opt_in, "SDPA forward launch", SdpaForwardKernel<T, kDim>, grid,
                              dim3(kSdpaThreads), SdpaForwardSmemBytes(kDim), stream, a, scale);
}

}  // namespace
}  // namespace spillway::attention::kernels

namespace spillway::attention::detail {

bool KernelsAvailable() { return true; }

Check LaunchSdpaForward(const spillway_attention_sdpa_forward_args_t& a, float scale,
                        void* workspace, void* stream) {
  using kernels::Launch;
  const auto s = static_cast<cudaStream_t>(stream);
  const bool bf16 = a.problem.dtype == SPILLWAY_ATTENTION_BF16;
  if (a.problem.head_dim == 64) {
    return bf16 ? Launch<__nv_bfloat16, 64>(a, scale, workspace, s)
                : Launch<__half, 64>(a, scale, workspace, s);
  }
  return bf16 ? Launch<__nv_bfloat16, 128>(a, scale, workspace, s)
              : Launch<__half, 128>(a, scale, workspace, s);
}

}  // namespace spillway::attention::detail
