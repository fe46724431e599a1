// The step signature: how the engine recognises, online, the training step a policy file was
// planned for, and where in it the job is. Every event the engine sees becomes a token built only
// from what it can observe (an allocation's size, a free's size, a launch's access-set sizes in
// parameter order), and the signature is a polynomial hash over one step's tokens. The engine
// keeps the same hash over its last `events` tokens (RollingStepHash, O(1) per event); when it
// equals the policy's signature, a step has just ended there and the next event is the step's
// first. The allocation numbering of a policy file is reproduced from the same events: ids
// 1..persistent are the allocations live at the step boundary in the order they were made, then
// the step's allocations in the order they are made (StepBinding).
#ifndef SPILLWAY_POLICY_PLAN_STEP_SIGNATURE_H_
#define SPILLWAY_POLICY_PLAN_STEP_SIGNATURE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "policy/plan/workload_model.h"

namespace spillway::policy {

uint64_t AllocToken(uint64_t bytes);
uint64_t FreeToken(uint64_t bytes);
// `sizes`: the distinct allocations of the access set, in parameter order.
uint64_t LaunchToken(const uint64_t* sizes, size_t count);

// What a policy file needs to follow `w` online.
struct StepSignature {
  uint64_t signature = 0;   // 0: the workload cannot be followed (see `followable`)
  uint64_t events = 0;      // tokens in one step (allocations + frees + launches)
  uint64_t persistent = 0;  // persistent allocations (ids 1..persistent)
};

// The signature of `w`'s step. It is 0 (not followable) unless the ids are in the order the
// engine reproduces: persistent allocations first, then the step's in allocation order.
StepSignature ComputeStepSignature(const Workload& w);

// The hash over the last `events` tokens, updated per token.
class RollingStepHash {
 public:
  explicit RollingStepHash(uint64_t events);
  void Add(uint64_t token);
  // True when at least `events` tokens were added and the last `events` hash to `signature`.
  bool Matches(uint64_t signature) const { return seen_ >= ring_.size() && hash_ == signature; }
  uint64_t hash() const { return hash_; }

 private:
  std::vector<uint64_t> ring_;
  size_t next_ = 0;
  uint64_t seen_ = 0;
  uint64_t hash_ = 0;
  uint64_t base_pow_ = 1;  // kBase^events
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_PLAN_STEP_SIGNATURE_H_
