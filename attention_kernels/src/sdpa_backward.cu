// SDPA backward from recomputed probabilities (P = exp(S - LSE), D = rowsum(dO * O)), with no
// atomics: dK/dV blocks own key tiles (looping over the query heads of their KV group), dQ
// blocks own query tiles, and dBias blocks own bias tiles; every sum has a fixed order.
#include <cuda_runtime.h>

#include "attention_kernels/src/kernel_common.cuh"
#include "attention_kernels/src/launch.h"
#include "attention_kernels/src/sdpa_tiles.cuh"
#include "attention_kernels/src/tiling.h"
#include "attention_kernels/src/validate.h"

namespace spillway::attention::kernels {
namespace {

constexpr int kM = kSdpaBlockM;
constexpr int kN = kSdpaBlockN;

// Shared memory of the backward kernels, carved in the order SdpaBackwardSmemBytes counts.
template <typename T, int kDim>
struct BackwardSmem {
  static constexpr int kLdT = SdpaInputPitch(kDim);
  T* q;
  T* d_o;
  T* k;
  T* v;
  float* s;   // S or S^T, then P or dS (fp32)
  float* dp;  // dP or dP^T
  T* p;       // P or dS as the next product's operand
  float* lse;
  float* delta;
  float* acc;  // dBias kernel only
  __device__ explicit BackwardSmem(unsigned char* base) {
    q = reinterpret_cast<T*>(base);
    d_o = q + kM * kLdT;
    k = d_o + kM * kLdT;
    v = k + kN * kLdT;
    s = reinterpret_cast<float*>(v + kN * kLdT);
    dp = s + kM * kSdpaScorePitch;
    p = reinterpret_cast<T*>(dp + kM * kSdpaScorePitch);
    lse = reinterpret_cast<float*>(p + kM * kSdpaProbPitch);
    delta = lse + kM;
    acc = delta + kM;
  }
};
// The epilogues stage a 64 x kDim fp32 tile in s and dp, which are contiguous.
static_assert(std::size_t{kSdpaBlockM} * SdpaAccPitch(128) * 4 <= 2 * kSdpaScoreTileBytes);

template <typename T>
__device__ __forceinline__ const T* BiasBase(const spillway_attention_bias_t& bias, int b, int h) {
  if (bias.data == nullptr) return nullptr;
  return static_cast<const T*>(bias.data) + b * bias.batch_stride + h * bias.head_stride;
}

// D = rowsum(dO * O) for each query row and head: one warp per row.
template <typename T, int kDim>
__global__ void __launch_bounds__(128)
    SdpaDeltaKernel(spillway_attention_sdpa_backward_args_t a, float* delta) {
  const int b = blockIdx.z, h = blockIdx.y;
  const int i = blockIdx.x * 4 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const Sequence seq = GetSequence(a.problem, b);
  if (i >= seq.len_q) return;
  const T* o = static_cast<const T*>(a.o.data) + RowOffset(a.o, seq, seq.token_q, h, i);
  const T* d_o = static_cast<const T*>(a.d_o.data) + RowOffset(a.d_o, seq, seq.token_q, h, i);
  float sum = 0.0f;
  for (int d = lane; d < kDim; d += 32) sum += ToFloat(o[d]) * ToFloat(d_o[d]);
  sum = WarpSum(sum);
  if (lane == 0) delta[(seq.row_q + i) * a.problem.num_heads_q + h] = sum;  // padded row: in bounds
}

// One block per (64 keys, KV head, sequence): dV = sum P^T dO and dK = scale * sum dS^T Q over
// every query tile of every query head in the KV head's group. Warps own key rows, so S^T and
// dP^T are computed (key rows x query columns).
template <typename T, int kDim>
__global__ void __launch_bounds__(kSdpaThreads)
    SdpaDkDvKernel(spillway_attention_sdpa_backward_args_t a, float scale, const float* delta) {
  constexpr int kLdT = SdpaInputPitch(kDim);
  constexpr int kLdS = kSdpaScorePitch;
  constexpr int kLdP = kSdpaProbPitch;
  extern __shared__ __align__(128) unsigned char smem[];
  const BackwardSmem<T, kDim> sm(smem);
  const spillway_attention_sdpa_problem_t& p = a.problem;
  const int b = blockIdx.z, hk = blockIdx.y, n0 = blockIdx.x * kN;
  const Sequence seq = GetSequence(p, b);
  if (n0 >= seq.len_k) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = p.num_heads_q / p.num_heads_kv;
  const int diag = seq.len_k - seq.len_q;
  const float scale_log2 = scale * kLog2e;

  const T* k = static_cast<const T*>(a.k.data) + RowOffset(a.k, seq, seq.token_k, hk, n0);
  const T* v = static_cast<const T*>(a.v.data) + RowOffset(a.v, seq, seq.token_k, hk, n0);
  LoadRows<T, kN, kDim, kLdT, kSdpaThreads>(sm.k, k, a.k.seq_stride, seq.len_k - n0);
  LoadRows<T, kN, kDim, kLdT, kSdpaThreads>(sm.v, v, a.v.seq_stride, seq.len_k - n0);
  Accumulator dk[kDim / 16], dv[kDim / 16];
#pragma unroll
  for (int j = 0; j < kDim / 16; ++j) {
    wmma::fill_fragment(dk[j], 0.0f);
    wmma::fill_fragment(dv[j], 0.0f);
  }
  // The first query tile with a row that can see key n0.
  const int m_begin = p.causal ? max(0, n0 - diag) / kM * kM : 0;
  for (int g = 0; g < group; ++g) {
    const int h = hk * group + g;
    const T* bias = BiasBase<T>(a.bias, b, h);
    for (int m0 = m_begin; m0 < seq.len_q; m0 += kM) {
      __syncthreads();
      const T* q = static_cast<const T*>(a.q.data) + RowOffset(a.q, seq, seq.token_q, h, m0);
      const T* d_o = static_cast<const T*>(a.d_o.data) + RowOffset(a.d_o, seq, seq.token_q, h, m0);
      LoadRows<T, kM, kDim, kLdT, kSdpaThreads>(sm.q, q, a.q.seq_stride, seq.len_q - m0);
      LoadRows<T, kM, kDim, kLdT, kSdpaThreads>(sm.d_o, d_o, a.d_o.seq_stride, seq.len_q - m0);
      LoadRowStats(a.lse, delta, seq, p.num_heads_q, h, m0, sm.lse, sm.delta);
      __syncthreads();
      RowsTimesColsT<T, kDim>(sm.k, sm.q, sm.s, warp);     // S^T = K Q^T
      RowsTimesColsT<T, kDim>(sm.v, sm.d_o, sm.dp, warp);  // dP^T = V dO^T
      __syncwarp();
      for (int r = 0; r < 16; ++r) {
        const int row = warp * 16 + r;
        const int j = n0 + row;
        for (int c = lane; c < kM; c += 32) {
          const int i = m0 + c;
          const bool visible = i < seq.len_q && j < seq.len_k && (!p.causal || j <= i + diag);
          float logit = sm.s[row * kLdS + c] * scale_log2;
          if (bias != nullptr && visible) {
            logit += ToFloat(bias[int64_t{i} * a.bias.row_stride + j]) * kLog2e;
          }
          const float prob = visible ? exp2f(logit - sm.lse[c]) : 0.0f;
          sm.p[row * kLdP + c] = FromFloat<T>(prob);
          sm.s[row * kLdS + c] = prob * (sm.dp[row * kLdS + c] - sm.delta[c]);  // dS^T
        }
      }
      __syncwarp();
      AccumulateProbsTimes<T, kDim>(dv, sm.p, sm.d_o, warp);  // dV += P^T dO
      __syncwarp();
      for (int r = 0; r < 16; ++r) {
        const int row = warp * 16 + r;
        for (int c = lane; c < kM; c += 32)
          sm.p[row * kLdP + c] = FromFloat<T>(sm.s[row * kLdS + c]);
      }
      __syncwarp();
      AccumulateProbsTimes<T, kDim>(dk, sm.p, sm.q, warp);  // dK += dS^T Q
    }
  }
  __syncthreads();
  T* dk_out = static_cast<T*>(a.dk.data) + RowOffset(a.dk, seq, seq.token_k, hk, n0);
  T* dv_out = static_cast<T*>(a.dv.data) + RowOffset(a.dv, seq, seq.token_k, hk, n0);
  StoreAccumulatorRows<T, kDim>(dk, scale, sm.s, dk_out, a.dk.seq_stride, seq.len_k - n0, warp,
                                lane);
  StoreAccumulatorRows<T, kDim>(dv, 1.0f, sm.s, dv_out, a.dv.seq_stride, seq.len_k - n0, warp,
                                lane);
}

// Computes, for the warp's 16 query rows of tile (m0, n0), dS = P * (dP - D) into sm.s (fp32).
// REQUIRES: sm.q, sm.d_o, sm.k, sm.v, sm.lse, sm.delta loaded for the tile.
template <typename T, int kDim>
__device__ __forceinline__ void QueryRowsScoreGrad(const BackwardSmem<T, kDim>& sm,
                                                   const spillway_attention_sdpa_problem_t& p,
                                                   const Sequence& seq, const T* bias,
                                                   int64_t bias_row_stride, float scale_log2,
                                                   int m0, int n0, int warp, int lane) {
  constexpr int kLdS = kSdpaScorePitch;
  const int diag = seq.len_k - seq.len_q;
  RowsTimesColsT<T, kDim>(sm.q, sm.k, sm.s, warp);     // S = Q K^T
  RowsTimesColsT<T, kDim>(sm.d_o, sm.v, sm.dp, warp);  // dP = dO V^T
  __syncwarp();
  for (int r = 0; r < 16; ++r) {
    const int row = warp * 16 + r;
    const int i = m0 + row;
    for (int c = lane; c < kN; c += 32) {
      const int j = n0 + c;
      const bool visible = i < seq.len_q && j < seq.len_k && (!p.causal || j <= i + diag);
      float logit = sm.s[row * kLdS + c] * scale_log2;
      if (bias != nullptr && visible)
        logit += ToFloat(bias[int64_t{i} * bias_row_stride + j]) * kLog2e;
      const float prob = visible ? exp2f(logit - sm.lse[row]) : 0.0f;
      sm.s[row * kLdS + c] = prob * (sm.dp[row * kLdS + c] - sm.delta[row]);
    }
  }
  __syncwarp();
}

// One block per (64 queries, query head, sequence): dQ = scale * sum_j dS K.
template <typename T, int kDim>
__global__ void __launch_bounds__(kSdpaThreads)
    SdpaDqKernel(spillway_attention_sdpa_backward_args_t a, float scale, const float* delta) {
  constexpr int kLdT = SdpaInputPitch(kDim);
  constexpr int kLdP = kSdpaProbPitch;
  extern __shared__ __align__(128) unsigned char smem[];
  const BackwardSmem<T, kDim> sm(smem);
  const spillway_attention_sdpa_problem_t& p = a.problem;
  const int b = blockIdx.z, h = blockIdx.y, m0 = blockIdx.x * kM;
  const Sequence seq = GetSequence(p, b);
  if (m0 >= seq.len_q) return;
  const int hk = h / (p.num_heads_q / p.num_heads_kv);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int diag = seq.len_k - seq.len_q;
  const T* bias = BiasBase<T>(a.bias, b, h);

  const T* q = static_cast<const T*>(a.q.data) + RowOffset(a.q, seq, seq.token_q, h, m0);
  const T* d_o = static_cast<const T*>(a.d_o.data) + RowOffset(a.d_o, seq, seq.token_q, h, m0);
  const T* k = static_cast<const T*>(a.k.data) + RowOffset(a.k, seq, seq.token_k, hk, 0);
  const T* v = static_cast<const T*>(a.v.data) + RowOffset(a.v, seq, seq.token_k, hk, 0);
  LoadRows<T, kM, kDim, kLdT, kSdpaThreads>(sm.q, q, a.q.seq_stride, seq.len_q - m0);
  LoadRows<T, kM, kDim, kLdT, kSdpaThreads>(sm.d_o, d_o, a.d_o.seq_stride, seq.len_q - m0);
  LoadRowStats(a.lse, delta, seq, p.num_heads_q, h, m0, sm.lse, sm.delta);
  Accumulator dq[kDim / 16];
#pragma unroll
  for (int j = 0; j < kDim / 16; ++j) wmma::fill_fragment(dq[j], 0.0f);

  const int n_end = p.causal ? min(seq.len_k, m0 + kM + diag) : seq.len_k;
  for (int n0 = 0; n0 < n_end; n0 += kN) {
    __syncthreads();
    LoadRows<T, kN, kDim, kLdT, kSdpaThreads>(sm.k, k + n0 * a.k.seq_stride, a.k.seq_stride,
                                              seq.len_k - n0);
    LoadRows<T, kN, kDim, kLdT, kSdpaThreads>(sm.v, v + n0 * a.v.seq_stride, a.v.seq_stride,
                                              seq.len_k - n0);
    __syncthreads();
    QueryRowsScoreGrad<T, kDim>(sm, p, seq, bias, a.bias.row_stride, scale * kLog2e, m0, n0, warp,
                                lane);
    for (int r = 0; r < 16; ++r) {
      const int row = warp * 16 + r;
      for (int c = lane; c < kN; c += 32) {
        sm.p[row * kLdP + c] = FromFloat<T>(sm.s[row * kSdpaScorePitch + c]);
      }
    }
    __syncwarp();
    AccumulateProbsTimes<T, kDim>(dq, sm.p, sm.k, warp);  // dQ += dS K
  }
  __syncthreads();
  T* dq_out = static_cast<T*>(a.dq.data) + RowOffset(a.dq, seq, seq.token_q, h, m0);
  StoreAccumulatorRows<T, kDim>(dq, scale, sm.s, dq_out, a.dq.seq_stride, seq.len_q - m0, warp,
                                lane);
}

// One block per dBias tile: (64 keys) x (64 queries, or every query when the bias broadcasts
// over rows) x one non-broadcast (batch, head) slice. It sums dS over every (batch, head) that
// shares the slice, in a fixed order, and writes the tile once (zeros where nothing maps).
template <typename T, int kDim>
__global__ void __launch_bounds__(kSdpaThreads)
    SdpaDbiasKernel(spillway_attention_sdpa_backward_args_t a, float scale, const float* delta) {
  constexpr int kLdT = SdpaInputPitch(kDim);
  constexpr int kLdS = kSdpaScorePitch;
  extern __shared__ __align__(128) unsigned char smem[];
  const BackwardSmem<T, kDim> sm(smem);
  const spillway_attention_sdpa_problem_t& p = a.problem;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n0 = blockIdx.x * kN;
  const bool row_broadcast = a.bias.row_stride == 0;
  const int m_tile0 = row_broadcast ? 0 : blockIdx.y * kM;
  const int head_slices = a.bias.head_stride == 0 ? 1 : p.num_heads_q;
  const int sb = blockIdx.z / head_slices, sh = blockIdx.z % head_slices;
  const int b_begin = a.bias.batch_stride == 0 ? 0 : sb;
  const int b_end = a.bias.batch_stride == 0 ? p.batch : sb + 1;
  const int h_begin = a.bias.head_stride == 0 ? 0 : sh;
  const int h_end = a.bias.head_stride == 0 ? p.num_heads_q : sh + 1;
  const int group = p.num_heads_q / p.num_heads_kv;

  for (int e = threadIdx.x; e < kM * kLdS; e += kSdpaThreads) sm.acc[e] = 0.0f;
  for (int b = b_begin; b < b_end; ++b) {
    const Sequence seq = GetSequence(p, b);
    if (n0 >= seq.len_k) continue;
    const int m_end = row_broadcast ? seq.len_q : min(seq.len_q, m_tile0 + kM);
    for (int h = h_begin; h < h_end; ++h) {
      const int hk = h / group;
      const T* bias = BiasBase<T>(a.bias, b, h);
      for (int m0 = m_tile0; m0 < m_end; m0 += kM) {
        __syncthreads();
        const T* q = static_cast<const T*>(a.q.data) + RowOffset(a.q, seq, seq.token_q, h, m0);
        const T* d_o =
            static_cast<const T*>(a.d_o.data) + RowOffset(a.d_o, seq, seq.token_q, h, m0);
        const T* k = static_cast<const T*>(a.k.data) + RowOffset(a.k, seq, seq.token_k, hk, n0);
        const T* v = static_cast<const T*>(a.v.data) + RowOffset(a.v, seq, seq.token_k, hk, n0);
        LoadRows<T, kM, kDim, kLdT, kSdpaThreads>(sm.q, q, a.q.seq_stride, seq.len_q - m0);
        LoadRows<T, kM, kDim, kLdT, kSdpaThreads>(sm.d_o, d_o, a.d_o.seq_stride, seq.len_q - m0);
        LoadRows<T, kN, kDim, kLdT, kSdpaThreads>(sm.k, k, a.k.seq_stride, seq.len_k - n0);
        LoadRows<T, kN, kDim, kLdT, kSdpaThreads>(sm.v, v, a.v.seq_stride, seq.len_k - n0);
        LoadRowStats(a.lse, delta, seq, p.num_heads_q, h, m0, sm.lse, sm.delta);
        __syncthreads();
        QueryRowsScoreGrad<T, kDim>(sm, p, seq, bias, a.bias.row_stride, scale * kLog2e, m0, n0,
                                    warp, lane);
        if (row_broadcast) {
          __syncthreads();  // column sums read every warp's rows
          if (threadIdx.x < kN) {
            float sum = 0.0f;
            for (int r = 0; r < kM; ++r) sum += sm.s[r * kLdS + threadIdx.x];
            sm.acc[threadIdx.x] += sum;
          }
        } else {
          for (int r = 0; r < 16; ++r) {
            const int row = warp * 16 + r;
            for (int c = lane; c < kN; c += 32) sm.acc[row * kLdS + c] += sm.s[row * kLdS + c];
          }
        }
      }
    }
  }
  __syncthreads();
  T* out = static_cast<T*>(a.dbias.data) + sb * a.dbias.batch_stride + sh * a.dbias.head_stride;
  const int rows = row_broadcast ? 1 : kM;
  for (int e = threadIdx.x; e < rows * kN; e += kSdpaThreads) {
    const int r = e / kN, c = e % kN;
    const int i = m_tile0 + r, j = n0 + c;
    if (i < p.seqlen_q && j < p.seqlen_k) {
      out[int64_t{i} * a.dbias.row_stride + j] = FromFloat<T>(sm.acc[r * kLdS + c]);
    }
  }
}

template <typename T, int kDim>
Check Launch(const spillway_attention_sdpa_backward_args_t& a, float scale, void* workspace,
             cudaStream_t stream) {
  static SmemOptIn dkdv_opt_in, dq_opt_in, dbias_opt_in;
  const spillway_attention_sdpa_problem_t& p = a.problem;
  if (p.cu_seqlens_q != nullptr) {
    if (Check c = LaunchVarlenCheck(p, workspace, stream); !c.ok()) return c;
  }
  float* delta =
      reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) + SdpaStatusBytes(p));
  const std::size_t smem = SdpaBackwardSmemBytes(kDim);
  const dim3 block(kSdpaThreads);
  if (Check c = LaunchKernel("SDPA backward D launch", SdpaDeltaKernel<T, kDim>,
                             dim3((p.seqlen_q + 3) / 4, p.num_heads_q, p.batch), dim3(128), 0,
                             stream, a, delta);
      !c.ok()) {
    return c;
  }
  if (Check c =
          LaunchKernelWithSmem(dkdv_opt_in, "SDPA backward dK/dV launch", SdpaDkDvKernel<T, kDim>,
                               dim3((p.seqlen_k + kN - 1) / kN, p.num_heads_kv, p.batch), block,
                               smem, stream, a, scale, delta);
      !c.ok()) {
    return c;
  }
  if (Check c = LaunchKernelWithSmem(dq_opt_in, "SDPA backward dQ launch", SdpaDqKernel<T, kDim>,
                                     dim3((p.seqlen_q + kM - 1) / kM, p.num_heads_q, p.batch),
                                     block, smem, stream, a, scale, delta);
      !c.ok() || a.dbias.data == nullptr) {
    return c;
  }
  const unsigned slices = (a.bias.batch_stride == 0 ? 1u : unsigned(p.batch)) *
                          (a.bias.head_stride == 0 ? 1u : unsigned(p.num_heads_q));
  const unsigned row_tiles = a.bias.row_stride == 0 ? 1u : unsigned((p.seqlen_q + kM - 1) / kM);
  return LaunchKernelWithSmem(dbias_opt_in, "SDPA backward dBias launch", SdpaDbiasKernel<T, kDim>,
                              dim3((p.seqlen_k + kN - 1) / kN, row_tiles, slices), block,
                              SdpaBiasGradSmemBytes(kDim), stream, a, scale, delta);
}

}  // namespace
}  // namespace spillway::attention::kernels

namespace spillway::attention::detail {

Check LaunchSdpaBackward(const spillway_attention_sdpa_backward_args_t& a, float scale,
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
