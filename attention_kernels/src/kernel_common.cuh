// Device helpers shared by the attention kernels: fp16/bf16 conversion, sequence bounds (fixed or
// varlen), row addressing through element strides, and cooperative tile loads into shared memory.
#ifndef SPILLWAY_ATTENTION_KERNELS_SRC_KERNEL_COMMON_CUH_
#define SPILLWAY_ATTENTION_KERNELS_SRC_KERNEL_COMMON_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "attention_kernels/src/validate.h"
#include "spillway/attention.h"

namespace spillway::attention::kernels {

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

__device__ __forceinline__ float WarpMax(float x) {
  for (int offset = 16; offset > 0; offset /= 2)
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}
__device__ __forceinline__ float WarpSum(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// One sequence of an SDPA batch: its lengths and the token index of its first query and key.
struct Sequence {
  int len_q;
  int len_k;
  int64_t token_q;  // b*seqlen_q, or cu_seqlens_q[b]
  int64_t token_k;
  bool varlen;
  int64_t batch;
};

__device__ __forceinline__ Sequence GetSequence(const spillway_attention_sdpa_problem_t& p, int b) {
  Sequence s;
  s.batch = b;
  s.varlen = p.cu_seqlens_q != nullptr;
  if (s.varlen) {
    s.token_q = p.cu_seqlens_q[b];
    s.token_k = p.cu_seqlens_k[b];
    // Lengths beyond the declared maxima are clipped: the grid covers only those.
    s.len_q = min(p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b], p.seqlen_q);
    s.len_k = min(p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b], p.seqlen_k);
  } else {
    s.token_q = int64_t{b} * p.seqlen_q;
    s.token_k = int64_t{b} * p.seqlen_k;
    s.len_q = p.seqlen_q;
    s.len_k = p.seqlen_k;
  }
  return s;
}

// Element offset of row `i` (position within the sequence) of head `h` in tensor `t`.
__device__ __forceinline__ int64_t RowOffset(const spillway_attention_tensor_t& t,
                                             const Sequence& s, int64_t token0, int h, int i) {
  const int64_t head = int64_t{h} * t.head_stride;
  if (s.varlen) return (token0 + i) * t.seq_stride + head;
  return s.batch * t.batch_stride + head + int64_t{i} * t.seq_stride;
}

// Loads `kRows` rows of kDim elements (16-byte aligned, see validation) into a shared tile with
// row pitch kPitch; rows at or past `valid_rows` are zero so masked lanes stay finite.
template <typename T, int kRows, int kDim, int kPitch, int kThreads>
__device__ __forceinline__ void LoadRows(T* tile, const T* base, int64_t row_stride,
                                         int valid_rows) {
  constexpr int kChunksPerRow = kDim * int(sizeof(T)) / 16;
  for (int c = threadIdx.x; c < kRows * kChunksPerRow; c += kThreads) {
    const int row = c / kChunksPerRow;
    const int col = (c % kChunksPerRow) * (16 / int(sizeof(T)));
    uint4 value = make_uint4(0, 0, 0, 0);
    if (row < valid_rows) value = *reinterpret_cast<const uint4*>(base + row * row_stride + col);
    *reinterpret_cast<uint4*>(tile + row * kPitch + col) = value;
  }
}

// Turns a CUDA error into a Check.
inline Check CudaCheck(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return {};
  return {SPILLWAY_ATTENTION_ERROR_CUDA,
          std::string(what) + ": " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error)};
}

}  // namespace spillway::attention::kernels

#endif  // SPILLWAY_ATTENTION_KERNELS_SRC_KERNEL_COMMON_CUH_
