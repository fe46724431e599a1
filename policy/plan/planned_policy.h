// The planned policy: the residency engine follows a policy file's schedule (SPILLWAY_POLICY).
// It recognises the planned training step online by the file's step signature
// (policy/plan/step_signature.h), reproduces the file's allocation numbering from the events it
// sees, and at each launch position of the step hands the engine that position's moves (evict,
// discard, prefetch, populate of 2 MiB chunk ranges). Until the step is recognised, when the job
// leaves it (the signature does not match at a step's end, or a move names an allocation the job
// does not have), and when the file cannot be used at all, the learned policy decides — with one
// log line saying why, never a failed job. The learned policy sees every event throughout, so it is
// warm when it takes over. Rules (by size, and by order once the allocations are numbered): `keep`,
// `host` and `never` allocations are never victims of the learned policy, `host`/`never` ones are
// not prefetched by it and the schedule's moves of them are dropped (as the simulator has it), and
// each `host` one is handed to the engine once (TakeHostPlacements), which advises the device to
// keep it on the host and map it remotely (policy/engine/residency_engine_host.cc); one the device
// refuses is moved as `swap` from then on, said in one line. The same policy can also plan the
// step itself, online, from what the job does (MakeOnlinePlannedPolicy). See docs/policy.md.
#ifndef SPILLWAY_POLICY_PLAN_PLANNED_POLICY_H_
#define SPILLWAY_POLICY_PLAN_PLANNED_POLICY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "policy/engine/eviction_policy.h"
#include "policy/plan/policy_file.h"
#include "policy/plan/step_events.h"
#include "policy/plan/step_plan.h"

namespace spillway::policy {

// Receives the policy's log lines: `problem` for why the learned policy decides (a file that cannot
// be used, the first mismatch), else news (the step recognised). Called under the engine's lock.
using PolicyLog = std::function<void(bool problem, const std::string& line)>;

// The paths of the modules on call site `call_site`'s stack (Allocation::call_site), innermost
// first; for rules by module. Null when the run takes no call sites.
using CallSiteModules = std::function<std::vector<std::string>(uint64_t call_site)>;

// The learned policy with online planning. The policy records the job's allocations, frees and
// launches (each launch's arena chunks as the engine names them, and kernel times, which it asks
// the engine for) while the learned policy decides. Once the learned policy has detected a step
// and a whole step's launches have kernel times, `planner` plans the recording for
// `budget_bytes`, and the plan is followed from the next step that matches it, exactly as a
// policy file is (adherence() reports it, path "online plan"); arenas are split into chunks for
// the learned policy until then and whenever the job leaves the plan, whole while it is followed.
// Each plan is tried against the learned policy on the device (policy/plan/plan_trial.h): followed
// for a few timed steps, then the learned policy decides for as many, and the faster goes on; a
// plan that lost is not followed again, said in one line through `log` either way. When no step has
// matched the plan for three steps' events and 1000 more (the job's step changed), the step is
// recorded and planned again, four plans at most. A recording in which the step finder finds no two
// whole steps is planned again once it is twice as long; one that gives no plan otherwise is tried
// again a step later, three times at most; then, or when kOnlinePlanLaunchLimit launches pass
// without a plan (a job that fits never times its kernels), recording stops and the learned policy
// goes on deciding, said in one line through `log`. With `in_background`, planning runs on a thread
// of its own (policy/plan/background_plan.h) while the recording goes on and the learned policy
// decides, and a later launch takes the plan; otherwise (or when no thread can be made) in the
// launch that completes the recording, under the engine's lock. PlanRecordedSteps bounds its search
// either way.
std::unique_ptr<EvictionPolicy> MakeOnlinePlannedPolicy(uint64_t budget_bytes, PolicyLog log,
                                                        StepPlanner planner,
                                                        bool in_background = false);
inline constexpr uint64_t kOnlinePlanLaunchLimit = 131072;

// A policy following `file` (read from `path`) over a fresh learned policy. When the file cannot
// be followed (no step signature, or planned for more memory than `budget_bytes`), the result
// only ever uses the learned policy and says why once. Rules by call site or module match the
// allocations' call sites; with null `modules` they never match, said once per rule.
std::unique_ptr<EvictionPolicy> MakePlannedPolicy(PolicyFile file, std::string path,
                                                  uint64_t budget_bytes, PolicyLog log,
                                                  CallSiteModules modules = nullptr);

// The planned policy for `file` as ReadPolicyFile(path) gave it. A file that does not exist, does
// not parse or has unknown keys gives one line (`<file>:<line>: <what is wrong>`, through `log`)
// and a policy that is the learned policy, reporting the path and the reason in its adherence().
std::unique_ptr<EvictionPolicy> PlannedPolicyFor(const absl::StatusOr<PolicyFile>& file,
                                                 const std::string& path, uint64_t budget_bytes,
                                                 PolicyLog log, CallSiteModules modules = nullptr);

// Reads `path` and makes the planned policy (PlannedPolicyFor).
std::unique_ptr<EvictionPolicy> LoadPlannedPolicy(const std::string& path, uint64_t budget_bytes,
                                                  PolicyLog log, CallSiteModules modules = nullptr);

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_PLAN_PLANNED_POLICY_H_
