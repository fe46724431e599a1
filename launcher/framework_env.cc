// Framework allocator settings and their report line.
#include "launcher/framework_env.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "launcher/paths.h"
#include "launcher/process.h"

namespace spillway::launcher {
namespace {

bool IsSet(const char* name) { return std::getenv(name) != nullptr; }

std::string Get(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

// Exports NAME=VALUE unless NAME is set already, and records which happened.
void SetDefault(FrameworkSettings& settings, const char* name, const char* value) {
  if (IsSet(name)) {
    settings.kept.push_back(name);
  } else {
    setenv(name, value, 1);
    settings.set.push_back(absl::StrCat(name, "=", value));
  }
}

// PyTorch's settings: PYTORCH_ALLOC_CONF (2.9+) before PYTORCH_CUDA_ALLOC_CONF; "" when neither.
std::string PyTorchConf() {
  if (IsSet("PYTORCH_ALLOC_CONF")) return Get("PYTORCH_ALLOC_CONF");
  return Get("PYTORCH_CUDA_ALLOC_CONF");
}

}  // namespace

int DriverCudaVersion(const std::string& libdir) {
  const std::string doctor = libdir + "/spillway-doctor";
  if (!IsExecutableFile(doctor)) return -1;
  const std::optional<std::string> output = CaptureOutput({doctor, "--driver-version"}, 10);
  int version = 0;
  if (!output || !absl::SimpleAtoi(absl::StripTrailingAsciiWhitespace(*output), &version) ||
      version < 0) {
    return -1;
  }
  return version;
}

// PyTorch's and TensorFlow's per-tensor allocators are stream-ordered (cuMemAllocAsync), which
// spillway backs with a managed memory pool; a driver before CUDA 13.0 has none, so there those
// two keep their caching allocators, as with --framework-allocator (JAX's allocates with
// cuMemAlloc). Without pools only a choice of the user's is kept (and listed); nothing is set.
FrameworkSettings SetFrameworkAllocators(bool keep_arenas, int driver_version) {
  FrameworkSettings settings;
  if (!keep_arenas) {
    if (driver_version >= 0 && driver_version < 13000) {
      settings.driver_without_pools =
          absl::StrCat(driver_version / 1000, ".", driver_version % 1000 / 10);
    }
    const bool pools = settings.driver_without_pools.empty();
    if (IsSet("PYTORCH_ALLOC_CONF")) {
      settings.kept.push_back("PYTORCH_ALLOC_CONF");
    } else if (pools || IsSet("PYTORCH_CUDA_ALLOC_CONF")) {
      SetDefault(settings, "PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync");
    }
    if (pools || IsSet("TF_GPU_ALLOCATOR")) {
      SetDefault(settings, "TF_GPU_ALLOCATOR", "cuda_malloc_async");
    }
    SetDefault(settings, "XLA_PYTHON_CLIENT_ALLOCATOR", "platform");
  }
  SetDefault(settings, "TF_FORCE_GPU_ALLOW_GROWTH", "true");
  SetDefault(settings, "XLA_PYTHON_CLIENT_PREALLOCATE", "false");
  return settings;
}

std::vector<std::string> ReportFrameworkAllocators(const FrameworkSettings& settings) {
  std::vector<std::string> lines;
  if (!settings.set.empty() || !settings.kept.empty()) {
    std::string line = "spillway: framework settings:";
    if (!settings.set.empty()) absl::StrAppend(&line, " set ", absl::StrJoin(settings.set, " "));
    if (!settings.set.empty() && !settings.kept.empty()) line += ";";
    if (!settings.kept.empty()) {
      absl::StrAppend(&line, " kept yours: ", absl::StrJoin(settings.kept, " "));
    }
    lines.push_back(std::move(line));
  }
  // Expandable segments (VMM: cuMemCreate) cannot be managed memory.
  const std::string conf = absl::AsciiStrToLower(PyTorchConf());
  if (absl::StrContains(conf, "expandable_segments:true")) {
    lines.push_back(
        "spillway: warning: expandable_segments:True makes PyTorch allocate with cuMemCreate "
        "(VMM), which spillway cannot back with managed memory: those allocations stay on the "
        "device");
  }
  if (settings.driver_without_pools.empty()) return lines;
  // Which frameworks keep their caching allocators, and a warning for each stream-ordered
  // allocator the user chose (it stays device memory there).
  std::vector<std::string> left, chosen;
  if (IsSet("PYTORCH_ALLOC_CONF") || IsSet("PYTORCH_CUDA_ALLOC_CONF")) {
    if (absl::StrContains(conf, "backend:cudamallocasync")) {
      chosen.push_back("PyTorch's cudaMallocAsync backend");
    }
  } else {
    left.push_back("PyTorch");
  }
  if (IsSet("TF_GPU_ALLOCATOR")) {
    if (Get("TF_GPU_ALLOCATOR") == "cuda_malloc_async") {
      chosen.push_back("TF_GPU_ALLOCATOR=cuda_malloc_async");
    }
  } else {
    left.push_back("TensorFlow");
  }
  const std::string no_pools = absl::StrCat("the driver is CUDA ", settings.driver_without_pools,
                                            ", without managed memory pools (CUDA 13.0)");
  if (left.size() == 2) {
    lines.push_back(absl::StrCat("spillway: ", no_pools,
                                 ": PyTorch and TensorFlow keep their caching allocators, which "
                                 "spillway backs per 2 MiB chunk (as with --framework-allocator)"));
  } else if (left.size() == 1) {
    lines.push_back(absl::StrCat("spillway: ", no_pools, ": ", left[0],
                                 " keeps its caching allocator, which spillway backs per 2 MiB "
                                 "chunk (as with --framework-allocator)"));
  }
  for (const std::string& allocator : chosen) {
    lines.push_back(absl::StrCat("spillway: warning: ", no_pools, ": ", allocator,
                                 " allocates stream-ordered, which spillway cannot back with "
                                 "managed memory here: those allocations stay on the device"));
  }
  return lines;
}

}  // namespace spillway::launcher
