// The planner: from a workload (a recorded trace or a synthetic step) and a device budget to a
// policy file. Eviction is Belady's farthest-next-use over 2 MiB chunks (so parts of a large
// allocation can go while the rest stays), or a time-aware variant of it when that makes the
// simulated step faster, with some launches' loads decided a few launches early where that makes
// room sooner (early loads) and room held free over the step's last launches where the next
// step's first ones need it (held room); each eviction is issued right after the victim's last
// use and each load as soon as a device slot is free for it, so transfers run ahead of the
// kernels that need them; dead data (no use before its free) is discarded (which the engine runs
// as a write-back) or kept until its free where the engine following the plan is faster so,
// fresh allocations are populated without a copy, and allocations that never move and are small or
// used constantly are pinned with a generated `keep` rule. Call sites whose persistent allocations
// are cheaper to read remotely than to move (judged by simulating the step both ways) get a
// generated `host` rule.
#ifndef SPILLWAY_POLICY_PLANNER_PLANNER_H_
#define SPILLWAY_POLICY_PLANNER_PLANNER_H_

#include "absl/status/statusor.h"
#include "policy/plan/policy_file.h"
#include "policy/plan/workload_model.h"
#include "policy/planner/simulator.h"

namespace spillway::policy {

struct PlanOptions {
  SimOptions sim;
  // Hand-written rules carried into the plan (first match wins, before generated ones). `host`
  // and `never` allocations are left out of the schedule; `keep` ones are never evicted.
  std::vector<PolicyRule> rules;
  // Try placing each call site's persistent allocations on the host (remote access), one call
  // site at a time, and keep each placement that makes the simulated step at least 1% faster
  // without moving more than 10% more bytes than the plan with Belady's victims and no host
  // placement.
  bool place_on_host = true;
  // Also plan with time-aware victims (RunBelady's `idle_horizon` at 7/8, 6/8, ... 1/8 of the
  // step) and keep such a plan when its simulated step is at least 1% faster than the best so far
  // and it moves at most 10% more bytes than the plan with Belady's victims.
  bool time_aware_victims = true;
  // Also decide the loads of the launches that wait longest in the simulated step a few launches
  // early (greedy, a few rounds), keeping each change that makes the step at least 1% faster,
  // in the simulation and with the engine following the plan, within the same 10% of bytes.
  bool early_loads = true;
  // Also plan with room held free over the step's last launches (a budget a few chunks smaller
  // from some position to the step's end, that room left for the next step's first launches)
  // and keep the fastest such plan that is at least 1% faster, in the simulation and with the
  // engine following it, within the same 10% of bytes.
  bool held_room = true;
  // Also plan with dead data (no use before its free) kept on the device until its free while
  // anything else can go, and ranked as if used again at its free, and start the searches above
  // from whichever of those and Belady's choice (dead data first) the engine, replayed following
  // it, runs fastest: the engine writes dead data back, and kept until its free it leaves without
  // a copy.
  bool keep_dead_data = true;
  // A bound on the searches above (not on Belady's plan): once the candidate plans simulated add
  // up to this many launches, the remaining tries are skipped and the best plan so far is kept.
  // Planning time grows with it (tens of microseconds per launch simulated). 0: no bound.
  uint64_t max_search_launches = 0;
};

// What the search settled on, for people (spillway-plan prints it).
struct PlanChoices {
  uint64_t idle_horizon = 0;       // time-aware victims' horizon in launches; 0: Belady's victims
  double dead_weight = -1;         // when dead data is a victim (RunBelady's); -1: first
  uint32_t held_from = 0;          // held room: from this launch to the step's end ...
  uint32_t held_chunks = 0;        // ... this many 2 MiB chunks (0: none)
  size_t early_launches = 0;       // launches whose loads are decided early
  uint64_t searched_launches = 0;  // launches simulated by the searches
  bool search_cut = false;         // max_search_launches skipped some tries
};

// With `choices`, also what the plan was made with.
absl::StatusOr<PolicyFile> PlanPolicy(const Workload& w, const PlanOptions& options,
                                      PlanChoices* choices = nullptr);

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_PLANNER_PLANNER_H_
