// spillway-doctor (`spillway doctor`): what this machine's CUDA driver supports that spillway
// relies on (managed memory, managed memory pools, the CUDA 13 batch prefetch/discard calls) and
// whether spillway's hooks resolve. Loads the driver with dlopen, so it runs without a GPU and
// reports that plainly. Exit status: 0 when the driver loads and has a device, 1 otherwise. Also
// the launcher's helper for what it checks before a job starts (--driver-version, --parse-size).
#include <cuda.h>
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/command_line.h"
#include "common/size.h"
#include "interpose/hook_table.h"

#ifndef SPILLWAY_VERSION
#define SPILLWAY_VERSION "unknown"
#endif

namespace spillway::doctor {
namespace {

// The driver, reached only through pointers from dlsym (hooks, when libspillway.so is preloaded).
class Driver {
 public:
  explicit Driver(void* handle) : handle_(handle) {}

  template <typename Fn>
  Fn Get(const char* name) const {
    return reinterpret_cast<Fn>(dlsym(handle_, name));
  }

  // Calls `name` when the driver has it; CUDA_ERROR_NOT_FOUND otherwise.
  template <typename... Args>
  CUresult Call(const char* name, Args... args) const {
    using Fn = CUresult (*)(Args...);
    const Fn fn = Get<Fn>(name);
    return fn != nullptr ? fn(args...) : CUDA_ERROR_NOT_FOUND;
  }

  std::string ErrorName(CUresult result) const {
    const char* text = nullptr;
    if (Call("cuGetErrorName", result, &text) != CUDA_SUCCESS || text == nullptr) {
      return "error " + std::to_string(static_cast<int>(result));
    }
    return text;
  }

  void* handle() const { return handle_; }

 private:
  void* handle_;
};

void Report(const char* what, const std::string& value) {
  std::printf("%-34s %s\n", what, value.c_str());
}

std::string Yes(bool ok, const std::string& detail = "") {
  std::string text = ok ? "yes" : "no";
  if (!detail.empty()) text += " (" + detail + ")";
  return text;
}

std::string DriverPath(void* handle) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
    return map->l_name;
  }
  return "?";
}

std::string FormatMiB(size_t bytes) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.0f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

// Allocates 1 MiB of managed memory, writes and reads it from the host, frees it.
std::string CheckManagedMemory(const Driver& driver) {
  CUdeviceptr ptr = 0;
  const size_t bytes = 1 << 20;
  CUresult result = driver.Call("cuMemAllocManaged", &ptr, bytes, unsigned{CU_MEM_ATTACH_GLOBAL});
  if (result != CUDA_SUCCESS) return Yes(false, "cuMemAllocManaged: " + driver.ErrorName(result));
  auto* bytes_ptr = reinterpret_cast<unsigned char*>(ptr);
  std::memset(bytes_ptr, 0x5a, bytes);
  const bool readable = bytes_ptr[bytes - 1] == 0x5a;
  result = driver.Call("cuMemFree_v2", ptr);
  if (result != CUDA_SUCCESS) return Yes(false, "cuMemFree: " + driver.ErrorName(result));
  return Yes(readable, readable ? "allocate, touch, free" : "host read back the wrong value");
}

// Creates a managed pool on `device` and allocates from it in stream order.
// What the memory of a managed pool made as spillway makes its own (interpose/backing.cc: managed,
// no location) supports of what the engine does with it: prefetches both ways, a discard, and the
// advice of a host placement. cuda.h names only cuMemAllocManaged memory for the discard and the
// prefetch; a refusal costs spillway its moves of stream-ordered allocations, not correctness.
std::string PoolMemoryMoves(const Driver& driver, CUdevice device, CUdeviceptr ptr, size_t bytes,
                            CUstream stream) {
  CUmemLocation on_device{};
  on_device.type = CU_MEM_LOCATION_TYPE_DEVICE;
  on_device.id = device;
  CUmemLocation host{};
  host.type = CU_MEM_LOCATION_TYPE_HOST;
  const auto said = [&](const char* what, CUresult result) {
    return std::string(what) + " " + (result == CUDA_SUCCESS ? "ok" : driver.ErrorName(result));
  };
  std::string line = "on its memory: ";
  line += said("prefetch to the device",
               driver.Call("cuMemPrefetchAsync_v2", ptr, bytes, on_device, 0u, stream));
  line += ", " +
          said("to the host", driver.Call("cuMemPrefetchAsync_v2", ptr, bytes, host, 0u, stream));
  CUdeviceptr range[] = {ptr};
  size_t range_size[] = {bytes};
  line += ", " +
          said("discard", driver.Call("cuMemDiscardBatchAsync", static_cast<CUdeviceptr*>(range),
                                      static_cast<size_t*>(range_size), size_t{1}, 0ull, stream));
  line += ", " + said("advice", driver.Call("cuMemAdvise_v2", ptr, bytes,
                                            CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host));
  driver.Call("cuMemAdvise_v2", ptr, bytes, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, host);
  return line;
}

std::string CheckManagedPool(const Driver& driver, CUdevice device) {
  CUmemPoolProps props;
  std::memset(&props, 0, sizeof(props));
  props.allocType = CU_MEM_ALLOCATION_TYPE_MANAGED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = CU_MEM_LOCATION_TYPE_NONE;  // as spillway's own pool
  CUmemoryPool pool = nullptr;
  CUresult result =
      driver.Call("cuMemPoolCreate", &pool, static_cast<const CUmemPoolProps*>(&props));
  if (result != CUDA_SUCCESS) return Yes(false, "cuMemPoolCreate: " + driver.ErrorName(result));
  CUstream stream = nullptr;
  std::string verdict;
  result = driver.Call("cuStreamCreate", &stream, unsigned{CU_STREAM_NON_BLOCKING});
  if (result != CUDA_SUCCESS) {
    verdict = Yes(false, "cuStreamCreate: " + driver.ErrorName(result));
  } else {
    constexpr size_t kBytes = size_t{2} << 20;
    CUdeviceptr ptr = 0;
    result = driver.Call("cuMemAllocFromPoolAsync", &ptr, kBytes, pool, stream);
    if (result == CUDA_SUCCESS) {
      const std::string moves = PoolMemoryMoves(driver, device, ptr, kBytes, stream);
      driver.Call("cuMemFreeAsync", ptr, stream);
      result = driver.Call("cuStreamSynchronize", stream);
      verdict = Yes(result == CUDA_SUCCESS,
                    "cuMemPoolCreate (no location) + cuMemAllocFromPoolAsync; " + moves);
    } else {
      verdict = Yes(false, "cuMemAllocFromPoolAsync: " + driver.ErrorName(result));
    }
    driver.Call("cuStreamDestroy_v2", stream);
  }
  driver.Call("cuMemPoolDestroy", pool);
  return verdict;
}

// How cuMemDiscardBatchAsync behaves where spillway relies on it (docs/engine.md, "Frees"). The
// legacy NULL stream: cuda.h says it is refused (spillway then uses a stand-in stream). Then on a
// stream of its own, over 8 pages of managed memory filled by the host and prefetched to the
// device, a discard from 100 bytes into the second page to 100 bytes into the sixth: what the host
// reads afterwards in the whole pages of the range, in the parts of the range in partial pages,
// and in the bytes of those pages outside the range (spillway names whole pages only, as the
// driver does not say how it rounds). Sets `*legacy` and `*contents` to one line each.
void CheckDiscard(const Driver& driver, CUdevice device, std::string* legacy,
                  std::string* contents) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t bytes = 8 * page;
  CUdeviceptr ptr = 0;
  CUresult result = driver.Call("cuMemAllocManaged", &ptr, bytes, unsigned{CU_MEM_ATTACH_GLOBAL});
  if (result != CUDA_SUCCESS) {
    *legacy = *contents = "not checked (cuMemAllocManaged: " + driver.ErrorName(result) + ")";
    return;
  }
  auto* host = reinterpret_cast<unsigned char*>(ptr);
  std::memset(host, 0xa5, bytes);
  CUdeviceptr whole[] = {ptr};
  size_t whole_size[] = {bytes};
  result = driver.Call("cuMemDiscardBatchAsync", static_cast<CUdeviceptr*>(whole),
                       static_cast<size_t*>(whole_size), size_t{1}, 0ull, CUstream{nullptr});
  *legacy =
      result == CUDA_SUCCESS
          ? "accepted (cuda.h says it is refused; spillway's stand-in stream is then unneeded)"
          : "refused (" + driver.ErrorName(result) + "), as cuda.h says";
  driver.Call("cuCtxSynchronize");
  std::memset(host, 0xa5, bytes);  // whatever that did
  CUstream stream = nullptr;
  result = driver.Call("cuStreamCreate", &stream, unsigned{CU_STREAM_NON_BLOCKING});
  if (result == CUDA_SUCCESS) {
    CUmemLocation location{};
    location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = device;
    driver.Call("cuMemPrefetchAsync_v2", ptr, bytes, location, 0u, stream);
    const size_t from = page + 100, to = 5 * page + 100;
    CUdeviceptr range[] = {ptr + from};
    size_t range_size[] = {to - from};
    result = driver.Call("cuMemDiscardBatchAsync", static_cast<CUdeviceptr*>(range),
                         static_cast<size_t*>(range_size), size_t{1}, 0ull, stream);
    if (result == CUDA_SUCCESS) result = driver.Call("cuStreamSynchronize", stream);
    driver.Call("cuStreamDestroy_v2", stream);
  }
  if (result != CUDA_SUCCESS) {
    *contents = "not checked (" + driver.ErrorName(result) + ")";
  } else {
    // Whether every byte of [a, b) still holds the fill.
    const auto kept = [&](size_t a, size_t b) {
      for (size_t i = a; i < b; ++i) {
        if (host[i] != 0xa5) return false;
      }
      return true;
    };
    const char* whole_pages = kept(2 * page, 5 * page) ? "kept" : "changed";
    const char* partial =
        kept(page + 100, 2 * page) && kept(5 * page, 5 * page + 100) ? "kept" : "changed";
    const char* outside =
        kept(page, page + 100) && kept(5 * page + 100, 6 * page) ? "kept" : "CHANGED";
    *contents = std::string("whole pages of the range ") + whole_pages + ", its partial pages " +
                partial + ", the bytes of those pages outside it " + outside;
  }
  driver.Call("cuMemFree_v2", ptr);
}

std::string CheckProcAddress(const Driver& driver, const char* symbol) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const CUresult result =
      driver.Call("cuGetProcAddress_v2", symbol, &fn, CUDA_VERSION, cuuint64_t{0}, &status);
  if (result == CUDA_SUCCESS && fn != nullptr) return "yes";
  if (status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) return "no (driver too old)";
  return "no";
}

// Every hooked name found in the driver; and, preloaded, dlsym handing back spillway's hook.
void CheckHooks(const Driver& driver) {
  std::vector<std::string> missing;
  for (const interpose::HookInfo& hook : interpose::kHookInfo) {
    const std::string name(hook.name);
    if (dlsym(driver.handle(), name.c_str()) == nullptr) missing.push_back(name);
  }
  std::string found = std::to_string(interpose::kNumHooks - static_cast<int>(missing.size())) +
                      " of " + std::to_string(interpose::kNumHooks);
  for (const std::string& name : missing)
    found += (name == missing.front() ? "; missing: " : ", ") + name;
  Report("hooked functions in driver", found);

  const bool preloaded = dlopen("libspillway.so", RTLD_NOW | RTLD_NOLOAD) != nullptr;
  if (!preloaded) {
    Report("hooks active", "no (libspillway.so is not loaded; run `spillway doctor`)");
    return;
  }
  void* launch = dlsym(driver.handle(), "cuLaunchKernel");
  Dl_info info;
  const bool ours =
      launch != nullptr && dladdr(launch, &info) != 0 && info.dli_fname != nullptr &&
      std::string_view(info.dli_fname).find("libspillway.so") != std::string_view::npos;
  Report("hooks active", Yes(ours, ours ? "dlsym(libcuda, \"cuLaunchKernel\") is spillway's hook"
                                        : "dlsym(libcuda, \"cuLaunchKernel\") is not the hook"));
}

int Run(const char* driver_path) {
  Report("spillway", SPILLWAY_VERSION);
  void* handle = dlopen(driver_path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    Report("driver", std::string("not found: ") + (why != nullptr ? why : driver_path));
    return 1;
  }
  const Driver driver(handle);
  Report("driver library", DriverPath(handle));
  CUresult result = driver.Call("cuInit", 0u);
  if (result != CUDA_SUCCESS) {
    Report("cuInit", "failed: " + driver.ErrorName(result));
    CheckHooks(driver);
    return 1;
  }
  int version = 0;
  driver.Call("cuDriverGetVersion", &version);
  Report("driver CUDA version",
         std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10));
  int count = 0;
  driver.Call("cuDeviceGetCount", &count);
  Report("devices", std::to_string(count));
  if (count == 0) {
    CheckHooks(driver);
    return 1;
  }
  CUdevice device = 0;
  driver.Call("cuDeviceGet", &device, 0);
  char name[256] = {};
  driver.Call("cuDeviceGetName", name, static_cast<int>(sizeof(name)), device);
  Report("device 0", name);
  size_t total = 0;
  driver.Call("cuDeviceTotalMem_v2", &total, device);
  Report("device memory", FormatMiB(total));
  CUcontext context = nullptr;
  result = driver.Call("cuDevicePrimaryCtxRetain", &context, device);
  if (result == CUDA_SUCCESS) result = driver.Call("cuCtxSetCurrent", context);
  if (result != CUDA_SUCCESS) {
    Report("context", "failed: " + driver.ErrorName(result));
    CheckHooks(driver);
    return 1;
  }
  size_t free_bytes = 0;
  driver.Call("cuMemGetInfo_v2", &free_bytes, &total);
  Report("free memory", FormatMiB(free_bytes));
  int attribute = 0;
  driver.Call("cuDeviceGetAttribute", &attribute, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
              device);
  Report("concurrent managed access", Yes(attribute != 0));
  Report("managed memory", CheckManagedMemory(driver));
  Report("managed memory pools", CheckManagedPool(driver, device));
  Report("cuMemPrefetchBatchAsync", CheckProcAddress(driver, "cuMemPrefetchBatchAsync"));
  Report("cuMemDiscardBatchAsync", CheckProcAddress(driver, "cuMemDiscardBatchAsync"));
  Report("cuMemDiscardAndPrefetchBatchAsync",
         CheckProcAddress(driver, "cuMemDiscardAndPrefetchBatchAsync"));
  std::string legacy, contents;
  CheckDiscard(driver, device, &legacy, &contents);
  Report("discard on the legacy stream", legacy);
  Report("discard of a range inside pages", contents);
  CheckHooks(driver);
  driver.Call("cuDevicePrimaryCtxRelease_v2", device);
  return 0;
}

// --driver-version: the CUDA version the driver reports (cuDriverGetVersion, e.g. 13000) alone on
// stdout, for the launcher; exit status 1 with one line on stderr when the driver cannot say.
int PrintDriverVersion(const char* driver_path) {
  void* handle = dlopen(driver_path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "spillway-doctor: cannot load %s\n", driver_path);
    return 1;
  }
  int version = 0;
  const CUresult result = Driver(handle).Call("cuDriverGetVersion", &version);
  if (result != CUDA_SUCCESS || version <= 0) {
    std::fprintf(stderr, "spillway-doctor: cuDriverGetVersion failed (error %d)\n",
                 static_cast<int>(result));
    return 1;
  }
  std::printf("%d\n", version);
  return 0;
}

// --parse-size TEXT: the bytes TEXT stands for, read as the library reads SPILLWAY_DEVICE_MEMORY
// (ParseSize), alone on stdout, for the launcher's check of its size options; exit status 2 and
// "spillway-doctor: --parse-size: " with the parser's reason on stderr when TEXT is not a size.
int PrintSize(const char* text) {
  const absl::StatusOr<uint64_t> bytes = ParseSize(text);
  if (!bytes.ok()) {
    std::fprintf(stderr, "spillway-doctor: --parse-size: %s\n",
                 std::string(bytes.status().message()).c_str());
    return 2;
  }
  std::printf("%llu\n", static_cast<unsigned long long>(*bytes));
  return 0;
}

constexpr const char* kUsage =
    "usage: spillway-doctor [--driver PATH] [--driver-version] [--parse-size TEXT]\n"
    "Reports what the CUDA driver supports that spillway relies on, and whether the hooks\n"
    "resolve (run it as `spillway doctor` so libspillway.so is preloaded). --driver-version\n"
    "prints only the CUDA version the driver reports (e.g. 13000); --parse-size prints the\n"
    "bytes a size such as 8GiB stands for, as spillway reads it.\n";

}  // namespace
}  // namespace spillway::doctor

int main(int argc, char** argv) {
  std::string driver = "libcuda.so.1", parse_size;
  bool version = false, driver_version = false;
  spillway::CommandLine cl({.name = "spillway-doctor",
                            .usage = spillway::doctor::kUsage,
                            .unknown_option = "unknown option '{}'",
                            .extra_argument = "unknown option '{}'"});
  cl.Option("--driver", &driver);
  cl.Flag("--version", &version);
  cl.Flag("--driver-version", &driver_version);
  cl.Option("--parse-size", &parse_size);
  if (const std::optional<int> done = cl.ParseForMain(argc, argv)) return *done;
  if (version) {
    std::printf("spillway %s\n", SPILLWAY_VERSION);
    return 0;
  }
  if (cl.Given("--parse-size")) return spillway::doctor::PrintSize(parse_size.c_str());
  return driver_version ? spillway::doctor::PrintDriverVersion(driver.c_str())
                        : spillway::doctor::Run(driver.c_str());
}
