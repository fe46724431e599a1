// Layout of the SDPA workspace (the varlen status block, then D), the per-sequence check of
// variable-length offsets and of additive attention's source lengths. Plain C++17 constexpr, shared
// by the host (sizes, tests) and the kernels (indexing and the check itself, via
// --expt-relaxed-constexpr), so both agree.
#ifndef SPILLWAY_ATTENTION_KERNELS_SRC_WORKSPACE_H_
#define SPILLWAY_ATTENTION_KERNELS_SRC_WORKSPACE_H_

#include <cstddef>
#include <cstdint>

#include "spillway/attention.h"

namespace spillway::attention {

inline constexpr std::size_t kWorkspaceAlignment = 256;
constexpr std::size_t AlignWorkspace(std::size_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

// A varlen call's workspace starts with its spillway_attention_varlen_status_t, padded so that
// what follows stays 256-byte aligned; calls without cu_seqlens have no status block.
inline constexpr std::size_t kVarlenStatusBytes = kWorkspaceAlignment;
static_assert(sizeof(spillway_attention_varlen_status_t) <= kVarlenStatusBytes);
constexpr std::size_t SdpaStatusBytes(const spillway_attention_sdpa_problem_t& p) {
  return p.cu_seqlens_q != nullptr ? kVarlenStatusBytes : 0;
}

// D = rowsum(dO * O) of the backward, fp32, one per padded query row (b * seqlen_q + i) and head.
// It is indexed by the padded row, never by cu_seqlens, so no offsets can move it out of the
// workspace: i < seqlen_q holds for every row a kernel computes.
constexpr std::size_t SdpaDeltaCount(const spillway_attention_sdpa_problem_t& p) {
  return static_cast<std::size_t>(p.batch) * static_cast<std::size_t>(p.seqlen_q) *
         static_cast<std::size_t>(p.num_heads_q);
}
constexpr int64_t SdpaDeltaIndex(int64_t b, int64_t i, int64_t h, int64_t seqlen_q,
                                 int64_t num_heads_q) {
  return (b * seqlen_q + i) * num_heads_q + h;
}
constexpr std::size_t SdpaForwardWorkspaceBytes(const spillway_attention_sdpa_problem_t& p) {
  return SdpaStatusBytes(p);
}
constexpr std::size_t SdpaBackwardWorkspaceBytes(const spillway_attention_sdpa_problem_t& p) {
  return SdpaStatusBytes(p) + AlignWorkspace(4 * SdpaDeltaCount(p));
}

// The offsets of one varlen sequence b: tokens [begin, end) = [cu[b], cu[b+1]) of `total` =
// cu[batch], for queries or keys.
struct VarlenSpan {
  int64_t begin;
  int64_t end;
  int64_t total;
};

// The error bits (spillway_attention_varlen_error_t) of one sequence; 0 when the kernels may
// compute it. A sequence without errors has 0 <= begin <= end <= total and end - begin <= the
// declared maximum, so it touches only tokens in [0, cu[batch]) and rows below seqlen_q/k,
// whatever the other sequences' offsets are.
constexpr uint32_t VarlenSequenceErrors(const VarlenSpan& q, const VarlenSpan& k, int64_t seqlen_q,
                                        int64_t seqlen_k) {
  uint32_t errors = 0;
  if (q.begin < 0 || q.end < q.begin || q.end > q.total) {
    errors |= SPILLWAY_ATTENTION_VARLEN_Q_OFFSETS;
  } else if (q.end - q.begin > seqlen_q) {
    errors |= SPILLWAY_ATTENTION_VARLEN_Q_TOO_LONG;
  }
  if (k.begin < 0 || k.end < k.begin || k.end > k.total) {
    errors |= SPILLWAY_ATTENTION_VARLEN_K_OFFSETS;
  } else if (k.end - k.begin > seqlen_k) {
    errors |= SPILLWAY_ATTENTION_VARLEN_K_TOO_LONG;
  }
  return errors;
}

// An additive call with source_lengths starts its workspace with the same status block.
constexpr std::size_t AdditiveStatusBytes(const spillway_attention_additive_problem_t& p) {
  return p.source_lengths != nullptr ? kVarlenStatusBytes : 0;
}

// The error bits of one additive sequence's source length; 0 when the kernels may compute it
// (0 <= length <= source_len: a length of 0 is valid, its rows see no source). Lengths are never
// clamped: a sequence with errors is not computed at all.
constexpr uint32_t SourceLengthErrors(int64_t length, int64_t source_len) {
  if (length < 0) return SPILLWAY_ATTENTION_VARLEN_SOURCE_NEGATIVE;
  if (length > source_len) return SPILLWAY_ATTENTION_VARLEN_SOURCE_TOO_LONG;
  return 0;
}

}  // namespace spillway::attention

#endif  // SPILLWAY_ATTENTION_KERNELS_SRC_WORKSPACE_H_
