// The interposer's one way into the engine (see front_door.h).
#include "policy/front_door.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cost_model.h"
#include "policy/plan/planned_policy.h"
#include "policy/planner/online_plan.h"

namespace spillway::policy {

FrontDoor::FrontDoor(EngineSettings settings, EngineLog log, std::function<Device*()> make_device)
    : settings_(std::move(settings)), log_(std::move(log)), make_device_(std::move(make_device)) {}

std::unique_ptr<EvictionPolicy> FrontDoor::MakeEvictionPolicy(uint64_t budget) const {
  std::unique_ptr<EvictionPolicy> eviction;
  if (settings_.policy_file.has_value()) {
    // A policy file (SPILLWAY_POLICY): followed once the step is recognised; one line and the
    // learned policy when it cannot be used.
    EngineLog log = log_;
    eviction = PlannedPolicyFor(
        *settings_.policy_file, settings_.policy_path, budget,
        [log](bool problem, const std::string& line) {
          (problem ? log.problem : log.info)(absl::StrCat("SPILLWAY_POLICY: ", line));
        },
        settings_.call_site_modules);
  } else if (settings_.eviction == "learned" && settings_.online_plan) {
    // The learned policy that plans the detected step online (SPILLWAY_ONLINE_PLAN), on a thread
    // of its own unless asked to plan inline.
    EngineLog log = log_;
    eviction = MakeOnlinePlannedPolicy(
        budget,
        [log](bool problem, const std::string& line) { (problem ? log.warn : log.info)(line); },
        PlanRecordedSteps, !settings_.online_plan_inline);
  } else {
    eviction = MakePolicy(settings_.eviction);
  }
  if (eviction == nullptr) eviction = MakeLearnedPolicy();  // the settings accept no other
  return eviction;
}

ResidencyEngine* FrontDoor::Engine(int ordinal, uint64_t context, bool* started) {
  if (started != nullptr) *started = false;
  if (ordinal < 0 || ordinal >= kMaxEngineDevices) return nullptr;
  if (ResidencyEngine* engine = engines_[ordinal].load(std::memory_order_acquire)) return engine;
  Device* device = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (devices_[ordinal] == nullptr) devices_[ordinal] = make_device_();
    device = devices_[ordinal];
  }
  if (device == nullptr) return nullptr;
  uint64_t budget = settings_.device_memory;
  uint64_t free = 0, total = 0;
  const bool known = device->MemoryInfo(&free, &total) == kDeviceOk && total != 0;
  // The default: physical free memory now, less 5% of the total as headroom for what is not
  // pageable.
  const uint64_t headroom = total / 20;
  const uint64_t fits = free > headroom ? free - headroom : free / 2;
  if (budget == 0) {
    if (!known) {
      if (!start_failed_said_.exchange(true)) {
        log_.info("engine not started yet: the driver cannot report memory");
      }
      return nullptr;
    }
    budget = fits;
  } else if (known && budget > total) {
    // A budget the device cannot hold: the engine would count room that is not there, and the job
    // would be told of memory that does not exist. The default instead.
    log_.problem(absl::StrCat("SPILLWAY_DEVICE_MEMORY: ", budget, " bytes is more than device ",
                              ordinal, "'s ", total, "; using ", fits, ", what it has free"));
    budget = fits;
  }
  ResidencyEngine* engine = nullptr;
  {
    std::lock_guard lock(mutex_);
    engine = engines_[ordinal].load(std::memory_order_acquire);
    if (engine != nullptr) return engine;
    // Managed allocations count as the 4 KiB pieces they span: nvidia-uvm backs a whole 2 MiB
    // block with one chunk and the rest of a range with 64 KiB and 4 KiB ones.
    engine = new ResidencyEngine(
        device, MakeEvictionPolicy(budget), budget,
        EngineOptions{settings_.lookahead, spillway::kPieceBytes, settings_.lookahead_auto});
    // Allocations made on this device before the engine started. Host placements a policy
    // file's rules give them are made at the next launch, on its stream: not on the legacy stream
    // under this lock, where a capture in progress would be invalidated by them.
    for (const Allocation& allocation : registry_.Snapshot()) {
      if (allocation.device == ordinal) engine->OnAllocated(allocation, /*place_now=*/false);
    }
    retirement_nodes_[ordinal] = new Retired{engine, ordinal, nullptr};
    contexts_[ordinal] = context;
    engines_[ordinal].store(engine, std::memory_order_release);
  }
  log_.info(absl::StrCat("engine started on device ", ordinal, ": policy ",
                         std::string(engine->policy_name()), ", budget ", budget, " bytes"));
  if (started != nullptr) *started = true;
  return engine;
}

ResidencyEngine* FrontDoor::EngineOf(int ordinal) const {
  if (ordinal < 0 || ordinal >= kMaxEngineDevices) return nullptr;
  return engines_[ordinal].load(std::memory_order_acquire);
}

Device* FrontDoor::DeviceOf(int ordinal) {
  if (ordinal < 0 || ordinal >= kMaxEngineDevices) return nullptr;
  std::lock_guard lock(mutex_);
  return devices_[ordinal];
}

Allocation FrontDoor::Allocated(uint64_t address, uint64_t bytes, Backing backing,
                                bool stream_ordered, bool substituted, int device,
                                uint64_t call_site, uint64_t context, bool place_now) {
  const Allocation allocation = registry_.Insert(address, bytes, backing, stream_ordered,
                                                 substituted, device, call_site, context);
  if (ResidencyEngine* engine = EngineOf(device)) engine->OnAllocated(allocation, place_now);
  return allocation;
}

void FrontDoor::Freed(uint64_t address) {
  const std::optional<Allocation> allocation = registry_.Erase(address);
  if (!allocation.has_value()) return;
  if (ResidencyEngine* engine = EngineOf(allocation->device)) engine->Forget(*allocation);
}

uint64_t FrontDoor::ContextEnded(uint64_t context, const std::function<void(int device)>& retire,
                                 size_t* freed_count) {
  uint64_t retired = 0;
  // The allocations it freed, each with the engine that knew it then.
  std::vector<std::pair<Allocation, ResidencyEngine*>> freed;
  {
    // Under the start lock, which Engine holds while it takes the registry's list: a new engine
    // starts either before the allocations are erased (and is told below) or after (and never
    // knew them).
    std::lock_guard lock(mutex_);
    for (int device = 0; device < kMaxEngineDevices; ++device) {
      ResidencyEngine* engine = engines_[device].load(std::memory_order_acquire);
      if (engine == nullptr || contexts_[device] != context) continue;
      Retired* node = retirement_nodes_[device];  // made with the engine
      retirement_nodes_[device] = nullptr;
      node->next = retired_.load(std::memory_order_relaxed);
      retired_.store(node, std::memory_order_release);
      engines_[device].store(nullptr, std::memory_order_release);
      devices_[device] = nullptr;  // the retired engine keeps its own; the next makes a new one
      contexts_[device] = 0;
      retired |= uint64_t{1} << device;
      if (retire) retire(device);
    }
    for (const Allocation& allocation : registry_.Snapshot()) {
      if (allocation.context != context || !registry_.EraseIfCurrent(allocation)) continue;
      freed.emplace_back(allocation, EngineOf(allocation.device));
    }
  }
  for (const auto& [allocation, engine] : freed) {
    if (engine != nullptr) engine->Forget(allocation);
  }
  if (freed_count != nullptr) *freed_count = freed.size();
  return retired;
}

bool FrontDoor::Resolve(const LaunchPointers& pointers, AccessSet* access,
                        std::vector<uint64_t>* words) {
  bool resolved = false;
  if (pointers.words != nullptr) {
    if (words != pointers.words) *words = *pointers.words;
    registry_.FindAll(words->data(), words->size(), access);
    resolved = true;
  } else if (pointers.kernel_params != nullptr) {
    if (pointers.layout != nullptr) {
      ResolveFromKernelParams(registry_, *pointers.layout, pointers.kernel_params, access, words);
      resolved = true;
    }
  } else {
    resolved = ResolveFromExtra(registry_, pointers.extra, access, words);
  }
  if (resolved && pointers.words == nullptr) {
    launches_resolved_.fetch_add(1, std::memory_order_relaxed);
  }
  return resolved;
}

void FrontDoor::LockForFork() {
  mutex_.lock();
  registry_.LockForFork();
}

void FrontDoor::UnlockAfterFork() {
  registry_.UnlockAfterFork();
  mutex_.unlock();
}

void FrontDoor::ResetInForkedChild() {
  mutex_.unlock();
  registry_.ResetInForkedChild();
  for (std::atomic<ResidencyEngine*>& engine : engines_) {
    engine.store(nullptr, std::memory_order_relaxed);
  }
  retired_.store(nullptr, std::memory_order_relaxed);  // the parent's, not counted here
  for (Retired*& node : retirement_nodes_) node = nullptr;
  launches_resolved_.store(0, std::memory_order_relaxed);
}

EngineTotals FrontDoor::Totals() const {
  EngineTotals totals;
  std::vector<std::pair<int, const ResidencyEngine*>> engines;
  for (const Retired* node = retired_.load(std::memory_order_acquire); node != nullptr;
       node = node->next) {
    engines.emplace_back(node->device, node->engine);
  }
  for (int device = 0; device < kMaxEngineDevices; ++device) {
    if (const ResidencyEngine* engine = engines_[device].load(std::memory_order_acquire)) {
      engines.emplace_back(device, engine);
    }
  }
  bool counted[kMaxEngineDevices] = {};
  for (const auto& [device, engine] : engines) {
    totals.policy = std::string(engine->policy_name());
    if (!counted[device]) {
      counted[device] = true;
      totals.devices += 1;
      totals.budget_bytes += engine->budget_bytes();
    }
    totals.prefetch_bytes += engine->prefetch_bytes();
    totals.evict_bytes += engine->evict_bytes();
    totals.discard_bytes += engine->discard_bytes();
    totals.overwrite_discard_bytes += engine->overwrite_discard_bytes();
    totals.predicted_launches += engine->predicted_launches();
    totals.step_length = std::max(totals.step_length, engine->step_length());
    totals.thread_steps = std::max(totals.thread_steps, engine->thread_steps());
    totals.reordered_launches += engine->reordered_launches();
    totals.lookahead_prefetch_bytes += engine->lookahead_prefetch_bytes();
    ScheduleAdherence adherence;
    if (engine->adherence(&adherence)) totals.policy_file.push_back(std::move(adherence));
  }
  return totals;
}

}  // namespace spillway::policy
