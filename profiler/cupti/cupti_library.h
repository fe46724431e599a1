// Finds and loads libcupti at run time (dlopen, RTLD_LOCAL; never linked, so libspillway.so does
// not depend on it) and resolves the CUPTI functions spillway's recorder calls into one table.
#ifndef SPILLWAY_PROFILER_CUPTI_CUPTI_LIBRARY_H_
#define SPILLWAY_PROFILER_CUPTI_CUPTI_LIBRARY_H_

#include <cupti.h>

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace spillway::cupti {

// The CUPTI functions the recorder uses. Required ones are never null in a loaded table; the
// optional ones (newer CUPTI) may be.
struct CuptiFunctions {
  // Required.
  decltype(&::cuptiGetVersion) GetVersion = nullptr;
  decltype(&::cuptiGetResultString) GetResultString = nullptr;
  decltype(&::cuptiSubscribe) Subscribe = nullptr;
  decltype(&::cuptiUnsubscribe) Unsubscribe = nullptr;
  decltype(&::cuptiEnableCallback) EnableCallback = nullptr;
  decltype(&::cuptiActivityRegisterCallbacks) ActivityRegisterCallbacks = nullptr;
  decltype(&::cuptiActivityEnable) ActivityEnable = nullptr;
  decltype(&::cuptiActivityDisable) ActivityDisable = nullptr;
  decltype(&::cuptiActivityFlushAll) ActivityFlushAll = nullptr;
  decltype(&::cuptiActivityGetNextRecord) ActivityGetNextRecord = nullptr;
  decltype(&::cuptiActivityGetNumDroppedRecords) ActivityGetNumDroppedRecords = nullptr;
  decltype(&::cuptiActivityConfigureUnifiedMemoryCounter) ActivityConfigureUnifiedMemoryCounter =
      nullptr;
  decltype(&::cuptiGetTimestamp) GetTimestamp = nullptr;
  // Optional.
  decltype(&::cuptiActivityRegisterTimestampCallback) ActivityRegisterTimestampCallback = nullptr;
  decltype(&::cuptiActivityFlushPeriod) ActivityFlushPeriod = nullptr;
};

struct LoadedCupti {
  std::string path;  // the candidate that loaded
  CuptiFunctions functions;
  uint32_t api_version = 0;  // cuptiGetVersion(): e.g. 130001
};

// The places searched, in order. `override_path` (SPILLWAY_CUPTI) is then the only candidate;
// otherwise: a libcupti the process has loaded already (of `loaded`, the paths of the objects
// loaded: a framework's profiler loads its own; a second copy in the process is not wanted), then
// $CUDA_HOME and $CUDA_PATH (lib64/, lib/, extras/CUPTI/lib64/), /usr/local/cuda (same folders),
// then the copies Python wheels ship beside a loaded library of theirs (NVIDIA's wheels: a
// loaded `.../nvidia/<package>/lib/...` gives `.../nvidia/cuda_cupti/lib/libcupti.so.13` and
// `.so.12`, and `.../nvidia/cu13/lib/libcupti.so.13`; PyTorch's: a loaded `.../torch/lib/...`
// gives `.../torch/lib/libcupti.so*`), the plain soname "libcupti.so" (the loader's search path:
// LD_LIBRARY_PATH, ld.so.cache), then the versioned sonames "libcupti.so.13" and "libcupti.so.12".
std::vector<std::string> CuptiCandidates(std::string_view override_path, std::string_view cuda_home,
                                         std::string_view cuda_path,
                                         const std::vector<std::string>& loaded = {});

// The paths of the objects loaded in this process (dl_iterate_phdr), for CuptiCandidates.
std::vector<std::string> LoadedObjectPaths();

// Loads the first candidate that dlopens, resolves the functions and checks the API version
// against the headers spillway was built with (the activity records' layouts must match: same
// major version). The library stays loaded for the life of the process (CUPTI starts threads).
// Errors say which candidates were tried and why the last one failed.
absl::StatusOr<LoadedCupti> LoadCupti(const std::vector<std::string>& candidates);

// True when a libcupti of API version `library_version` has the record layouts of the headers
// this was built with (CUPTI_API_VERSION): the same major version (version / 10000).
bool CompatibleApiVersion(uint32_t library_version);

}  // namespace spillway::cupti

#endif  // SPILLWAY_PROFILER_CUPTI_CUPTI_LIBRARY_H_
