// spillway-plan TRACE|--synthetic NAME (--device-memory SIZE | --oversubscription X)
//               -o model.policy.toml [--policy RULES.toml] [--fewest-bytes]
// Plans the schedule for a budget and writes it as a policy file (docs/policy.md). Hand-written
// rules from --policy are kept and obeyed. --fewest-bytes keeps Belady's victims (the fewest
// bytes moved) instead of a faster schedule that moves up to 10% more.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/output_file.h"
#include "common/size.h"
#include "policy/planner/planner.h"
#include "policy/tools/workload_source.h"

namespace spillway::policy {
namespace {

// A bad input (a trace, a policy file) or a failed plan: the one line, exit 1, as the trace
// tools (spillway-inspect, -report, -export) exit.
int Fail(const absl::Status& s) {
  std::string msg(s.message());
  std::fprintf(stderr, "spillway plan: %s\n", msg.c_str());
  return 1;
}

// A bad command line: the one line and where the usage is.
int FailUsage(const absl::Status& s) {
  Fail(absl::InvalidArgumentError(absl::StrCat(s.message(), " (see spillway-plan --help)")));
  return 2;
}

int Main(int argc, char** argv) {
  absl::StatusOr<ToolArgs> args = ParseToolArgs(argc, argv, {"-o", "--policy", "--fewest-bytes"});
  if (!args.ok()) return FailUsage(args.status());
  if (args->help) {
    std::printf(
        "usage: spillway-plan TRACE|--synthetic NAME (--device-memory SIZE | "
        "--oversubscription X) -o FILE [--policy RULES] [--fewest-bytes] [--calibration FILE]\n");
    return 0;
  }
  std::string cost_warning;
  absl::StatusOr<CostModel> cost = CostModelFor(*args, &cost_warning);
  if (!cost.ok()) return Fail(cost.status());
  if (!cost_warning.empty()) {
    std::fprintf(stderr, "spillway plan: warning: %s\n", cost_warning.c_str());
  }
  if (args->output.empty()) return FailUsage(absl::InvalidArgumentError("-o FILE is required"));
  if (!args->trace.empty()) {
    if (absl::Status s = CheckOutputIsNotInput(args->output, args->trace, "the trace"); !s.ok()) {
      return Fail(s);
    }
  }
  if (!args->policy.empty()) {
    if (absl::Status s = CheckOutputIsNotInput(args->output, args->policy, "the --policy file");
        !s.ok()) {
      return Fail(s);
    }
  }
  std::string warning;
  absl::StatusOr<Workload> w = LoadWorkload(*args, &warning);
  if (!w.ok()) return Fail(w.status());
  if (!warning.empty()) std::fprintf(stderr, "spillway plan: warning: %s\n", warning.c_str());
  absl::StatusOr<uint64_t> budget = DeviceMemoryFor(*args, *w);
  if (!budget.ok()) return FailUsage(budget.status());
  PlanOptions options;
  options.sim.device_memory = *budget;
  options.sim.cost = *cost;
  options.time_aware_victims = !args->fewest_bytes;
  options.early_loads = !args->fewest_bytes;
  options.held_room = !args->fewest_bytes;
  options.keep_dead_data = !args->fewest_bytes;
  if (const std::string over = LargerThanDeviceWarning(*w, options.sim.capacity_bytes());
      !over.empty()) {
    std::fprintf(stderr, "spillway plan: warning: %s\n", over.c_str());
  }
  if (!args->policy.empty()) {
    absl::StatusOr<PolicyFile> rules = ReadPolicyFile(args->policy);
    if (!rules.ok()) return Fail(rules.status());
    options.rules = rules->rules;
  }
  PlanChoices choices;
  absl::StatusOr<PolicyFile> plan = PlanPolicy(*w, options, &choices);
  if (!plan.ok()) return Fail(plan.status());
  const std::string text = FormatPolicyFile(*plan);
  // Only a file the engine will read is written (a step so large that its plan passes the limits
  // on moves or rules, docs/policy.md, is said here, not when the job starts).
  if (absl::StatusOr<PolicyFile> back = ParsePolicyFile(text, args->output); !back.ok()) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        "the plan made is not a policy file the engine reads: ", back.status().message())));
  }
  if (absl::Status s = WriteFileAtomically(args->output, text); !s.ok()) {
    return Fail(s);
  }
  const SimResult predicted = SimulatePlanned(*w, *plan, options.sim);
  std::printf(
      "wrote %s: %zu schedule positions, %zu rules, budget %s; predicted %s moved, "
      "%.2f ms per step\n",
      args->output.c_str(), plan->schedule.size(), plan->rules.size(),
      FormatSize(plan->budget_bytes).c_str(), FormatSize(predicted.bytes_moved()).c_str(),
      predicted.step_seconds * 1e3);
  const std::string victims =
      choices.idle_horizon == 0
          ? "Belady's victims"
          : absl::StrCat("time-aware victims (horizon ", choices.idle_horizon, " launches)");
  const std::string held =
      choices.held_chunks == 0
          ? "no held room"
          : absl::StrCat(choices.held_chunks, " chunks held from launch ", choices.held_from);
  const std::string dead = choices.dead_weight < 0    ? "dead data sent out first"
                           : choices.dead_weight == 0 ? "dead data kept while anything else can go"
                                                      : "dead data ranked as used at its free";
  std::printf("planned with: %s; %s; %s; early loads at %zu launch%s; %llu launches simulated\n",
              victims.c_str(), dead.c_str(), held.c_str(), choices.early_launches,
              choices.early_launches == 1 ? "" : "es",
              static_cast<unsigned long long>(choices.searched_launches));
  return 0;
}

}  // namespace
}  // namespace spillway::policy

int main(int argc, char** argv) { return spillway::policy::Main(argc, argv); }
