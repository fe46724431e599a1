// The eviction-policy interface of the residency engine: it is told which allocations are used
// and forgotten, and picks the victims when the device budget is exceeded. The engine serializes
// all calls (its own lock), so a policy needs no locking of its own.
#ifndef SPILLWAY_POLICY_EVICTION_POLICY_H_
#define SPILLWAY_POLICY_EVICTION_POLICY_H_

#include <cstdint>
#include <memory>
#include <string_view>

namespace spillway::policy {

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;

  // @brief The name the exit summary reports ("lru").
  virtual std::string_view name() const = 0;
  // @brief Allocation `id` is used by the launch being planned (the newest use).
  virtual void Touch(uint64_t id) = 0;
  // @brief Allocation `id` is gone (freed); it must never be named again.
  virtual void Forget(uint64_t id) = 0;
  // @brief The next victim among the allocations for which `evictable(id)` is true, or 0 when
  // there is none. Picking does not forget: the engine calls Forget or Touch as it sees fit.
  virtual uint64_t PickVictim(bool (*evictable)(const void* context, uint64_t id),
                              const void* context) = 0;
};

// The least-recently-used policy: victims in order of last use, oldest first.
std::unique_ptr<EvictionPolicy> MakeLruPolicy();

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_EVICTION_POLICY_H_
