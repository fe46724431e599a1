// Replays a workload's training step against a residency policy with the migration cost model
// simgpu uses (common/cost_model.h) and predicts what one steady-state step costs: bytes moved,
// demand faults, step time. Policies: plain demand paging (nvidia-uvm-like: 2 MiB chunks faulted
// in batches, evicted in the order they became resident), an EvictionPolicy of the residency
// engine (whole-allocation prefetch and eviction ordered on the launch stream, as ResidencyEngine
// does), a planned schedule (a policy file), and the lower bound (Belady's farthest-next-use over
// 2 MiB chunks with transfers perfectly overlapped with compute).
//
// Every policy is replayed over identical steps and one steady-state step is reported: the second
// of three (the first warms the device up, the third is what the planner may look ahead into); an
// EvictionPolicy gets three warm-up steps, so a learning policy has seen the step; the bound is the
// cheapest steady step of five (ChunkLowerBound).
#ifndef SPILLWAY_POLICY_PLANNER_SIMULATOR_H_
#define SPILLWAY_POLICY_PLANNER_SIMULATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/cost_model.h"
#include "policy/engine/eviction_policy.h"
#include "policy/plan/policy_file.h"
#include "policy/plan/workload_model.h"

namespace spillway::policy {

struct SimOptions {
  uint64_t device_memory = 0;  // the budget, bytes (whole 4 KiB pages are used)
  CostModel cost;
  // The simulated device's memory: `device_memory` in whole 4 KiB pages (what managed memory is
  // backed with), and at least one 2 MiB chunk.
  uint64_t capacity_bytes() const {
    const uint64_t pages = device_memory / kPieceBytes * kPieceBytes;
    return pages > kChunkBytes ? pages : kChunkBytes;
  }
};

struct SimResult {
  std::string policy;
  uint64_t h2d_bytes = 0;        // migrated in (prefetch and demand faults)
  uint64_t d2h_bytes = 0;        // written back by evictions
  uint64_t remote_bytes = 0;     // host-placed memory kernels read and write over the link (x2)
  uint64_t discarded_bytes = 0;  // dropped without a copy (dead data)
  uint64_t demand_faults = 0;    // chunks faulted in by kernels
  uint64_t fault_batches = 0;
  uint64_t overcommit_chunks = 0;  // chunks made resident with nothing left to evict
  // Chunks the engine moved off the device (written back or discarded) while a kernel issued
  // before them still used them: an order the engine must never produce (SimulateEngine only).
  uint64_t early_moves = 0;
  // The engine's driver calls in the step that the cost model prices (moves, advice, memory
  // queries; not the job's launches, nor event calls) and the time they blocked the launching
  // thread (the cost model's CallCost: zero unless a calibration gives it) (SimulateEngine only).
  uint64_t host_calls = 0;
  double host_call_seconds = 0;
  double step_seconds = 0;
  double compute_seconds = 0;
  uint64_t bytes_moved() const { return h2d_bytes + d2h_bytes + remote_bytes; }
};

// Chunks that hold no data (never resident since their allocation) are zero-filled when they fault
// in, as on simgpu: the fault's batch latency, no transfer.
SimResult SimulateDemandPaging(const Workload& w, const SimOptions& options);

// `make` builds a fresh policy (called once); `name` labels the result. A model of the engine
// without its lookahead (every move on the launch stream before the kernel), kept for the planner's
// tests; SimulateEngine runs the engine itself.
SimResult SimulateEvictionPolicy(const Workload& w, const SimOptions& options,
                                 const std::function<std::unique_ptr<EvictionPolicy>()>& make,
                                 const std::string& name);

// How SimulateEngine sets up the residency engine (EngineOptions, as the shim sets them from
// SPILLWAY_LOOKAHEAD): `auto` (the default) sizes the lookahead from observed times up to 64
// launches; a fixed count without `lookahead_auto`; 0 turns the lookahead off.
struct EngineSimOptions {
  int lookahead_launches = 64;
  bool lookahead_auto = true;
};

// The residency engine itself (policy/engine/residency_engine.h, with `make`'s policy and its
// side-stream lookahead sized by LookaheadSizer) driven over the step against a simulated device
// with simgpu's cost model, residency and streams (policy/planner/simulator_engine.cc): each
// launch's OnLaunch moves, then the kernel on the launch stream; frees discarded through OnFree. A
// device slot is usable once the eviction or free that emptied it has completed. The engine gets
// kEngineWarmupSteps steps before the reported one (to detect the step and time the kernels). The
// kernels touch the workload's ranges (a trace's arena ranges already end where the engine ends
// them, policy/planner/trace_workload.h); the engine sees a pointer into each range's first chunk.
// `name` labels the result.
SimResult SimulateEngine(const Workload& w, const SimOptions& options,
                         const std::function<std::unique_ptr<EvictionPolicy>()>& make,
                         const std::string& name, const EngineSimOptions& engine = {});
inline constexpr uint32_t kEngineWarmupSteps = 5;

// SimulateEngine with the planned policy following `plan` (as a run with SPILLWAY_POLICY has it):
// what the engine does with the plan, where SimulatePlanned prices the schedule itself. Its
// policy's log lines are dropped. Labelled "planned-engine".
SimResult SimulateEngineFollowing(const Workload& w, const PolicyFile& plan,
                                  const SimOptions& options);

// Follows `policy`'s schedule and rules; what the schedule misses is demand-faulted. With
// `stalls`, also how long each launch of the measured step waited (for its data, or for a slot)
// after the launch before it ended, by position in the step.
SimResult SimulatePlanned(const Workload& w, const PolicyFile& policy, const SimOptions& options,
                          std::vector<double>* stalls = nullptr);

// Belady over 2 MiB chunks: fewest chunks moved for the budget; first touches of fresh
// allocations and dead data move nothing; step time = max(compute, copy-engine time). Over five
// steps, the cheapest of the three between the first and the last (the step after a cold start
// can cost more than a steady one).
SimResult ChunkLowerBound(const Workload& w, const SimOptions& options);

// A capacity-aware lower bound on the step time (docs/simulate.md, "The capacity bound"): for
// every launch position P of the step, the time before P's kernel starts is at least what the
// kernels before it compute and what must have moved by then, and the time from there to the
// step's end at least what the kernels from P on compute and what must move after P starts; what
// must move in a window follows from the capacity (data made before P and used from P on, data
// that exists at the window's start and is used in it, and, since every chunk a window touches
// needs a slot, what must leave to make room), less what the device holds. A second argument,
// kernel to kernel: what a kernel holds while it runs leaves the rest of the device for what the
// next kernels need, and what does not fit comes in after it ends; the larger of the two is the
// bound (docs/simulate.md, "The capacity bound"). By default copies that
// bypass the copy engines (demand faults, remote access) are charged to the kernels, as simgpu
// charges them, so each window is the best split of its traffic between the two: valid for every
// policy the simulator models that does not drop data a later kernel reads ("cap-bound"). With
// `shared_link`, every copy takes its copy engine's time, as on a GPU whose page faults migrate
// over the same copy engines and link ("link-bound"): tighter, but not a bound for simgpu's
// model. Only `step_seconds` and `compute_seconds` are set.
SimResult CapacityLowerBound(const Workload& w, const SimOptions& options,
                             bool shared_link = false);

// One line per result (and its ratio to `bound`), as spillway-simulate prints them; with `tight`
// (CapacityLowerBound), a last column with each step time's ratio to it and its own row; each of
// `more_bounds` (time-only bounds, CapacityLowerBound with a shared link) a row after it.
std::string FormatResultTable(const std::vector<SimResult>& results, const SimResult& bound,
                              const SimResult* tight = nullptr,
                              const std::vector<SimResult>& more_bounds = {});

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_PLANNER_SIMULATOR_H_
