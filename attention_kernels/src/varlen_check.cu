// The varlen offset check (one small block per call with cu_seqlens) that writes the call's
// spillway_attention_varlen_status_t into its workspace, and the copy that reads it back.
#include <cuda_runtime.h>

#include <climits>

#include "attention_kernels/src/kernel_common.cuh"
#include "attention_kernels/src/launch.h"
#include "attention_kernels/src/workspace.h"

namespace spillway::attention::kernels {
namespace {

constexpr int kCheckThreads = 256;

// Every sequence's VarlenSequenceErrors (the same test GetSequence applies before computing it),
// ORed, and the lowest offending sequence. Deterministic: shared-memory OR and min.
__global__ void __launch_bounds__(kCheckThreads)
    VarlenCheckKernel(spillway_attention_sdpa_problem_t p,
                      spillway_attention_varlen_status_t* status) {
  __shared__ unsigned int errors;
  __shared__ int first_bad;
  if (threadIdx.x == 0) {
    errors = 0;
    first_bad = INT_MAX;
  }
  __syncthreads();
  for (int b = threadIdx.x; b < p.batch; b += kCheckThreads) {
    const uint32_t e =
        VarlenSequenceErrors(VarlenQuerySpan(p, b), VarlenKeySpan(p, b), p.seqlen_q, p.seqlen_k);
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

}  // namespace

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
