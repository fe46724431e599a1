// Step tokens, the step signature and its rolling form (see step_signature.h).
#include "policy/plan/step_signature.h"

#include <algorithm>

namespace spillway::policy {
namespace {

constexpr uint64_t kBase = 0x9E3779B97F4A7C15ull;  // odd: multiplication is invertible mod 2^64

// SplitMix64's finalizer: spreads small inputs over all 64 bits.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t AllocToken(uint64_t bytes) { return Mix(Mix(1) ^ bytes); }
uint64_t FreeToken(uint64_t bytes) { return Mix(Mix(2) ^ bytes); }

uint64_t LaunchToken(const uint64_t* sizes, size_t count) {
  uint64_t h = Mix(3);
  for (size_t i = 0; i < count; ++i) h = Mix(h ^ sizes[i]) + i;
  return Mix(h ^ count);
}

StepSignature ComputeStepSignature(const Workload& w) {
  StepSignature out;
  std::vector<uint64_t> tokens;
  uint64_t next_local = 0;
  for (const WorkloadAllocation& a : w.allocations) {
    if (!a.persistent) continue;
    if (a.id != out.persistent + 1) return {};  // persistent ones are not first
    ++out.persistent;
  }
  next_local = out.persistent + 1;
  std::vector<uint64_t> sizes;
  for (const StepEvent& e : w.step) {
    switch (e.kind) {
      case StepEvent::Kind::kAlloc:
        if (e.alloc_id != next_local++) return {};  // not in allocation order
        tokens.push_back(AllocToken(w.allocation(e.alloc_id).bytes));
        break;
      case StepEvent::Kind::kFree:
        tokens.push_back(FreeToken(w.allocation(e.alloc_id).bytes));
        break;
      case StepEvent::Kind::kLaunch: {
        sizes.clear();
        std::vector<uint64_t> seen;
        for (const ChunkRange& r : e.launch.accesses) {
          if (std::find(seen.begin(), seen.end(), r.alloc_id) != seen.end()) continue;
          seen.push_back(r.alloc_id);
          sizes.push_back(w.allocation(r.alloc_id).bytes);
        }
        tokens.push_back(LaunchToken(sizes.data(), sizes.size()));
        break;
      }
    }
  }
  if (tokens.empty()) return {};
  RollingStepHash hash(tokens.size());
  for (const uint64_t t : tokens) hash.Add(t);
  if (hash.hash() == 0) return {};  // 0 means "none" in a policy file
  out.signature = hash.hash();
  out.events = tokens.size();
  return out;
}

RollingStepHash::RollingStepHash(uint64_t events) : ring_(std::max<uint64_t>(events, 1), 0) {
  for (size_t i = 0; i < ring_.size(); ++i) base_pow_ *= kBase;
}

void RollingStepHash::Add(uint64_t token) {
  // hash = sum over the window of token_i * kBase^(events - 1 - i): shift in the new token and
  // drop the one that leaves (it would now carry kBase^events).
  hash_ = hash_ * kBase + token - ring_[next_] * base_pow_;
  ring_[next_] = token;
  next_ = (next_ + 1) % ring_.size();
  ++seen_;
}

}  // namespace spillway::policy
