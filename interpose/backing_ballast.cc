// SPILLWAY_BALLAST: a plain device allocation per device that makes a big GPU behave like a small
// one, freed at exit (backing.h).
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "interpose/backing.h"
#include "interpose/caller_module.h"
#include "interpose/log.h"
#include "interpose/real_driver.h"
#include "interpose/reentrancy.h"
#include "interpose/unhooked_function.h"

namespace spillway::interpose {
namespace {

// Ballast: one plain device allocation per device, freed at exit.
constinit std::atomic<uint64_t> g_ballast_address[kMaxDevices] = {};
constinit std::atomic<uint64_t> g_ballast_bytes[kMaxDevices] = {};
constinit policy::Device* g_ballast_device[kMaxDevices] = {};
constinit std::atomic<bool> g_ballast_exit_registered{false};
constinit std::atomic<pid_t> g_ballast_pid{0};

// A forked child inherits the handler but not the parent's device memory: it frees nothing.
void ReleaseBallastAtExit() {
  if (g_ballast_pid.load() != ::getpid()) return;
  ReentrancyGuard guard;
  for (int i = 0; i < kMaxDevices; ++i) {
    const uint64_t address = g_ballast_address[i].exchange(0);
    if (address != 0 && g_ballast_device[i] != nullptr) g_ballast_device[i]->Free(address);
  }
}

}  // namespace

uint64_t StartBallast(int ordinal, policy::Device* device, uint64_t budget, uint64_t free,
                      uint64_t total, std::optional<uint64_t> headroom_setting) {
  if (ordinal < 0 || ordinal >= kMaxDevices) return 0;
  const uint64_t headroom = headroom_setting.value_or(total / 20);
  if (free <= budget + headroom) {
    Log(LogLevel::kWarn,
        "SPILLWAY_BALLAST: device %d has %llu bytes free, no more than the budget (%llu) plus "
        "headroom (%llu): no ballast",
        ordinal, static_cast<unsigned long long>(free), static_cast<unsigned long long>(budget),
        static_cast<unsigned long long>(headroom));
    return 0;
  }
  const uint64_t bytes = free - budget - headroom;
  uint64_t address = 0;
  const policy::DeviceResult result = device->AllocateDevice(&address, bytes);
  if (result != policy::kDeviceOk) {
    ReportProblem(LogLevel::kWarn, "SPILLWAY_BALLAST: cuMemAlloc of %llu bytes failed (error %d)",
                  static_cast<unsigned long long>(bytes), result);
    return 0;
  }
  g_ballast_device[ordinal] = device;
  g_ballast_bytes[ordinal].store(bytes, std::memory_order_relaxed);
  g_ballast_address[ordinal].store(address, std::memory_order_release);
  if (!g_ballast_exit_registered.exchange(true)) {
    g_ballast_pid.store(::getpid());
    std::atexit(ReleaseBallastAtExit);
  }
  Log(LogLevel::kInfo,
      "SPILLWAY_BALLAST: device %d holds %llu bytes so %llu remain for the budget and headroom",
      ordinal, static_cast<unsigned long long>(bytes),
      static_cast<unsigned long long>(free - bytes));
  return bytes;
}

uint64_t BallastBytes() {
  uint64_t bytes = 0;
  for (const std::atomic<uint64_t>& held : g_ballast_bytes) {
    bytes += held.load(std::memory_order_relaxed);
  }
  return bytes;
}

void ForgetBallast(int device) {
  if (device < 0 || device >= kMaxDevices) return;
  g_ballast_address[device].store(0);
  g_ballast_bytes[device].store(0, std::memory_order_relaxed);
}

}  // namespace spillway::interpose
