// The exported hooks, generated from hooked_functions.inc, plus the hand-written ones: the two
// cuGetProcAddress versions and dlsym. Every hook counts the call and forwards to the real driver
// (Intercept, below). What some of them do besides, per function, is in a header by role:
// allocations and frees (hooks_alloc.h), launches (hooks_launch.h), memsets and copies
// (hooks_copy.h), captures and graphs (hooks_graph.h), unloads and context ends
// (hooks_context.h); After<id> runs after the real call, Replace<id> instead of the plain forward
// in run and record mode (hooks_common.h).
//
// Each hook is defined under a hidden name (spillway_hook_<name>) and exported as <name> through
// an alias, so the tables inside the library point at our code even where another object in the
// process also defines <name>.
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>

#include "interpose/hook_table.h"
#include "interpose/hooks_alloc.h"
#include "interpose/hooks_common.h"
#include "interpose/hooks_context.h"
#include "interpose/hooks_copy.h"
#include "interpose/hooks_graph.h"
#include "interpose/hooks_launch.h"
#include "interpose/log.h"
#include "interpose/real_driver.h"
#include "interpose/runtime.h"

#define SPILLWAY_HIDDEN __attribute__((visibility("hidden")))

namespace spillway::interpose {
namespace {

// A hooked function the driver does not export: said once, then CUDA_ERROR_NOT_SUPPORTED.
constinit std::atomic<bool> g_missing_reported[kNumHooks];

CUresult Missing(int index) {
  if (!g_missing_reported[index].exchange(true, std::memory_order_relaxed)) {
    const std::string name(kHookInfo[index].name);
    ReportProblem(LogLevel::kWarn, "%s called but the driver does not export it", name.c_str());
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

template <typename Fn, typename... Args>
CUresult CallReal(int index, Args... args) {
  const Fn real = reinterpret_cast<Fn>(RealFunction(index));
  return real != nullptr ? real(args...) : CUDA_ERROR_NOT_INITIALIZED;
}

// The call in run and off mode: Replace<id> or the real function, then After<id>.
template <HookId id, typename Fn, typename... Args>
inline CUresult Dispatch(Fn real, Args... args) {
  if constexpr (Replace<id>::kActive) {
    if (EngineMode()) return Replace<id>::Run(real, args...);
  }
  const CUresult result = real(args...);
  if (CurrentMode() != Mode::kOff) After<id>::Run(result, args...);
  return result;
}

// The body of every generated hook. No lock, no allocation once the driver is resolved. In record
// mode, Record<id> wraps the call (record_hooks.h).
template <HookId id, typename Fn, typename... Args>
inline CUresult Intercept(Args... args) {
  constexpr int index = Index(id);
  if (ReentrancyGuard::Active()) return CallReal<Fn>(index, args...);
  ReentrancyGuard guard;
  if (!EnsureReady()) return CUDA_ERROR_NOT_INITIALIZED;
  const Fn real = reinterpret_cast<Fn>(RealFunction(index));
  if (real == nullptr) return Missing(index);
  CountCall(index);
  if constexpr (record_hooks::Record<id>::kActive) {
    if (Recording()) [[unlikely]] {
      return record_hooks::Record<id>::Run([&] { return Dispatch<id>(real, args...); }, args...);
    }
  }
  return Dispatch<id>(real, args...);
}

}  // namespace
}  // namespace spillway::interpose

// ---- generated hooks and their exported aliases ----

#define SPILLWAY_HOOK_CUSTOM(kind, name, params, args) \
  extern "C" SPILLWAY_HIDDEN CUresult spillway_hook_##name params;
#define SPILLWAY_HOOK(kind, name, params, args)                                      \
  extern "C" SPILLWAY_HIDDEN CUresult spillway_hook_##name params {                  \
    return ::spillway::interpose::Intercept<::spillway::interpose::HookId::k_##name, \
                                            CUresult(*) params>                      \
        args;                                                                        \
  }
#include "interpose/hooked_functions.inc"

#define SPILLWAY_HOOK(kind, name, params, args)                                    \
  extern "C" __attribute__((visibility("default"), alias("spillway_hook_" #name))) \
  CUresult name params;
#include "interpose/hooked_functions.inc"

namespace spillway::interpose {
namespace {

// Our hook for entry `index` of the list. A switch, not a table: a table of casted function
// pointers would need dynamic initialization, and dlsym may be called before that runs.
void* HookAddress(int index) {
  switch (index) {
#define SPILLWAY_HOOK(kind, name, params, args) \
  case Index(HookId::k_##name):                 \
    return reinterpret_cast<void*>(&spillway_hook_##name);
#include "interpose/hooked_functions.inc"
  }
  return nullptr;
}

// What cuGetProcAddress hands back: our hook when the driver's answer is a function we hook.
// cudart first asks for "cuGetProcAddress" itself; should the driver answer with an entry we do
// not list, the hook for the requested version is returned anyway, so later lookups come here.
void* Redirect(const char* symbol, void* real_answer, int cuda_version) {
  const int index = HookIndexOfReal(real_answer);
  if (index >= 0) return HookAddress(index);
  if (real_answer != nullptr && symbol != nullptr && std::strcmp(symbol, "cuGetProcAddress") == 0) {
    const HookId id =
        cuda_version >= 12000 ? HookId::k_cuGetProcAddress_v2 : HookId::k_cuGetProcAddress;
    return HookAddress(Index(id));
  }
  return real_answer;
}

template <HookId id, typename Fn, typename... Args>
CUresult InterceptProcAddress(const char* symbol, void** pfn, int cuda_version, Args... rest) {
  constexpr int index = Index(id);
  if (ReentrancyGuard::Active()) return CallReal<Fn>(index, symbol, pfn, cuda_version, rest...);
  ReentrancyGuard guard;
  if (!EnsureReady()) return CUDA_ERROR_NOT_INITIALIZED;
  const Fn real = reinterpret_cast<Fn>(RealFunction(index));
  if (real == nullptr) return Missing(index);
  CountCall(index);
  const CUresult result = real(symbol, pfn, cuda_version, rest...);
  if (result == CUDA_SUCCESS && pfn != nullptr) *pfn = Redirect(symbol, *pfn, cuda_version);
  return result;
}

}  // namespace
}  // namespace spillway::interpose

extern "C" CUresult spillway_hook_cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                                   cuuint64_t flags) {
  using Fn = CUresult (*)(const char*, void**, int, cuuint64_t);
  return spillway::interpose::InterceptProcAddress<spillway::interpose::HookId::k_cuGetProcAddress,
                                                   Fn>(symbol, pfn, cudaVersion, flags);
}

extern "C" CUresult spillway_hook_cuGetProcAddress_v2(const char* symbol, void** pfn,
                                                      int cudaVersion, cuuint64_t flags,
                                                      CUdriverProcAddressQueryResult* status) {
  using Fn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  return spillway::interpose::InterceptProcAddress<
      spillway::interpose::HookId::k_cuGetProcAddress_v2, Fn>(symbol, pfn, cudaVersion, flags,
                                                              status);
}

// ---- dlsym ----
//
// glibc's dlsym takes the caller from its return address: RTLD_NEXT searches after the caller's
// object, RTLD_DEFAULT the caller's scope (a library loaded with RTLD_LOCAL finds its own
// dependencies' symbols there), and a found object becomes the caller's dependency. So the
// exported dlsym is a stub that jumps, the caller's return address intact, to the real dlsym for
// RTLD_NEXT and for every name that does not start with "cu"; only a "cu..." name through another
// handle goes to spillway_dlsym_impl, which asks the real dlsym and swaps the real driver's
// function for our hook (for those, the driver's entry points, the caller's scope finds the same
// libcuda.so.1).

extern "C" {
SPILLWAY_HIDDEN extern void* spillway_real_dlsym;
SPILLWAY_HIDDEN void* spillway_resolve_real_dlsym();
SPILLWAY_HIDDEN void* spillway_dlsym_impl(void* handle, const char* name);
}

namespace {

// The part of dlsym that may swap in a hook; only reached for names starting with "cu".
void* SubstituteHook(const char* name, void* answer) {
  using namespace spillway::interpose;
  if (ReentrancyGuard::Active()) return answer;
  const std::optional<HookId> id = FindHook(name);
  if (!id.has_value()) return answer;
  if (!EnsureReady(/*allow_load=*/false)) return answer;
  const int index = Index(*id);
  const void* real = RealFunction(index);
  if (real == answer) return HookAddress(index);
  // Spillway's own export (a search of the global scope, which finds it first) for an entry point
  // the loaded driver lacks (cuCtxSynchronize_v2 before CUDA 13): not found, as without spillway;
  // the export could only refuse.
  if (real == nullptr && answer == HookAddress(index)) return nullptr;
  return answer;
}

}  // namespace

// Uninstrumented, like the resolver: sanitizer runtimes look symbols up while they initialize.
__attribute__((no_sanitize("address", "undefined", "thread"))) void* spillway_dlsym_impl(
    void* handle, const char* name) {
  using DlsymFn = spillway::interpose::DlsymFn;
  void* real = __atomic_load_n(&spillway_real_dlsym, __ATOMIC_ACQUIRE);
  if (real == nullptr) real = spillway_resolve_real_dlsym();
  if (real == nullptr) return nullptr;
  void* answer = reinterpret_cast<DlsymFn>(real)(handle, name);
  if (answer == nullptr || name == nullptr || name[0] != 'c' || name[1] != 'u') return answer;
  return SubstituteHook(name, answer);
}

// x86-64 System V. RTLD_NEXT is ((void*)-1).
asm(R"(
    .text
    .globl dlsym
    .type dlsym, @function
    .p2align 4
dlsym:
    .cfi_startproc
    cmpq $-1, %rdi
    je 3f
    testq %rsi, %rsi
    jz 3f
    cmpb $0x63, (%rsi)
    jne 3f
    cmpb $0x75, 1(%rsi)
    je spillway_dlsym_impl
3:
    movq spillway_real_dlsym(%rip), %rax
    testq %rax, %rax
    jz 1f
    jmp *%rax
1:
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call spillway_resolve_real_dlsym
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    testq %rax, %rax
    jz 2f
    jmp *%rax
2:
    ret
    .cfi_endproc
    .size dlsym, .-dlsym
)");

// ---- load and exit ----

__attribute__((constructor)) static void SpillwayOnLoad() {
  spillway_resolve_real_dlsym();
  spillway::interpose::EnsureConfigured();
}

__attribute__((destructor)) static void SpillwayOnExit() {
  spillway::interpose::WriteSummaryAtExit();
  spillway::interpose::CloseTraceAtExit();
}
