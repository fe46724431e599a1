// The C API: validate every call, keep the calling thread's last message, and only then hand the
// call to the launchers (launch.h). No exception crosses the extern "C" boundary.
#include <cstddef>
#include <exception>
#include <string>

#include "attention_kernels/src/launch.h"
#include "attention_kernels/src/validate.h"
#include "attention_kernels/src/workspace.h"
#include "spillway/attention.h"

namespace spillway::attention {
namespace {

thread_local std::string last_message;

spillway_attention_status_t Record(const Check& check) {
  last_message = check.ok() ? std::string() : check.message;
  return check.status;
}

// Runs `body` (returning a Check), recording its outcome; a C++ exception becomes a status.
template <typename Body>
spillway_attention_status_t Guarded(Body body) noexcept {
  try {
    return Record(body());
  } catch (const std::exception& e) {
    return Record(
        {SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT, std::string("internal: ") + e.what()});
  } catch (...) {  // recorded too: the previous call's message must not stand for this one
    return Record({SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT, "internal: unknown exception"});
  }
}

Check NullArgs() { return {SPILLWAY_ATTENTION_ERROR_NULL_POINTER, "args is NULL"}; }
Check NullBytes() { return {SPILLWAY_ATTENTION_ERROR_NULL_POINTER, "bytes is NULL"}; }

// Validates, reports the workspace size. `Validate` and `Size` are the per-call functions.
template <typename Args, typename Validate, typename Size>
spillway_attention_status_t WorkspaceSize(const Args* args, std::size_t* bytes, Validate validate,
                                          Size size) {
  return Guarded([&]() -> Check {
    if (args == nullptr) return NullArgs();
    if (bytes == nullptr) return NullBytes();
    Check check = validate(*args);
    if (!check.ok()) return check;
    *bytes = size(*args);
    return {};
  });
}

std::size_t SdpaForwardSize(const spillway_attention_sdpa_forward_args_t& a) {
  return SdpaForwardWorkspaceBytes(a.problem);
}
std::size_t SdpaBackwardSize(const spillway_attention_sdpa_backward_args_t& a) {
  return SdpaBackwardWorkspaceBytes(a.problem);
}
std::size_t AdditiveForwardSize(const spillway_attention_additive_forward_args_t& a) {
  return AdditiveForwardWorkspaceBytes(a.problem);
}
std::size_t AdditiveBackwardSize(const spillway_attention_additive_backward_args_t& a) {
  return AdditiveBackwardWorkspaceBytes(a.problem);
}

// Waits for `stream`, reads the status block at the start of `workspace` and describes it.
template <typename Describe>
spillway_attention_status_t ReadStatus(const void* workspace, void* stream,
                                       spillway_attention_varlen_status_t* status,
                                       Describe describe) {
  return Guarded([&]() -> Check {
    if (workspace == nullptr) return {SPILLWAY_ATTENTION_ERROR_NULL_POINTER, "workspace is NULL"};
    spillway_attention_varlen_status_t word{};
    if (Check c = detail::CopyToHost(&word, workspace, sizeof word, stream); !c.ok()) return c;
    if (status != nullptr) *status = word;
    return describe(word);
  });
}

// Validates args and workspace, then launches.
template <typename Args, typename Validate, typename Size, typename Launch>
spillway_attention_status_t Run(const Args* args, void* workspace, std::size_t workspace_bytes,
                                Validate validate, Size size, Launch launch) {
  return Guarded([&]() -> Check {
    if (args == nullptr) return NullArgs();
    Check check = validate(*args);
    if (!check.ok()) return check;
    check = ValidateWorkspace(size(*args), workspace, workspace_bytes);
    if (!check.ok()) return check;
    return launch(*args);
  });
}

}  // namespace
}  // namespace spillway::attention

using namespace spillway::attention;  // NOLINT(build/namespaces): the C API's own file.

extern "C" {

const char* spillway_attention_status_string(spillway_attention_status_t status) {
  switch (status) {
    case SPILLWAY_ATTENTION_SUCCESS:
      return "success";
    case SPILLWAY_ATTENTION_ERROR_NULL_POINTER:
      return "null pointer";
    case SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE:
      return "invalid shape";
    case SPILLWAY_ATTENTION_ERROR_UNSUPPORTED_DTYPE:
      return "unsupported dtype";
    case SPILLWAY_ATTENTION_ERROR_UNSUPPORTED_HEAD_DIM:
      return "unsupported head dim";
    case SPILLWAY_ATTENTION_ERROR_MISALIGNED:
      return "misaligned";
    case SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT:
      return "invalid argument";
    case SPILLWAY_ATTENTION_ERROR_WORKSPACE_TOO_SMALL:
      return "workspace too small";
    case SPILLWAY_ATTENTION_ERROR_NOT_BUILT:
      return "kernels not built";
    case SPILLWAY_ATTENTION_ERROR_CUDA:
      return "CUDA error";
    default:
      break;
  }
  return "unknown status";
}

const char* spillway_attention_last_error_message(void) { return last_message.c_str(); }

int spillway_attention_kernels_available(void) { return detail::KernelsAvailable() ? 1 : 0; }

spillway_attention_status_t spillway_attention_sdpa_forward_workspace_size(
    const spillway_attention_sdpa_forward_args_t* args, size_t* bytes) {
  return WorkspaceSize(args, bytes, ValidateSdpaForward, SdpaForwardSize);
}

spillway_attention_status_t spillway_attention_sdpa_backward_workspace_size(
    const spillway_attention_sdpa_backward_args_t* args, size_t* bytes) {
  return WorkspaceSize(args, bytes, ValidateSdpaBackward, SdpaBackwardSize);
}

spillway_attention_status_t spillway_attention_additive_forward_workspace_size(
    const spillway_attention_additive_forward_args_t* args, size_t* bytes) {
  return WorkspaceSize(args, bytes, ValidateAdditiveForward, AdditiveForwardSize);
}

spillway_attention_status_t spillway_attention_additive_backward_workspace_size(
    const spillway_attention_additive_backward_args_t* args, size_t* bytes) {
  return WorkspaceSize(args, bytes, ValidateAdditiveBackward, AdditiveBackwardSize);
}

spillway_attention_status_t spillway_attention_sdpa_forward(
    const spillway_attention_sdpa_forward_args_t* args, void* workspace, size_t workspace_bytes,
    void* stream) {
  return Run(args, workspace, workspace_bytes, ValidateSdpaForward, SdpaForwardSize,
             [&](const spillway_attention_sdpa_forward_args_t& a) {
               return detail::LaunchSdpaForward(a, ResolvedSoftmaxScale(a.problem), workspace,
                                                stream);
             });
}

spillway_attention_status_t spillway_attention_sdpa_backward(
    const spillway_attention_sdpa_backward_args_t* args, void* workspace, size_t workspace_bytes,
    void* stream) {
  return Run(args, workspace, workspace_bytes, ValidateSdpaBackward, SdpaBackwardSize,
             [&](const spillway_attention_sdpa_backward_args_t& a) {
               return detail::LaunchSdpaBackward(a, ResolvedSoftmaxScale(a.problem), workspace,
                                                 stream);
             });
}

spillway_attention_status_t spillway_attention_additive_forward(
    const spillway_attention_additive_forward_args_t* args, void* workspace, size_t workspace_bytes,
    void* stream) {
  return Run(args, workspace, workspace_bytes, ValidateAdditiveForward, AdditiveForwardSize,
             [&](const spillway_attention_additive_forward_args_t& a) {
               return detail::LaunchAdditiveForward(a, workspace, stream);
             });
}

spillway_attention_status_t spillway_attention_additive_backward(
    const spillway_attention_additive_backward_args_t* args, void* workspace,
    size_t workspace_bytes, void* stream) {
  return Run(args, workspace, workspace_bytes, ValidateAdditiveBackward, AdditiveBackwardSize,
             [&](const spillway_attention_additive_backward_args_t& a) {
               return detail::LaunchAdditiveBackward(a, workspace, stream);
             });
}

spillway_attention_status_t spillway_attention_sdpa_varlen_status(
    const void* workspace, void* stream, spillway_attention_varlen_status_t* status) {
  return ReadStatus(workspace, stream, status, DescribeVarlenStatus);
}

spillway_attention_status_t spillway_attention_additive_lengths_status(
    const void* workspace, void* stream, spillway_attention_varlen_status_t* status) {
  return ReadStatus(workspace, stream, status, DescribeSourceLengthsStatus);
}

}  // extern "C"
