// The learned policy's step finder over one launch sequence (policy/engine/learned_policy.cc),
// which the `learned` policy (policy/engine/learned_threads.cc) runs over the whole sequence and,
// where that has no step, over each launching thread's own.
#ifndef SPILLWAY_POLICY_ENGINE_LEARNED_SEQUENCE_H_
#define SPILLWAY_POLICY_ENGINE_LEARNED_SEQUENCE_H_

#include <cstdint>
#include <memory>

#include "policy/engine/eviction_policy.h"

namespace spillway::policy {

// A policy that finds the repeating step in the launches it observes (all of them, as given) and
// evicts the allocation whose next use is farthest; least recently used until it has a step.
std::unique_ptr<EvictionPolicy> MakeSequenceLearnedPolicy();

// What `sequence` (made by MakeSequenceLearnedPolicy) would answer to NextUse(id) by scanning the
// last step's launches.
uint64_t SequenceNextUseByScan(const EvictionPolicy& sequence, uint64_t id);

// Whether `sequence` pairs a launch with one of the previous step within a few places of its own
// (a launch order that changes from step to step; the default) or only exactly one step earlier.
void SetSequenceSlack(EvictionPolicy& sequence, bool tolerant);

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_ENGINE_LEARNED_SEQUENCE_H_
