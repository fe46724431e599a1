// Fused additive (Bahdanau) attention, forward and backward: energies v . tanh(pq_t + pk_s) are
// computed tile by tile in shared memory and never stored; the backward recomputes them (and
// tanh) instead of keeping the [batch, target, source, units] intermediate. No atomics.
#include <cuda_runtime.h>

#include "attention_kernels/src/kernel_common.cuh"
#include "attention_kernels/src/launch.h"
#include "attention_kernels/src/tiling.h"
#include "attention_kernels/src/validate.h"

namespace spillway::attention::kernels {
namespace {

constexpr int kTile = kAdditiveTile;
constexpr int kThreads = kAdditiveThreads;
static_assert(kThreads == kTile * kTile, "one thread per (target, source) pair of a tile");

// Bump allocator over dynamic shared memory; offsets follow the order tiling.h counts.
struct SmemCursor {
  unsigned char* next;
  template <typename U>
  __device__ U* Take(std::size_t bytes) {
    U* p = reinterpret_cast<U*>(next);
    next += Align16(bytes);
    return p;
  }
};

struct AdditiveRows {
  const void* data;
  int64_t batch_stride;
  int64_t seq_stride;
};

// Copies rows [row0, row0 + kTile) of batch b (width `width`) into a tile of pitch `pitch`,
// zero past `valid_rows`.
template <typename T>
__device__ void LoadTile(T* tile, const spillway_attention_tensor_t& t, int b, int row0,
                         int valid_rows, int width, int pitch) {
  const T* base = static_cast<const T*>(t.data) + b * t.batch_stride;
  for (int e = threadIdx.x; e < kTile * width; e += kThreads) {
    const int r = e / width, c = e % width;
    tile[r * pitch + c] = r < valid_rows ? base[int64_t{row0 + r} * t.seq_stride + c] : T(0.0f);
  }
}

// Sequence b's source length, or -1 when source_lengths[b] is outside [0, source_len]: such a
// sequence is not computed at all, none of its rows is read or written (never clamped;
// SourceLengthsCheckKernel reports it). The same for every thread of a block (one b per block).
__device__ __forceinline__ int SourceLength(const spillway_attention_additive_problem_t& p, int b) {
  if (p.source_lengths == nullptr) return p.source_len;
  const int length = p.source_lengths[b];
  return SourceLengthErrors(length, p.source_len) == 0 ? length : -1;
}

// e[t][s] = sum_u v[u] tanh(pq[t][u] + pk[s][u]) for this thread's pair of the tile.
template <typename T>
__device__ __forceinline__ float Energy(const T* pq, const T* pk, const float* v, int units, int t,
                                        int s) {
  const int pitch = AdditiveProjPitch(units);
  float e = 0.0f;
  for (int u = 0; u < units; ++u)
    e += v[u] * tanhf(ToFloat(pq[t * pitch + u]) + ToFloat(pk[s * pitch + u]));
  return e;
}

// One block per (16 targets, sequence): online softmax over 16-source tiles.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    AdditiveForwardKernel(spillway_attention_additive_forward_args_t a) {
  const spillway_attention_additive_problem_t& p = a.problem;
  const int units = p.units, dim = p.value_dim, pitch = AdditiveProjPitch(units);
  extern __shared__ __align__(128) unsigned char smem[];
  SmemCursor cur{smem};
  T* s_pq = cur.Take<T>(AdditiveProjTileBytes(units));
  T* s_pk = cur.Take<T>(AdditiveProjTileBytes(units));
  T* s_val = cur.Take<T>(AdditiveValueTileBytes(dim));
  float* s_v = cur.Take<float>(std::size_t(units) * 4);
  float* s_ctx = cur.Take<float>(std::size_t(kTile) * dim * 4);
  float* s_p = cur.Take<float>(AdditivePairBytes());
  float* s_stat = cur.Take<float>(3 * kTile * 4);  // max, sum, rescale per target row
  const int b = blockIdx.y, t0 = blockIdx.x * kTile;
  const int tt = threadIdx.x / kTile, ss = threadIdx.x % kTile;
  const int len_s = SourceLength(p, b);
  if (len_s < 0) return;  // a bad length: context and lse rows keep what they held
  const int rows_t = min(kTile, p.target_len - t0);

  LoadTile(s_pq, a.query_proj, b, t0, rows_t, units, pitch);
  for (int u = threadIdx.x; u < units; u += kThreads) s_v[u] = a.attention_v[u];
  for (int e = threadIdx.x; e < kTile * dim; e += kThreads) s_ctx[e] = 0.0f;
  if (threadIdx.x < kTile) {
    s_stat[threadIdx.x] = -INFINITY;
    s_stat[kTile + threadIdx.x] = 0.0f;
  }
  for (int s0 = 0; s0 < len_s; s0 += kTile) {
    __syncthreads();
    const int rows_s = min(kTile, len_s - s0);
    LoadTile(s_pk, a.key_proj, b, s0, rows_s, units, pitch);
    LoadTile(s_val, a.values, b, s0, rows_s, dim, dim);
    __syncthreads();
    s_p[tt * kTile + ss] = ss < rows_s ? Energy(s_pq, s_pk, s_v, units, tt, ss) : -INFINITY;
    __syncthreads();
    if (threadIdx.x < kTile) {  // one thread per target row: online softmax update
      const int t = threadIdx.x;
      float m = s_stat[t];
      for (int s = 0; s < kTile; ++s) m = fmaxf(m, s_p[t * kTile + s]);
      const float base = m == -INFINITY ? 0.0f : m;
      const float alpha = expf(s_stat[t] - base);
      float sum = 0.0f;
      for (int s = 0; s < kTile; ++s) {
        const float pr = expf(s_p[t * kTile + s] - base);
        s_p[t * kTile + s] = pr;
        sum += pr;
      }
      s_stat[t] = m;
      s_stat[kTile + t] = s_stat[kTile + t] * alpha + sum;
      s_stat[2 * kTile + t] = alpha;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < kTile * dim; e += kThreads) {
      const int t = e / dim, d = e % dim;
      float c = s_ctx[e] * s_stat[2 * kTile + t];
      for (int s = 0; s < kTile; ++s) c += s_p[t * kTile + s] * ToFloat(s_val[s * dim + d]);
      s_ctx[e] = c;
    }
  }
  __syncthreads();
  T* ctx = static_cast<T*>(a.context.data) + b * a.context.batch_stride;
  for (int e = threadIdx.x; e < rows_t * dim; e += kThreads) {
    const int t = e / dim, d = e % dim;
    const float sum = s_stat[kTile + t];
    ctx[int64_t{t0 + t} * a.context.seq_stride + d] =
        FromFloat<T>(sum > 0.0f ? s_ctx[e] / sum : 0.0f);
  }
  if (threadIdx.x < rows_t) {
    const float sum = s_stat[kTile + threadIdx.x];
    a.lse[int64_t{b} * p.target_len + t0 + threadIdx.x] =
        sum > 0.0f ? s_stat[threadIdx.x] + logf(sum) : -INFINITY;
  }
}

// D[b, t] = d_context[t] . context[t]: one warp per target row.
template <typename T>
__global__ void __launch_bounds__(128)
    AdditiveDeltaKernel(spillway_attention_additive_backward_args_t a, float* delta) {
  const int b = blockIdx.y, t = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (t >= a.problem.target_len || SourceLength(a.problem, b) < 0) return;
  const T* c = static_cast<const T*>(a.context.data) + b * a.context.batch_stride +
               int64_t{t} * a.context.seq_stride;
  const T* dc = static_cast<const T*>(a.d_context.data) + b * a.d_context.batch_stride +
                int64_t{t} * a.d_context.seq_stride;
  float sum = 0.0f;
  for (int d = lane; d < a.problem.value_dim; d += 32) sum += ToFloat(c[d]) * ToFloat(dc[d]);
  sum = WarpSum(sum);
  if (lane == 0) delta[int64_t{b} * a.problem.target_len + t] = sum;
}

// Shared memory of both backward kernels (the key kernel adds a d_values accumulator).
template <typename T>
struct BackwardTiles {
  T* pq;
  T* pk;
  T* val;
  T* dc;
  float* v;
  float* grad;  // d_query_proj (query kernel) or d_key_proj (key kernel) accumulator
  float* p;
  float* de;
  float* lse;
  float* delta;
  float* dval;  // key kernel only
  __device__ BackwardTiles(unsigned char* base, int units, int dim) {
    SmemCursor cur{base};
    pq = cur.Take<T>(AdditiveProjTileBytes(units));
    pk = cur.Take<T>(AdditiveProjTileBytes(units));
    val = cur.Take<T>(AdditiveValueTileBytes(dim));
    dc = cur.Take<T>(AdditiveValueTileBytes(dim));
    v = cur.Take<float>(std::size_t(units) * 4);
    grad = cur.Take<float>(std::size_t(kTile) * units * 4);
    p = cur.Take<float>(AdditivePairBytes());
    de = cur.Take<float>(AdditivePairBytes());
    lse = cur.Take<float>(kTile * 4);
    delta = cur.Take<float>(kTile * 4);
    dval = cur.Take<float>(std::size_t(kTile) * dim * 4);
  }
};

// For the tile (targets t0.., sources s0..) with pq, pk, val, dc, lse, delta loaded: this
// thread's pair gets p = exp(e - lse) and de = p * (dc_t . val_s - D_t), or 0 where masked.
template <typename T>
__device__ void PairGradients(const BackwardTiles<T>& sm, int units, int dim, int rows_t,
                              int rows_s) {
  const int tt = threadIdx.x / kTile, ss = threadIdx.x % kTile;
  float pr = 0.0f, de = 0.0f;
  if (tt < rows_t && ss < rows_s) {
    pr = expf(Energy(sm.pq, sm.pk, sm.v, units, tt, ss) - sm.lse[tt]);
    float dalpha = 0.0f;
    for (int d = 0; d < dim; ++d)
      dalpha += ToFloat(sm.dc[tt * dim + d]) * ToFloat(sm.val[ss * dim + d]);
    de = pr * (dalpha - sm.delta[tt]);
  }
  sm.p[tt * kTile + ss] = pr;
  sm.de[tt * kTile + ss] = de;
}

template <typename T>
__device__ void LoadTargetStats(const BackwardTiles<T>& sm, const float* lse, const float* delta,
                                int b, int target_len, int t0, int rows_t) {
  if (threadIdx.x < kTile) {
    const int t = threadIdx.x;
    float l = INFINITY, d = 0.0f;
    if (t < rows_t) {
      l = lse[int64_t{b} * target_len + t0 + t];
      l = l == -INFINITY ? INFINITY : l;  // a row with no source: every probability is 0
      d = delta[int64_t{b} * target_len + t0 + t];
    }
    sm.lse[t] = l;
    sm.delta[t] = d;
  }
}

// One block per (16 targets, sequence): d_query_proj for its rows, and the block's partial sum
// of d_attention_v (reduced later in a fixed order). Thread u-loops own units.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    AdditiveQueryGradKernel(spillway_attention_additive_backward_args_t a, const float* delta,
                            float* dv_partial) {
  constexpr int kMaxUnitsPerThread = kAdditiveMaxUnits / kThreads;
  const spillway_attention_additive_problem_t& p = a.problem;
  const int units = p.units, dim = p.value_dim, pitch = AdditiveProjPitch(units);
  extern __shared__ __align__(128) unsigned char smem[];
  const BackwardTiles<T> sm(smem, units, dim);
  const int b = blockIdx.y, t0 = blockIdx.x * kTile;
  const int len_s = SourceLength(p, b);
  float* partial = dv_partial + (int64_t{b} * gridDim.x + blockIdx.x) * units;
  if (len_s < 0) {  // a bad length: d_query_proj keeps what it held, nothing added to d_v
    for (int u = threadIdx.x; u < units; u += kThreads) partial[u] = 0.0f;
    return;
  }
  const int rows_t = min(kTile, p.target_len - t0);
  LoadTile(sm.pq, a.query_proj, b, t0, rows_t, units, pitch);
  LoadTile(sm.dc, a.d_context, b, t0, rows_t, dim, dim);
  for (int u = threadIdx.x; u < units; u += kThreads) sm.v[u] = a.attention_v[u];
  for (int e = threadIdx.x; e < kTile * units; e += kThreads) sm.grad[e] = 0.0f;
  LoadTargetStats(sm, a.lse, delta, b, p.target_len, t0, rows_t);
  float dv[kMaxUnitsPerThread] = {};
  for (int s0 = 0; s0 < len_s; s0 += kTile) {
    __syncthreads();
    const int rows_s = min(kTile, len_s - s0);
    LoadTile(sm.pk, a.key_proj, b, s0, rows_s, units, pitch);
    LoadTile(sm.val, a.values, b, s0, rows_s, dim, dim);
    __syncthreads();
    PairGradients(sm, units, dim, rows_t, rows_s);
    __syncthreads();
#pragma unroll
    for (int n = 0; n < kMaxUnitsPerThread; ++n) {
      const int u = threadIdx.x + n * kThreads;
      if (u >= units) break;
      for (int t = 0; t < rows_t; ++t) {
        const float q = ToFloat(sm.pq[t * pitch + u]);
        float g = 0.0f;
        for (int s = 0; s < rows_s; ++s) {
          const float th = tanhf(q + ToFloat(sm.pk[s * pitch + u]));
          const float de = sm.de[t * kTile + s];
          g += de * (1.0f - th * th);
          dv[n] += de * th;
        }
        sm.grad[t * units + u] += g * sm.v[u];
      }
    }
  }
  __syncthreads();
  T* dq = static_cast<T*>(a.d_query_proj.data) + b * a.d_query_proj.batch_stride;
  for (int e = threadIdx.x; e < rows_t * units; e += kThreads) {
    const int t = e / units, u = e % units;
    dq[int64_t{t0 + t} * a.d_query_proj.seq_stride + u] = FromFloat<T>(sm.grad[e]);
  }
#pragma unroll
  for (int n = 0; n < kMaxUnitsPerThread; ++n) {
    const int u = threadIdx.x + n * kThreads;
    if (u < units) partial[u] = dv[n];
  }
}

// One block per (16 sources, sequence): d_key_proj and d_values for its rows, over all targets.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    AdditiveKeyGradKernel(spillway_attention_additive_backward_args_t a, const float* delta) {
  constexpr int kMaxUnitsPerThread = kAdditiveMaxUnits / kThreads;
  const spillway_attention_additive_problem_t& p = a.problem;
  const int units = p.units, dim = p.value_dim, pitch = AdditiveProjPitch(units);
  extern __shared__ __align__(128) unsigned char smem[];
  const BackwardTiles<T> sm(smem, units, dim);
  const int b = blockIdx.y, s0 = blockIdx.x * kTile;
  const int len_s = SourceLength(p, b);
  if (len_s < 0) return;  // a bad length: d_key_proj and d_values rows keep what they held
  const int rows_s = max(0, min(kTile, len_s - s0));
  LoadTile(sm.pk, a.key_proj, b, s0, rows_s, units, pitch);
  LoadTile(sm.val, a.values, b, s0, rows_s, dim, dim);
  for (int u = threadIdx.x; u < units; u += kThreads) sm.v[u] = a.attention_v[u];
  for (int e = threadIdx.x; e < kTile * units; e += kThreads) sm.grad[e] = 0.0f;
  for (int e = threadIdx.x; e < kTile * dim; e += kThreads) sm.dval[e] = 0.0f;
  for (int t0 = 0; rows_s > 0 && t0 < p.target_len; t0 += kTile) {
    __syncthreads();
    const int rows_t = min(kTile, p.target_len - t0);
    LoadTile(sm.pq, a.query_proj, b, t0, rows_t, units, pitch);
    LoadTile(sm.dc, a.d_context, b, t0, rows_t, dim, dim);
    LoadTargetStats(sm, a.lse, delta, b, p.target_len, t0, rows_t);
    __syncthreads();
    PairGradients(sm, units, dim, rows_t, rows_s);
    __syncthreads();
#pragma unroll
    for (int n = 0; n < kMaxUnitsPerThread; ++n) {
      const int u = threadIdx.x + n * kThreads;
      if (u >= units) break;
      for (int s = 0; s < rows_s; ++s) {
        const float k = ToFloat(sm.pk[s * pitch + u]);
        float g = 0.0f;
        for (int t = 0; t < rows_t; ++t) {
          const float th = tanhf(ToFloat(sm.pq[t * pitch + u]) + k);
          g += sm.de[t * kTile + s] * (1.0f - th * th);
        }
        sm.grad[s * units + u] += g * sm.v[u];
      }
    }
    for (int e = threadIdx.x; e < kTile * dim; e += kThreads) {
      const int s = e / dim, d = e % dim;
      float acc = 0.0f;
      for (int t = 0; t < rows_t; ++t) acc += sm.p[t * kTile + s] * ToFloat(sm.dc[t * dim + d]);
      sm.dval[e] += acc;
    }
  }
  __syncthreads();
  // Every source row of the tile is written, zeros past the sequence's length.
  const int rows_out = min(kTile, p.source_len - s0);
  T* dk = static_cast<T*>(a.d_key_proj.data) + b * a.d_key_proj.batch_stride;
  for (int e = threadIdx.x; e < rows_out * units; e += kThreads) {
    const int s = e / units, u = e % units;
    dk[int64_t{s0 + s} * a.d_key_proj.seq_stride + u] = FromFloat<T>(sm.grad[e]);
  }
  T* dval = static_cast<T*>(a.d_values.data) + b * a.d_values.batch_stride;
  for (int e = threadIdx.x; e < rows_out * dim; e += kThreads) {
    const int s = e / dim, d = e % dim;
    dval[int64_t{s0 + s} * a.d_values.seq_stride + d] = FromFloat<T>(sm.dval[e]);
  }
}

// d_attention_v[u] = sum over (batch, target tile) partials, in a fixed order.
__global__ void AdditiveVGradReduceKernel(const float* partial, int64_t count, int units,
                                          float* d_v) {
  const int u = blockIdx.x * blockDim.x + threadIdx.x;
  if (u >= units) return;
  float sum = 0.0f;
  for (int64_t n = 0; n < count; ++n) sum += partial[n * units + u];
  d_v[u] = sum;
}

template <typename T>
Check LaunchForward(const spillway_attention_additive_forward_args_t& a, void* workspace,
                    cudaStream_t stream) {
  static SmemOptIn opt_in;
  const spillway_attention_additive_problem_t& p = a.problem;
  if (p.source_lengths != nullptr) {
    if (Check c = LaunchSourceLengthsCheck(p, workspace, stream); !c.ok()) return c;
  }
  return LaunchKernelWithSmem(opt_in, "additive forward launch", AdditiveForwardKernel<T>,
                              dim3((p.target_len + kTile - 1) / kTile, p.batch), dim3(kThreads),
                              AdditiveForwardSmemBytes(p.units, p.value_dim), stream, a);
}

template <typename T>
Check LaunchBackward(const spillway_attention_additive_backward_args_t& a, void* workspace,
                     cudaStream_t stream) {
  static SmemOptIn query_opt_in, key_opt_in;
  const spillway_attention_additive_problem_t& p = a.problem;
  if (p.source_lengths != nullptr) {
    if (Check c = LaunchSourceLengthsCheck(p, workspace, stream); !c.ok()) return c;
  }
  unsigned char* const after_status =
      static_cast<unsigned char*>(workspace) + AdditiveStatusBytes(p);
  float* delta = reinterpret_cast<float*>(after_status);
  float* partial = reinterpret_cast<float*>(after_status + AdditiveDeltaBytes(p));
  const int target_tiles = (p.target_len + kTile - 1) / kTile;
  if (Check c = LaunchKernel("additive backward D launch", AdditiveDeltaKernel<T>,
                             dim3((p.target_len + 3) / 4, p.batch), dim3(128), 0, stream, a, delta);
      !c.ok()) {
    return c;
  }
  if (Check c =
          LaunchKernelWithSmem(query_opt_in, "additive backward d_query launch",
                               AdditiveQueryGradKernel<T>, dim3(target_tiles, p.batch),
                               dim3(kThreads), AdditiveQueryGradSmemBytes(p.units, p.value_dim),
                               stream, a, static_cast<const float*>(delta), partial);
      !c.ok()) {
    return c;
  }
  if (Check c = LaunchKernelWithSmem(key_opt_in, "additive backward d_key launch",
                                     AdditiveKeyGradKernel<T>,
                                     dim3((p.source_len + kTile - 1) / kTile, p.batch),
                                     dim3(kThreads), AdditiveKeyGradSmemBytes(p.units, p.value_dim),
                                     stream, a, static_cast<const float*>(delta));
      !c.ok()) {
    return c;
  }
  return LaunchKernel("additive backward d_v launch", AdditiveVGradReduceKernel,
                      dim3((p.units + 127) / 128), dim3(128), 0, stream,
                      static_cast<const float*>(partial), int64_t{p.batch} * target_tiles, p.units,
                      a.d_attention_v);
}

}  // namespace
}  // namespace spillway::attention::kernels

namespace spillway::attention::detail {

Check LaunchAdditiveForward(const spillway_attention_additive_forward_args_t& a, void* workspace,
                            void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  return a.problem.dtype == SPILLWAY_ATTENTION_BF16
             ? kernels::LaunchForward<__nv_bfloat16>(a, workspace, s)
             : kernels::LaunchForward<__half>(a, workspace, s);
}

Check LaunchAdditiveBackward(const spillway_attention_additive_backward_args_t& a, void* workspace,
                             void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  return a.problem.dtype == SPILLWAY_ATTENTION_BF16
             ? kernels::LaunchBackward<__nv_bfloat16>(a, workspace, s)
             : kernels::LaunchBackward<__half>(a, workspace, s);
}

}  // namespace spillway::attention::detail
