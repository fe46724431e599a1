// spillway-simulate TRACE|--synthetic NAME (--device-memory SIZE | --oversubscription X)
//                   [--policy FILE] [--calibration FILE]
// Predicts one steady-state training step under plain demand paging, the residency engine with
// its eviction policies (lru; learned with its default lookahead and without: learned-nola), the
// planned policy (FILE, or planned on the spot) and the chunk-level lower bound:
// bytes moved, demand faults, step time, and each one's ratio to the bound (docs/simulate.md).
// spillway-simulate --benchmark prints the table of docs/results/planner-simulate.md.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/size.h"
#include "policy/engine/eviction_policy.h"
#include "policy/planner/planner.h"
#include "policy/planner/synthetic_workloads.h"
#include "policy/tools/workload_source.h"

namespace spillway::policy {
namespace {

// A bad input (a trace, a policy file) or a failed plan: the one line, exit 1, as the trace
// tools (spillway-inspect, -report, -export) exit.
int Fail(const absl::Status& s) {
  std::string msg(s.message());
  std::fprintf(stderr, "spillway simulate: %s\n", msg.c_str());
  return 1;
}

// A bad command line: the one line and where the usage is.
int FailUsage(const absl::Status& s) {
  Fail(absl::InvalidArgumentError(absl::StrCat(s.message(), " (see spillway-simulate --help)")));
  return 2;
}

// Every policy's result for `w` at `options`, planned ones last; `policy` overrides the plan.
// With `engine_row`, the engine following the plan as well (planned-engine).
absl::StatusOr<std::vector<SimResult>> SimulateAll(const Workload& w, const SimOptions& options,
                                                   const PolicyFile* policy, bool engine_row) {
  std::vector<SimResult> results;
  results.push_back(SimulateDemandPaging(w, options));
  // The residency engine itself: lru (which predicts nothing, so never looks ahead), learned
  // with its default lookahead (SPILLWAY_LOOKAHEAD=auto) and without (SPILLWAY_LOOKAHEAD=0).
  results.push_back(SimulateEngine(w, options, MakeLruPolicy, "lru"));
  results.push_back(SimulateEngine(w, options, MakeLearnedPolicy, "learned"));
  results.push_back(
      SimulateEngine(w, options, MakeLearnedPolicy, "learned-nola", EngineSimOptions{0, false}));
  PolicyFile planned;
  if (policy == nullptr) {
    PlanOptions plan_options;
    plan_options.sim = options;
    absl::StatusOr<PolicyFile> plan = PlanPolicy(w, plan_options);
    if (!plan.ok()) return plan.status();
    planned = *std::move(plan);
    policy = &planned;
  }
  results.push_back(SimulatePlanned(w, *policy, options));
  if (engine_row) results.push_back(SimulateEngineFollowing(w, *policy, options));
  return results;
}

int Benchmark(const CostModel& cost) {
  std::printf(
      "| workload | peak live | oversub. | budget | policy | bytes moved | x bound | "
      "demand faults | step (ms) | x bound | x cap bound |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const char* name : {"transformer", "cnn"}) {
    absl::StatusOr<Workload> w = MakeSyntheticWorkload(name);
    if (!w.ok()) return Fail(w.status());
    for (double x : {1.5, 2.0, 4.0, 8.0}) {
      SimOptions options;
      options.cost = cost;
      options.device_memory = static_cast<uint64_t>(static_cast<double>(w->peak_live_bytes()) / x);
      absl::StatusOr<std::vector<SimResult>> results = SimulateAll(*w, options, nullptr, false);
      if (!results.ok()) return Fail(results.status());
      const SimResult bound = ChunkLowerBound(*w, options);
      results->push_back(bound);
      results->push_back(CapacityLowerBound(*w, options));
      const double cap_bound = results->back().step_seconds;
      for (const SimResult& r : *results) {
        const double bytes_ratio =
            bound.bytes_moved() ? static_cast<double>(r.bytes_moved()) / bound.bytes_moved() : 1;
        const bool cap_row = &r == &results->back();  // a time bound only: no bytes
        std::printf("| %s | %s | %.1fx | %s | %s | %s | %s | %s | %.1f | %.2f | %.2f |\n", name,
                    FormatSize(w->peak_live_bytes()).c_str(), x,
                    FormatSize(options.device_memory).c_str(), r.policy.c_str(),
                    cap_row ? "-" : FormatSize(r.bytes_moved()).c_str(),
                    cap_row ? "-" : absl::StrFormat("%.2f", bytes_ratio).c_str(),
                    cap_row ? "-" : absl::StrCat(r.demand_faults).c_str(), r.step_seconds * 1e3,
                    r.step_seconds / bound.step_seconds, r.step_seconds / cap_bound);
      }
    }
  }
  return 0;
}

int Main(int argc, char** argv) {
  absl::StatusOr<ToolArgs> args = ParseToolArgs(argc, argv, {"--policy", "--benchmark"});
  if (!args.ok()) return FailUsage(args.status());
  if (args->help) {
    std::printf(
        "usage: spillway-simulate TRACE|--synthetic NAME (--device-memory SIZE | "
        "--oversubscription X) [--policy FILE] [--calibration FILE]\n"
        "       spillway-simulate --benchmark\n");
    return 0;
  }
  std::string cost_warning;
  absl::StatusOr<CostModel> cost = CostModelFor(*args, &cost_warning);
  if (!cost.ok()) return Fail(cost.status());
  if (!cost_warning.empty()) {
    std::fprintf(stderr, "spillway simulate: warning: %s\n", cost_warning.c_str());
  }
  if (args->benchmark) return Benchmark(*cost);
  std::string warning;
  absl::StatusOr<Workload> w = LoadWorkload(*args, &warning);
  if (!w.ok()) return Fail(w.status());
  if (!warning.empty()) std::fprintf(stderr, "spillway simulate: warning: %s\n", warning.c_str());
  absl::StatusOr<uint64_t> budget = DeviceMemoryFor(*args, *w);
  if (!budget.ok()) return FailUsage(budget.status());
  SimOptions options;
  options.device_memory = *budget;
  options.cost = *cost;
  if (const std::string over = LargerThanDeviceWarning(*w, options.capacity_bytes());
      !over.empty()) {
    std::fprintf(stderr, "spillway simulate: warning: %s\n", over.c_str());
  }
  PolicyFile file;
  if (!args->policy.empty()) {
    absl::StatusOr<PolicyFile> read = ReadPolicyFile(args->policy);
    if (!read.ok()) return Fail(read.status());
    if (absl::Status s = CheckPolicyMatches(*read, args->policy, *w); !s.ok()) return Fail(s);
    file = *std::move(read);
  }
  absl::StatusOr<std::vector<SimResult>> results =
      SimulateAll(*w, options, args->policy.empty() ? nullptr : &file, true);
  if (!results.ok()) return Fail(results.status());
  const SimResult bound = ChunkLowerBound(*w, options);
  results->push_back(bound);
  const SimResult cap_bound = CapacityLowerBound(*w, options);
  std::printf(
      "%s\n%s; peak live %s, device memory %s (%.2fx oversubscribed)\n", w->name.c_str(),
      w->description.c_str(), FormatSize(w->peak_live_bytes()).c_str(),
      FormatSize(options.device_memory).c_str(),
      static_cast<double>(w->peak_live_bytes()) / static_cast<double>(options.device_memory));
  const SimResult link_bound = CapacityLowerBound(*w, options, /*shared_link=*/true);
  std::printf("%s", FormatResultTable(*results, bound, &cap_bound, {link_bound}).c_str());
  return 0;
}

}  // namespace
}  // namespace spillway::policy

int main(int argc, char** argv) { return spillway::policy::Main(argc, argv); }
