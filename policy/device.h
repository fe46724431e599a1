// The narrow device interface the residency engine reaches CUDA through. The shim implements it
// over the real driver's functions (interpose/driver_device.cc); tests use an in-process fake
// that records calls (tests/policy/fake_device.h). Streams are opaque handles (a CUstream).
#ifndef SPILLWAY_POLICY_DEVICE_H_
#define SPILLWAY_POLICY_DEVICE_H_

#include <cstdint>

namespace spillway::policy {

using Stream = void*;  // a CUstream; null is the legacy default stream

// The result of a device call: a CUresult value, 0 = success.
using DeviceResult = int;
inline constexpr DeviceResult kDeviceOk = 0;

class Device {
 public:
  virtual ~Device() = default;

  // @brief Allocates `bytes` of managed memory (attached globally).
  virtual DeviceResult AllocateManaged(uint64_t* address, uint64_t bytes) = 0;
  // @brief Allocates `bytes` of plain device memory.
  virtual DeviceResult AllocateDevice(uint64_t* address, uint64_t bytes) = 0;
  // @brief Frees memory from either Allocate call.
  virtual DeviceResult Free(uint64_t address) = 0;
  // @brief Migrates [address, address + bytes) to the device, in order on `stream`.
  virtual DeviceResult PrefetchToDevice(uint64_t address, uint64_t bytes, Stream stream) = 0;
  // @brief Migrates [address, address + bytes) to the host, in order on `stream`.
  virtual DeviceResult PrefetchToHost(uint64_t address, uint64_t bytes, Stream stream) = 0;
  // @brief Drops the contents of [address, address + bytes) (no copy-back), on `stream`.
  // Returns a non-zero result when the driver cannot discard.
  virtual DeviceResult Discard(uint64_t address, uint64_t bytes, Stream stream) = 0;
  // @brief Physical free and total device memory.
  virtual DeviceResult MemoryInfo(uint64_t* free, uint64_t* total) = 0;
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_DEVICE_H_
