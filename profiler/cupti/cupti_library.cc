// Finding libcupti and resolving its functions (cupti_library.h).
#include "profiler/cupti/cupti_library.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace spillway::cupti {
namespace {

void AddToolkitFolders(std::string_view root, std::vector<std::string>& out) {
  if (root.empty()) return;
  std::string base(root);
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  for (const char* folder : {"/lib64/", "/lib/", "/extras/CUPTI/lib64/"}) {
    std::string path = absl::StrCat(base, folder, "libcupti.so");
    if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(std::move(path));
  }
}

template <typename Fn>
bool Resolve(void* handle, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  return fn != nullptr;
}

// Resolves every function; returns the first required name that is missing, or "".
std::string ResolveAll(void* handle, CuptiFunctions& f) {
  struct Required {
    const char* name;
    bool ok;
  };
  const Required required[] = {
      {"cuptiGetVersion", Resolve(handle, "cuptiGetVersion", f.GetVersion)},
      {"cuptiGetResultString", Resolve(handle, "cuptiGetResultString", f.GetResultString)},
      {"cuptiSubscribe", Resolve(handle, "cuptiSubscribe", f.Subscribe)},
      {"cuptiUnsubscribe", Resolve(handle, "cuptiUnsubscribe", f.Unsubscribe)},
      {"cuptiEnableCallback", Resolve(handle, "cuptiEnableCallback", f.EnableCallback)},
      {"cuptiActivityRegisterCallbacks",
       Resolve(handle, "cuptiActivityRegisterCallbacks", f.ActivityRegisterCallbacks)},
      {"cuptiActivityEnable", Resolve(handle, "cuptiActivityEnable", f.ActivityEnable)},
      {"cuptiActivityDisable", Resolve(handle, "cuptiActivityDisable", f.ActivityDisable)},
      {"cuptiActivityFlushAll", Resolve(handle, "cuptiActivityFlushAll", f.ActivityFlushAll)},
      {"cuptiActivityGetNextRecord",
       Resolve(handle, "cuptiActivityGetNextRecord", f.ActivityGetNextRecord)},
      {"cuptiActivityGetNumDroppedRecords",
       Resolve(handle, "cuptiActivityGetNumDroppedRecords", f.ActivityGetNumDroppedRecords)},
      {"cuptiActivityConfigureUnifiedMemoryCounter",
       Resolve(handle, "cuptiActivityConfigureUnifiedMemoryCounter",
               f.ActivityConfigureUnifiedMemoryCounter)},
      {"cuptiGetTimestamp", Resolve(handle, "cuptiGetTimestamp", f.GetTimestamp)},
  };
  Resolve(handle, "cuptiActivityRegisterTimestampCallback", f.ActivityRegisterTimestampCallback);
  Resolve(handle, "cuptiActivityFlushPeriod", f.ActivityFlushPeriod);
  for (const Required& r : required) {
    if (!r.ok) return r.name;
  }
  return "";
}

}  // namespace

std::vector<std::string> CuptiCandidates(std::string_view override_path, std::string_view cuda_home,
                                         std::string_view cuda_path,
                                         const std::vector<std::string>& loaded) {
  if (!override_path.empty()) return {std::string(override_path)};
  std::vector<std::string> out;
  auto add = [&out](std::string path) {
    if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(std::move(path));
  };
  for (const std::string& path : loaded) {
    const size_t slash = path.rfind('/');
    const std::string_view name = std::string_view(path).substr(slash + 1);
    if (slash != std::string::npos && name.starts_with("libcupti.so")) add(path);
  }
  AddToolkitFolders(cuda_home, out);
  AddToolkitFolders(cuda_path, out);
  AddToolkitFolders("/usr/local/cuda", out);
  for (const std::string& path : loaded) {
    if (const size_t at = path.rfind("/nvidia/"); at != std::string::npos) {
      const std::string nvidia = path.substr(0, at + 8);
      add(nvidia + "cu13/lib/libcupti.so.13");
      add(nvidia + "cuda_cupti/lib/libcupti.so.13");
      add(nvidia + "cuda_cupti/lib/libcupti.so.12");
    }
    if (const size_t at = path.rfind("/torch/lib/"); at != std::string::npos) {
      const std::string lib = path.substr(0, at + 11);
      for (const char* name : {"libcupti.so.13", "libcupti.so.12", "libcupti.so"}) add(lib + name);
    }
  }
  out.push_back("libcupti.so");
  out.push_back("libcupti.so.13");
  out.push_back("libcupti.so.12");
  return out;
}

std::vector<std::string> LoadedObjectPaths() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) {
        if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') {
          static_cast<std::vector<std::string>*>(data)->emplace_back(info->dlpi_name);
        }
        return 0;
      },
      &paths);
  return paths;
}

bool CompatibleApiVersion(uint32_t library_version) {
  return library_version / 10000 == CUPTI_API_VERSION / 10000;
}

absl::StatusOr<LoadedCupti> LoadCupti(const std::vector<std::string>& candidates) {
  std::string last_not_found = "none";
  std::string unusable;  // the first candidate that loaded but cannot be used
  for (const std::string& path : candidates) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      last_not_found = why != nullptr ? why : path;
      continue;
    }
    LoadedCupti loaded;
    loaded.path = path;
    std::string problem;
    const std::string missing = ResolveAll(handle, loaded.functions);
    if (!missing.empty()) {
      problem = absl::StrCat(path, " is not a usable libcupti: it lacks ", missing);
    } else if (loaded.functions.GetVersion(&loaded.api_version) != CUPTI_SUCCESS) {
      problem = absl::StrCat(path, ": cuptiGetVersion failed");
    } else if (!CompatibleApiVersion(loaded.api_version)) {
      problem = absl::StrCat(path, " has CUPTI API version ", loaded.api_version,
                             " but spillway was built with ", CUPTI_API_VERSION, " (CUDA ",
                             CUPTI_API_VERSION / 10000, ".x): its activity records differ");
    }
    if (problem.empty()) return loaded;
    dlclose(handle);
    if (unusable.empty()) unusable = problem;
  }
  if (!unusable.empty()) return absl::FailedPreconditionError(unusable);
  return absl::NotFoundError(absl::StrCat("libcupti not found (tried ", candidates.size(),
                                          " places; last: ", last_not_found, ")"));
}

}  // namespace spillway::cupti
