// The eviction-policy interface of the residency engine: it is told which allocations each launch
// uses and which are forgotten, and picks the victims when the device budget is exceeded. The
// engine serializes all calls (its own lock), so a policy needs no locking of its own.
#ifndef SPILLWAY_POLICY_EVICTION_POLICY_H_
#define SPILLWAY_POLICY_EVICTION_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace spillway::policy {

// One launch as a policy sees it: the kernel (0 when unknown) and the managed allocations of its
// access set in parameter order, with their sizes.
struct LaunchView {
  uint64_t function = 0;
  const uint64_t* ids = nullptr;
  const uint64_t* sizes = nullptr;
  size_t count = 0;
};

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;

  // @brief The name the exit summary reports ("lru", "learned").
  virtual std::string_view name() const = 0;
  // @brief A launch is being planned; called before the Touch calls of its access set.
  virtual void ObserveLaunch(const LaunchView& /*launch*/) {}
  // @brief Allocation `id` is used by the launch being planned (the newest use).
  virtual void Touch(uint64_t id) = 0;
  // @brief Allocation `id` is gone (freed); it must never be named again.
  virtual void Forget(uint64_t id) = 0;
  // @brief The next victim among the allocations for which `evictable(id)` is true, or 0 when
  // there is none. Picking does not forget: the engine calls Forget or Touch as it sees fit.
  virtual uint64_t PickVictim(bool (*evictable)(const void* context, uint64_t id),
                              const void* context) = 0;
  // @brief The allocations the next `launches` launches are predicted to use, nearest first
  // (each id once); empty when the policy does not predict. `out` is cleared first.
  virtual void PredictNextUses(size_t /*launches*/, std::vector<uint64_t>* out) { out->clear(); }

  // @brief How many launches from now allocation `id` is predicted to be used next;
  // kNoPrediction when the policy cannot tell (or predicts no use within a step).
  virtual uint64_t NextUse(uint64_t /*id*/) { return kNoPrediction; }
  static constexpr uint64_t kNoPrediction = ~uint64_t{0};

  // @brief Launches whose access set the policy had predicted correctly.
  virtual uint64_t predicted_launches() const { return 0; }
  // @brief The detected step length in launches; 0 when none is detected.
  virtual uint64_t step_length() const { return 0; }
};

// The least-recently-used policy: victims in order of last use, oldest first.
std::unique_ptr<EvictionPolicy> MakeLruPolicy();

// The learned policy (policy/learned_policy.cc): detects the repeating training step online and
// evicts the allocation whose next use is farthest; lru until a step is detected.
std::unique_ptr<EvictionPolicy> MakeLearnedPolicy();

// The policy named `name` ("lru" or "learned"); null for another name.
std::unique_ptr<EvictionPolicy> MakePolicy(std::string_view name);

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_EVICTION_POLICY_H_
