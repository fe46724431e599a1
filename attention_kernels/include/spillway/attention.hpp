// Thin C++ layer over the C attention API (spillway/attention.h): a Status carrying the code and
// message, overloads by argument type, and helpers for the common BSHD/BHSD stride layouts.
#ifndef SPILLWAY_ATTENTION_HPP_
#define SPILLWAY_ATTENTION_HPP_

#include <cstddef>
#include <cstdint>
#include <string>

#include "spillway/attention.h"

namespace spillway::attention {

// A call's outcome: the C status and the thread's message captured right after the call.
class Status {
 public:
  Status() = default;
  explicit Status(spillway_attention_status_t code)
      : code_(code),
        message_(code == SPILLWAY_ATTENTION_SUCCESS ? ""
                                                    : spillway_attention_last_error_message()) {}
  bool ok() const { return code_ == SPILLWAY_ATTENTION_SUCCESS; }
  spillway_attention_status_t code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const {
    return ok() ? "ok" : std::string(spillway_attention_status_string(code_)) + ": " + message_;
  }

 private:
  spillway_attention_status_t code_ = SPILLWAY_ATTENTION_SUCCESS;
  std::string message_;
};

// [batch, seq, heads, dim] contiguous (also the packed varlen layout [tokens, heads, dim]).
inline spillway_attention_tensor_t BshdTensor(const void* data, int64_t seqlen, int64_t heads,
                                              int64_t dim) {
  return {const_cast<void*>(data), seqlen * heads * dim, dim, heads * dim};
}
// [batch, heads, seq, dim] contiguous.
inline spillway_attention_tensor_t BhsdTensor(const void* data, int64_t seqlen, int64_t heads,
                                              int64_t dim) {
  return {const_cast<void*>(data), heads * seqlen * dim, seqlen * dim, dim};
}

inline Status WorkspaceSize(const spillway_attention_sdpa_forward_args_t& a, std::size_t* bytes) {
  return Status(spillway_attention_sdpa_forward_workspace_size(&a, bytes));
}
inline Status WorkspaceSize(const spillway_attention_sdpa_backward_args_t& a, std::size_t* bytes) {
  return Status(spillway_attention_sdpa_backward_workspace_size(&a, bytes));
}
inline Status WorkspaceSize(const spillway_attention_additive_forward_args_t& a,
                            std::size_t* bytes) {
  return Status(spillway_attention_additive_forward_workspace_size(&a, bytes));
}
inline Status WorkspaceSize(const spillway_attention_additive_backward_args_t& a,
                            std::size_t* bytes) {
  return Status(spillway_attention_additive_backward_workspace_size(&a, bytes));
}

// `stream` is a cudaStream_t (passed as void* so this header needs no CUDA headers).
inline Status Launch(const spillway_attention_sdpa_forward_args_t& a, void* workspace,
                     std::size_t workspace_bytes, void* stream) {
  return Status(spillway_attention_sdpa_forward(&a, workspace, workspace_bytes, stream));
}
inline Status Launch(const spillway_attention_sdpa_backward_args_t& a, void* workspace,
                     std::size_t workspace_bytes, void* stream) {
  return Status(spillway_attention_sdpa_backward(&a, workspace, workspace_bytes, stream));
}
inline Status Launch(const spillway_attention_additive_forward_args_t& a, void* workspace,
                     std::size_t workspace_bytes, void* stream) {
  return Status(spillway_attention_additive_forward(&a, workspace, workspace_bytes, stream));
}
inline Status Launch(const spillway_attention_additive_backward_args_t& a, void* workspace,
                     std::size_t workspace_bytes, void* stream) {
  return Status(spillway_attention_additive_backward(&a, workspace, workspace_bytes, stream));
}

// The varlen status a variable-length SDPA call left at the start of `workspace`, after waiting
// for `stream`; `word` (optional) receives the raw status.
inline Status VarlenStatus(const void* workspace, void* stream,
                           spillway_attention_varlen_status_t* word = nullptr) {
  return Status(spillway_attention_sdpa_varlen_status(workspace, stream, word));
}

// The source-length status an additive call with source_lengths left at the start of
// `workspace`, after waiting for `stream`; `word` (optional) receives the raw status.
inline Status AdditiveLengthsStatus(const void* workspace, void* stream,
                                    spillway_attention_varlen_status_t* word = nullptr) {
  return Status(spillway_attention_additive_lengths_status(workspace, stream, word));
}

}  // namespace spillway::attention

#endif  // SPILLWAY_ATTENTION_HPP_
