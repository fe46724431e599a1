// The varlen offset check (one small block per call with cu_seqlens), and the additive
// source-length check (one per call with source_lengths), each writing the call's
// spillway_attention_varlen_status_t into its workspace, and the copy that reads it back.
#include <cuda_runtime.h>

#include <climits>

#include "attention_kernels/src/kernel_common.cuh"
#include "attention_kernels/src/launch.h"
#include "attention_kernels/src/workspace.h"

namespace spillway::attention::kernels {
namespace {

constexpr int kCheckThreads = 256;

// Run by every thread of a one-block check kernel: the OR of `errors_of(b)` over the batch's
// sequences and the lowest offending b, written to `status`. Deterministic: shared-memory OR and
// min.
template <typename ErrorsOf>
__device__ void WriteStatus(int batch, ErrorsOf errors_of,
                            spillway_attention_varlen_status_t* status) {
  __shared__ unsigned int errors;
  __shared__ int first_bad;
  if (threadIdx.x == 0) {
    errors = 0;
    first_bad = INT_MAX;
  }
  __syncthreads();
  for (int b = threadIdx.x; b < batch; b += kCheckThreads) {
    const uint32_t e = errors_of(b);
    if (e != 0) {
      atomicOr(&errors, e);
      atomicMin(&first_bad, b);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    status->errors = errors;
    status->first_bad_sequence = errors == 0 ? -1 : first_bad;
  }
}

// Every sequence's VarlenSequenceErrors (the same test GetSequence applies before computing it).
__global__ void __launch_bounds__(kCheckThreads)
    VarlenCheckKernel(spillway_attention_sdpa_problem_t p,
                      spillway_attention_varlen_status_t* status) {
  WriteStatus(
      p.batch,
      [&](int b) {
        return VarlenSequenceErrors(VarlenQuerySpan(p, b), VarlenKeySpan(p, b), p.seqlen_q,
                                    p.seqlen_k);
      },
      status);
}

// Every additive sequence's SourceLengthErrors (the test the additive kernels apply before
// computing it).
__global__ void __launch_bounds__(kCheckThreads)
    SourceLengthsCheckKernel(spillway_attention_additive_problem_t p,
                             spillway_attention_varlen_status_t* status) {
  WriteStatus(
      p.batch, [&](int b) { return SourceLengthErrors(p.source_lengths[b], p.source_len); },
      status);
}

}  // namespace

Check LaunchSourceLengthsCheck(const spillway_attention_additive_problem_t& p, void* status,
                               cudaStream_t stream) {
  return LaunchKernel("source lengths check launch", SourceLengthsCheckKernel, dim3(1),
                      dim3(kCheckThreads), 0, stream, p,
                      static_cast<spillway_attention_varlen_status_t*>(status));
}

Check LaunchVarlenCheck(const spillway_attention_sdpa_problem_t& p, void* status,
                        cudaStream_t stream) {
  return LaunchKernel("varlen check launch", VarlenCheckKernel, dim3(1), dim3(kCheckThreads), 0,
                      stream, p, static_cast<spillway_attention_varlen_status_t*>(status));
}

}  // namespace spillway::attention::kernels

namespace spillway::attention::detail {

Check CopyToHost(void* host, const void* device, std::size_t bytes, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  if (Check c = kernels::CudaCheck(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, s),
                                   "cudaMemcpyAsync(varlen status)");
      !c.ok()) {
    return c;
  }
  return kernels::CudaCheck(cudaStreamSynchronize(s), "cudaStreamSynchronize(varlen status)");
}

}  // namespace spillway::attention::detail
