// The one way into the engine for the interposer (interpose/): the registry of the job's live
// allocations, one residency engine per device (its budget and eviction policy chosen from the
// job's settings), the resolution of a launch's pointers into its access set, and what the exit
// summary reports of them all. interpose/ includes this header and policy/engine/device.h, nothing
// else of policy/: the engine, its policies and the planner stay behind it.
//
// Thread-safe. Engines start and retire under one lock that no driver call is made under (a
// Device's MemoryInfo aside, asked before it is taken); the launch path takes no lock of its own.
#ifndef SPILLWAY_POLICY_FRONT_DOOR_H_
#define SPILLWAY_POLICY_FRONT_DOOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "policy/engine/access_set.h"
#include "policy/engine/allocation_registry.h"
#include "policy/engine/device.h"
#include "policy/engine/eviction_policy.h"
#include "policy/engine/residency_engine.h"
#include "policy/plan/planned_policy.h"
#include "policy/plan/policy_file.h"

namespace spillway::policy {

inline constexpr int kMaxEngineDevices = 64;  // device ordinals 0..63

// How the job's engines are made (its SPILLWAY_* settings, read once; docs/engine.md).
struct EngineSettings {
  uint64_t device_memory = 0;        // the budget asked for; 0: what the device has free
  std::string eviction = "learned";  // lru, learned or none
  bool online_plan = true;           // learned: plan the detected step inside the job
  bool online_plan_inline = false;   // ... in the launch that completes the recording
  int lookahead = 2;                 // launches prefetched ahead (fixed count)
  bool lookahead_auto = true;        // sized from kernel times instead
  std::string policy_path;           // SPILLWAY_POLICY; empty: none
  std::optional<absl::StatusOr<PolicyFile>> policy_file;  // its one read, at start-up
  CallSiteModules call_site_modules;  // for rules by call site or module; null: they match none
};

// Where the front door's lines go: news (info), and problems (logged as warnings and kept for the
// exit summary). Plain warnings are logged only.
struct EngineLog {
  std::function<void(const std::string&)> info;
  std::function<void(const std::string&)> warn;
  std::function<void(const std::string&)> problem;
};

// What the exit summary reports of the engines, added up over devices (an engine retired when its
// context ended counts its moves; each device's budget counts once).
struct EngineTotals {
  std::string policy;  // the last engine's policy name; empty: none started
  uint64_t devices = 0, budget_bytes = 0;
  uint64_t prefetch_bytes = 0, evict_bytes = 0, discard_bytes = 0, overwrite_discard_bytes = 0;
  uint64_t lookahead_prefetch_bytes = 0;
  uint64_t predicted_launches = 0, step_length = 0, thread_steps = 0, reordered_launches = 0;
  std::vector<ScheduleAdherence> policy_file;  // per engine following a policy file or plan
};

// Where a launch's pointers come from: a kernel's parameters with their layout, the `extra`
// buffer form, or pointer words known already (a graph's kernel nodes, read at instantiation).
struct LaunchPointers {
  const std::vector<ParamInfo>* layout = nullptr;
  void** kernel_params = nullptr;
  void** extra = nullptr;
  const std::vector<uint64_t>* words = nullptr;
};

class FrontDoor {
 public:
  // `make_device` makes the Device of a device ordinal, once, when its first engine starts (the
  // current context's device); it is kept for the engines that device starts later.
  FrontDoor(EngineSettings settings, EngineLog log, std::function<Device*()> make_device);
  FrontDoor(const FrontDoor&) = delete;
  FrontDoor& operator=(const FrontDoor&) = delete;

  AllocationRegistry& registry() { return registry_; }
  const AllocationRegistry& registry() const { return registry_; }
  const EngineSettings& settings() const { return settings_; }

  // @brief The engine of device `ordinal`, started now if it has none, in context `context`
  // (where its streams and events live). Null when the device cannot report its memory and no
  // budget was given, or `ordinal` is out of range. `*started` (if given) says whether this call
  // started it.
  ResidencyEngine* Engine(int ordinal, uint64_t context, bool* started = nullptr);
  // @brief The engine of device `ordinal` if one runs; never starts one.
  ResidencyEngine* EngineOf(int ordinal) const;
  // @brief The Device that device `ordinal`'s engines use (null before its first engine).
  Device* DeviceOf(int ordinal);

  // @brief Registers a new live allocation and tells its device's engine, when one runs (host
  // placements a policy file's rules give it are made now only with `place_now`).
  Allocation Allocated(uint64_t address, uint64_t bytes, Backing backing, bool stream_ordered,
                       bool substituted, int device, uint64_t call_site, uint64_t context,
                       bool place_now);
  // @brief Forgets the allocation at `address` (already freed: no discard).
  void Freed(uint64_t address);

  // @brief Context `context` ended (its memory, streams and events are gone): its engines are
  // retired (each device's next one starts at its next use) and the allocations made in it are
  // forgotten. `retire` is called for each device whose engine retired, under the start lock
  // (before that device's next engine can start). Returns those devices (a bit each) and, in
  // `*freed`, how many allocations were forgotten. No driver call.
  uint64_t ContextEnded(uint64_t context, const std::function<void(int device)>& retire,
                        size_t* freed);

  // @brief Resolves a launch's pointers into `access` (the live allocations they name) and
  // `words` (the pointer words, for arenas and record mode), and counts a resolved launch.
  // False when they cannot be read (no layout, no extra buffer, no words).
  bool Resolve(const LaunchPointers& pointers, AccessSet* access, std::vector<uint64_t>* words);
  uint64_t launches_resolved() const { return launches_resolved_.load(std::memory_order_relaxed); }

  // Fork: the start lock and the registry's are held across a fork, and a child forgets its
  // parent's engines (it starts its own).
  void LockForFork();
  void UnlockAfterFork();
  void ResetInForkedChild();

  EngineTotals Totals() const;

 private:
  struct Retired {
    const ResidencyEngine* engine;
    int device;
    const Retired* next;
  };
  // The policy a new engine of `budget` bytes follows.
  std::unique_ptr<EvictionPolicy> MakeEvictionPolicy(uint64_t budget) const;

  const EngineSettings settings_;
  const EngineLog log_;
  const std::function<Device*()> make_device_;
  AllocationRegistry registry_;
  std::atomic<ResidencyEngine*> engines_[kMaxEngineDevices] = {};
  std::mutex mutex_;                                   // starts and retirements
  Device* devices_[kMaxEngineDevices] = {};            // guarded by mutex_
  uint64_t contexts_[kMaxEngineDevices] = {};          // guarded by mutex_
  Retired* retirement_nodes_[kMaxEngineDevices] = {};  // guarded by mutex_; made with the engine
  std::atomic<const Retired*> retired_{nullptr};       // read by Totals without the lock
  std::atomic<bool> start_failed_said_{false};
  std::atomic<uint64_t> launches_resolved_{0};
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_FRONT_DOOR_H_
