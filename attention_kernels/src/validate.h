// Host-side checking of attention calls (plain C++, no CUDA): every shape, dtype, head dim,
// pointer and alignment rule, with a status and a message, and the workspace each call needs.
#ifndef SPILLWAY_ATTENTION_KERNELS_SRC_VALIDATE_H_
#define SPILLWAY_ATTENTION_KERNELS_SRC_VALIDATE_H_

#include <cstddef>
#include <string>

#include "attention_kernels/src/workspace.h"
#include "spillway/attention.h"

namespace spillway::attention {

// The outcome of a check or a launch: a status and, when it is not SUCCESS, why.
struct Check {
  spillway_attention_status_t status = SPILLWAY_ATTENTION_SUCCESS;
  std::string message;
  bool ok() const { return status == SPILLWAY_ATTENTION_SUCCESS; }
};

Check ValidateSdpaForward(const spillway_attention_sdpa_forward_args_t& args);
Check ValidateSdpaBackward(const spillway_attention_sdpa_backward_args_t& args);
Check ValidateAdditiveForward(const spillway_attention_additive_forward_args_t& args);
Check ValidateAdditiveBackward(const spillway_attention_additive_backward_args_t& args);

// softmax_scale, or 1/sqrt(head_dim) when it is 0.
float ResolvedSoftmaxScale(const spillway_attention_sdpa_problem_t& problem);

// Workspace layouts (the SDPA ones are in workspace.h). REQUIRES: the args passed validation.
// Additive forward: the status block (AdditiveStatusBytes: with source_lengths only). Additive
// backward: the status block, then D per target row, fp32 [batch * target_len], then
// per-(batch, target tile) partial sums of d_attention_v, fp32 [batch * target_tiles * units].
std::size_t AdditiveDeltaBytes(const spillway_attention_additive_problem_t& problem);
std::size_t AdditiveForwardWorkspaceBytes(const spillway_attention_additive_problem_t& problem);
std::size_t AdditiveBackwardWorkspaceBytes(const spillway_attention_additive_problem_t& problem);

// Checks that a caller's workspace is large enough, non-NULL when needed and aligned.
Check ValidateWorkspace(std::size_t needed, const void* workspace, std::size_t bytes);

// SUCCESS for a varlen status without errors; otherwise INVALID_SHAPE naming the first offending
// sequence and each error bit set.
Check DescribeVarlenStatus(const spillway_attention_varlen_status_t& status);
// The same for the status of an additive call with source_lengths.
Check DescribeSourceLengthsStatus(const spillway_attention_varlen_status_t& status);

}  // namespace spillway::attention

#endif  // SPILLWAY_ATTENTION_KERNELS_SRC_VALIDATE_H_
