// DriverReplayDevice (driver_replay_device.h): driver calls, each failure one line naming the
// call and the driver's error name (out of memory as absl::ResourceExhausted).
#include "workloads/replay/driver_replay_device.h"

#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/program_dir.h"
#include "common/size.h"

namespace spillway::replay {
namespace {

using spillway_replay::kDigestWords;
using spillway_replay::kMark;
using spillway_replay::kSlotVariants;
using spillway_replay::PackControl;
using spillway_replay::ReplayParams;
using spillway_replay::ReplaySlot;

constexpr unsigned kBlockThreads = 256;

absl::Status Check(CUresult result, absl::string_view what) {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  const char* name = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) name = "unknown error";
  const std::string message = absl::StrCat(what, ": ", name);
  return result == CUDA_ERROR_OUT_OF_MEMORY ? absl::ResourceExhaustedError(message)
                                            : absl::InternalError(message);
}

template <int N>
absl::Status LaunchVariant(CUfunction kernel, unsigned grid, CUstream stream, uint64_t digest,
                           absl::Span<const ReplaySlot> slots, uint64_t sequence, uint64_t time_ns,
                           int lane, int touch) {
  ReplayParams<N> params;
  std::memset(&params, 0, sizeof(params));
  params.digest = digest;
  params.sequence = kMark | sequence;
  params.time_ns = kMark | time_ns;
  params.control = PackControl(static_cast<int>(slots.size()), touch, lane);
  for (size_t i = 0; i < slots.size(); ++i) params.slots[i] = slots[i];
  void* args[] = {&params};
  return Check(cuLaunchKernel(kernel, grid, 1, 1, kBlockThreads, 1, 1, 0, stream, args, nullptr),
               "cuLaunchKernel");
}

}  // namespace

const char* AllocModeName(AllocMode mode) {
  switch (mode) {
    case AllocMode::kAsync:
      return "async";
    case AllocMode::kArena:
      return "arena";
    case AllocMode::kManaged:
      return "managed";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<DriverReplayDevice>> DriverReplayDevice::Open(AllocMode alloc,
                                                                             int touch,
                                                                             int stretches) {
  std::unique_ptr<DriverReplayDevice> device(new DriverReplayDevice());
  if (absl::Status s = device->Init(alloc, touch, stretches); !s.ok()) return s;
  return device;
}

absl::Status DriverReplayDevice::Init(AllocMode alloc, int touch, int stretches) {
  alloc_ = alloc;
  touch_ = touch;
  if (absl::Status s = Check(cuInit(0), "cuInit"); !s.ok()) return s;
  if (absl::Status s = Check(cuDeviceGet(&device_, 0), "cuDeviceGet"); !s.ok()) return s;
  if (absl::Status s =
          Check(cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Check(cuCtxSetCurrent(context_), "cuCtxSetCurrent"); !s.ok()) return s;
  char name[256] = {};
  if (absl::Status s = Check(cuDeviceGetName(name, sizeof(name), device_), "cuDeviceGetName");
      !s.ok()) {
    return s;
  }
  device_name_ = name;
  simgpu_ = device_name_.rfind("simgpu", 0) == 0;
  size_t free_bytes = 0, total_bytes = 0;
  if (absl::Status s = Check(cuMemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo"); !s.ok()) {
    return s;
  }
  device_memory_ = total_bytes;
  int sms = 1;
  if (absl::Status s =
          Check(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device_),
                "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
      !s.ok()) {
    return s;
  }
  grid_ = static_cast<unsigned>(sms > 0 ? sms : 1);

  module_path_ = ProgramDir() + (simgpu_ ? "/libreplay_kernels.so" : "/replay_kernels.fatbin");
  if (absl::StatusOr<const std::array<CUfunction, 3>*> sweep = Functions(0); !sweep.ok()) {
    return sweep.status();
  }
  if (absl::Status s = Check(cuStreamCreate(&stream_, CU_STREAM_DEFAULT), "cuStreamCreate");
      !s.ok()) {
    return s;
  }
  if (alloc == AllocMode::kArena) {
    arena_ =
        std::make_unique<CachingArena>([this](uint64_t bytes) { return AllocateDirect(bytes); });
  }
  events_.resize(static_cast<size_t>(stretches) + 1);
  for (CUevent& event : events_) {
    if (absl::Status s = Check(cuEventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate"); !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<uint64_t> digest = Allocate(kDigestWords * sizeof(uint64_t));
  if (!digest.ok()) return digest.status();
  digest_ = *digest;
  if (absl::Status s = Check(cuMemsetD8Async(digest_, 0, kDigestWords * sizeof(uint64_t), stream_),
                             "cuMemsetD8Async (digest)");
      !s.ok()) {
    return s;
  }
  return Check(cuEventRecord(events_[0], stream_), "cuEventRecord");
}

absl::StatusOr<uint64_t> DriverReplayDevice::AllocateDirect(uint64_t bytes) {
  CUdeviceptr pointer = 0;
  CUresult result = CUDA_SUCCESS;
  const char* call = "cuMemAlloc";
  switch (alloc_) {
    case AllocMode::kAsync:
      result = cuMemAllocAsync(&pointer, bytes, stream_);
      call = "cuMemAllocAsync";
      break;
    case AllocMode::kArena:
      result = cuMemAlloc(&pointer, bytes);
      break;
    case AllocMode::kManaged:
      result = cuMemAllocManaged(&pointer, bytes, CU_MEM_ATTACH_GLOBAL);
      call = "cuMemAllocManaged";
      break;
  }
  if (absl::Status s = Check(result, absl::StrCat(call, " of ", FormatSize(bytes))); !s.ok()) {
    return s;
  }
  return static_cast<uint64_t>(pointer);
}

absl::StatusOr<uint64_t> DriverReplayDevice::Allocate(uint64_t bytes) {
  if (arena_ != nullptr) return arena_->Allocate(bytes);
  return AllocateDirect(bytes);
}

absl::Status DriverReplayDevice::Free(uint64_t address, uint64_t) {
  switch (alloc_) {
    case AllocMode::kAsync:
      return Check(cuMemFreeAsync(address, stream_), "cuMemFreeAsync");
    case AllocMode::kArena:
      arena_->Free(address);
      return absl::OkStatus();
    case AllocMode::kManaged:
      return Check(cuMemFree(address), "cuMemFree");
  }
  return absl::OkStatus();
}

absl::StatusOr<const std::array<CUfunction, 3>*> DriverReplayDevice::Functions(uint32_t kernel) {
  const size_t at = kernel % kMaxModules;
  if (at < modules_.size()) return &functions_[at];
  while (modules_.size() <= at) {
    CUmodule module = nullptr;
    if (absl::Status s = Check(cuModuleLoad(&module, module_path_.c_str()),
                               absl::StrCat("cuModuleLoad(", module_path_, ")"));
        !s.ok()) {
      return s;
    }
    modules_.push_back(module);
    std::array<CUfunction, 3>& functions = functions_.emplace_back();
    for (int i = 0; i < 3; ++i) {
      const std::string name = absl::StrCat("replay_op", kSlotVariants[i]);
      if (absl::Status s = Check(cuModuleGetFunction(&functions[i], module, name.c_str()),
                                 absl::StrCat("cuModuleGetFunction(", name, ")"));
          !s.ok()) {
        return s;
      }
    }
  }
  return &functions_[at];
}

absl::Status DriverReplayDevice::Launch(absl::Span<const ReplaySlot> slots, uint64_t sequence,
                                        uint64_t time_ns, int lane, uint32_t kernel) {
  absl::StatusOr<const std::array<CUfunction, 3>*> functions = Functions(kernel);
  if (!functions.ok()) return functions.status();
  const std::array<CUfunction, 3>& f = **functions;
  if (slots.size() <= 4) {
    return LaunchVariant<4>(f[0], grid_, stream_, digest_, slots, sequence, time_ns, lane, touch_);
  }
  if (slots.size() <= 16) {
    return LaunchVariant<16>(f[1], grid_, stream_, digest_, slots, sequence, time_ns, lane, touch_);
  }
  return LaunchVariant<64>(f[2], grid_, stream_, digest_, slots, sequence, time_ns, lane, touch_);
}

absl::Status DriverReplayDevice::EndStretch(int index) {
  if (absl::Status s =
          Check(cuEventRecord(events_[static_cast<size_t>(index) + 1], stream_), "cuEventRecord");
      !s.ok()) {
    return s;
  }
  return Check(cuCtxSynchronize(), "cuCtxSynchronize");
}

absl::Status DriverReplayDevice::FlipByte(uint64_t address) {
  if (absl::Status s = Check(cuStreamSynchronize(stream_), "cuStreamSynchronize"); !s.ok()) {
    return s;
  }
  unsigned char byte = 0;
  if (absl::Status s = Check(cuMemcpyDtoH(&byte, address, 1), "cuMemcpyDtoH"); !s.ok()) return s;
  byte = static_cast<unsigned char>(~byte);
  return Check(cuMemcpyHtoD(address, &byte, 1), "cuMemcpyHtoD");
}

absl::StatusOr<std::vector<double>> DriverReplayDevice::StretchMilliseconds() {
  if (absl::Status s = Check(cuStreamSynchronize(stream_), "cuStreamSynchronize"); !s.ok()) {
    return s;
  }
  std::vector<double> ms;
  for (size_t i = 1; i < events_.size(); ++i) {
    float elapsed = 0;
    if (absl::Status s =
            Check(cuEventElapsedTime(&elapsed, events_[i - 1], events_[i]), "cuEventElapsedTime");
        !s.ok()) {
      return s;
    }
    ms.push_back(static_cast<double>(elapsed));
  }
  return ms;
}

absl::StatusOr<std::array<uint64_t, kDigestWords>> DriverReplayDevice::ReadDigest() {
  if (absl::Status s = Check(cuStreamSynchronize(stream_), "cuStreamSynchronize"); !s.ok()) {
    return s;
  }
  std::array<uint64_t, kDigestWords> words{};
  if (absl::Status s = Check(cuMemcpyDtoH(words.data(), digest_, sizeof(words)), "cuMemcpyDtoH");
      !s.ok()) {
    return s;
  }
  return words;
}

absl::Status DriverReplayDevice::Close() {
  absl::Status status = Check(cuStreamSynchronize(stream_), "cuStreamSynchronize");
  const auto keep = [&status](absl::Status s) {
    if (status.ok()) status = std::move(s);
  };
  if (digest_ != 0) keep(Free(digest_, 0));
  keep(Check(cuStreamSynchronize(stream_), "cuStreamSynchronize"));
  if (arena_ != nullptr) {
    for (const auto& [address, bytes] : arena_->segments()) {
      keep(Check(cuMemFree(address), "cuMemFree (arena segment)"));
    }
  }
  for (CUevent event : events_) keep(Check(cuEventDestroy(event), "cuEventDestroy"));
  keep(Check(cuStreamDestroy(stream_), "cuStreamDestroy"));
  for (CUmodule module : modules_) keep(Check(cuModuleUnload(module), "cuModuleUnload"));
  keep(Check(cuDevicePrimaryCtxRelease(device_), "cuDevicePrimaryCtxRelease"));
  return status;
}

}  // namespace spillway::replay
