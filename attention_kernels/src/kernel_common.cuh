// Device helpers shared by the attention kernels: fp16/bf16 conversion, sequence bounds (fixed or
// varlen), row addressing through element strides, and cooperative tile loads into shared memory.
#ifndef SPILLWAY_ATTENTION_KERNELS_SRC_KERNEL_COMMON_CUH_
#define SPILLWAY_ATTENTION_KERNELS_SRC_KERNEL_COMMON_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "attention_kernels/src/smem_opt_in.h"
#include "attention_kernels/src/validate.h"
#include "attention_kernels/src/workspace.h"
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

// REQUIRES: varlen, b < p.batch. The query or key offsets of sequence b, as loaded from device.
__device__ __forceinline__ VarlenSpan VarlenQuerySpan(const spillway_attention_sdpa_problem_t& p,
                                                      int b) {
  return {p.cu_seqlens_q[b], p.cu_seqlens_q[b + 1], p.cu_seqlens_q[p.batch]};
}
__device__ __forceinline__ VarlenSpan VarlenKeySpan(const spillway_attention_sdpa_problem_t& p,
                                                    int b) {
  return {p.cu_seqlens_k[b], p.cu_seqlens_k[b + 1], p.cu_seqlens_k[p.batch]};
}

// One sequence of an SDPA batch: its lengths and the token index of its first query and key.
struct Sequence {
  int len_q;
  int len_k;
  int64_t token_q;  // b*seqlen_q, or cu_seqlens_q[b]
  int64_t token_k;
  bool varlen;
  int64_t batch;
  int64_t row_q;  // b*seqlen_q: the first row in buffers padded to seqlen_q rows (D)
};

// REQUIRES: b < p.batch. A varlen sequence whose offsets fail VarlenSequenceErrors gets lengths 0,
// so no kernel reads or writes any of its rows (VarlenCheckKernel reports it).
__device__ __forceinline__ Sequence GetSequence(const spillway_attention_sdpa_problem_t& p, int b) {
  Sequence s;
  s.batch = b;
  s.row_q = int64_t{b} * p.seqlen_q;
  s.varlen = p.cu_seqlens_q != nullptr;
  if (s.varlen) {
    const VarlenSpan q = VarlenQuerySpan(p, b), k = VarlenKeySpan(p, b);
    const bool valid = VarlenSequenceErrors(q, k, p.seqlen_q, p.seqlen_k) == 0;
    s.token_q = valid ? q.begin : 0;
    s.token_k = valid ? k.begin : 0;
    s.len_q = valid ? static_cast<int>(q.end - q.begin) : 0;  // <= seqlen_q: inside the grid
    s.len_k = valid ? static_cast<int>(k.end - k.begin) : 0;
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

// Enqueues `kernel` and returns this launch's own error (cudaLaunchKernelEx's result), never the
// thread's last error, which may hold an earlier failure of the caller's.
template <typename... Params, typename... Args>
Check LaunchKernel(const char* what, void (*kernel)(Params...), dim3 grid, dim3 block,
                   std::size_t smem, cudaStream_t stream, const Args&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  return CudaCheck(cudaLaunchKernelEx(&config, kernel, args...), what);
}

// As LaunchKernel for a kernel using more than the default 48 KB of dynamic shared memory: the
// opt-in is made once per (kernel, device), `opt_in` being that kernel's own record.
template <typename... Params, typename... Args>
Check LaunchKernelWithSmem(SmemOptIn& opt_in, const char* what, void (*kernel)(Params...),
                           dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                           const Args&... args) {
  int device = 0;
  if (Check c = CudaCheck(cudaGetDevice(&device), "cudaGetDevice"); !c.ok()) return c;
  return LaunchWithSmemOptIn(
      opt_in, device, smem,
      [&](std::size_t bytes) {
        const std::string context = std::string("cudaFuncSetAttribute(") + what + ")";
        return CudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(bytes)),
                         context.c_str());
      },
      [&] { return LaunchKernel(what, kernel, grid, block, smem, stream, args...); });
}

// Varlen only: enqueues the check of every sequence's offsets, which writes the call's
// spillway_attention_varlen_status_t to `status` (the start of the workspace).
Check LaunchVarlenCheck(const spillway_attention_sdpa_problem_t& p, void* status,
                        cudaStream_t stream);

// Additive with source_lengths only: enqueues the check of every sequence's source length, which
// writes the call's spillway_attention_varlen_status_t to `status` (the start of the workspace).
Check LaunchSourceLengthsCheck(const spillway_attention_additive_problem_t& p, void* status,
                               cudaStream_t stream);

}  // namespace spillway::attention::kernels

#endif  // SPILLWAY_ATTENTION_KERNELS_SRC_KERNEL_COMMON_CUH_
