// The narrow device interface the residency engine reaches CUDA through. The shim implements it
// over the real driver's functions (interpose/driver_device.cc); tests use an in-process fake
// that records calls (tests/policy/fake_device.h). Streams and events are opaque handles (a
// CUstream, a CUevent).
#ifndef SPILLWAY_POLICY_ENGINE_DEVICE_H_
#define SPILLWAY_POLICY_ENGINE_DEVICE_H_

#include <cstdint>

namespace spillway::policy {

using Stream = void*;  // a CUstream; null is the legacy default stream
using Event = void*;   // a CUevent

// The result of a device call: a CUresult value, 0 = success.
using DeviceResult = int;
inline constexpr DeviceResult kDeviceOk = 0;
inline constexpr DeviceResult kDeviceNotReady = 600;      // CUDA_ERROR_NOT_READY
inline constexpr DeviceResult kDeviceNotSupported = 801;  // CUDA_ERROR_NOT_SUPPORTED

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
  // @brief Places [address, address + bytes) on the host with the device mapping it: kernels read
  // and write it over the link and it does not migrate on their accesses
  // (cuMemAdvise SET_PREFERRED_LOCATION = the host, then SET_ACCESSED_BY = the device). Moves
  // nothing itself. A non-zero result when the driver cannot: the range is then left as it was.
  virtual DeviceResult PlaceOnHost(uint64_t /*address*/, uint64_t /*bytes*/) {
    return 801;  // CUDA_ERROR_NOT_SUPPORTED
  }
  // @brief Physical free and total device memory.
  virtual DeviceResult MemoryInfo(uint64_t* free, uint64_t* total) = 0;
  // @brief Creates a stream that does not synchronize with the legacy default stream (for moves
  // ahead of the launches). It lives for the rest of the process.
  virtual DeviceResult CreateSideStream(Stream* stream) = 0;
  // @brief Creates an event without timing (for ordering only). It lives for the rest of the
  // process.
  virtual DeviceResult CreateEvent(Event* event) = 0;
  // @brief Creates an event that records time (CUDA's default flags), for measuring kernel and
  // transfer times. It lives for the rest of the process. A non-zero result when the device
  // cannot time: the engine then sizes nothing from observed times.
  virtual DeviceResult CreateTimingEvent(Event* /*event*/) {
    return 801;  // CUDA_ERROR_NOT_SUPPORTED
  }
  // @brief Whether the work before `event`'s last recording has completed: kDeviceOk when it has,
  // kDeviceNotReady when not yet, another result on error. Never blocks.
  virtual DeviceResult QueryEvent(Event /*event*/) { return 801; }
  // @brief Blocks the calling thread until the work before `event`'s last recording has completed
  // (kDeviceOk), or returns another result on error.
  virtual DeviceResult SynchronizeEvent(Event /*event*/) { return 801; }
  // @brief The milliseconds between the recordings of two completed timing events (`end` minus
  // `start`; may be negative when they were recorded on different streams). Never blocks: an
  // incomplete event gives kDeviceNotReady.
  virtual DeviceResult ElapsedMilliseconds(Event /*start*/, Event /*end*/, float* /*ms*/) {
    return 801;
  }
  // @brief Records `event` on `stream`: it completes when the work issued there so far has.
  virtual DeviceResult RecordEvent(Event event, Stream stream) = 0;
  // @brief Work issued to `stream` from now on waits for `event`'s last recording.
  virtual DeviceResult StreamWaitEvent(Stream stream, Event event) = 0;
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_ENGINE_DEVICE_H_
