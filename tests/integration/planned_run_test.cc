// The engine following a planned policy file on simgpu (SPILLWAY_POLICY): the small training step
// of planned_step_program.cc is described as a policy::Workload here, planned at half its peak
// memory, and run under the shim with that file. The run gives the same checksum as the job on a
// big device without spillway, follows every step after the first (exit summary:
// engine.policy_file), and what simgpu really moved per followed step (prefetches, demand faults,
// evictions: the difference between a 6-step and a 3-step run, over 3) is the simulator's
// prediction for the same workload and file within 5%. A file for another job, and a malformed
// one, leave the job to the learned policy with one log line and the same checksum.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "policy/planner/planner.h"
#include "policy/planner/simulator.h"
#include "policy/planner/trace_workload.h"
#include "tests/integration/subprocess.h"

namespace spillway::testing {
namespace {

using policy::ChunkRange;
using policy::StepEvent;
using policy::Workload;

const std::string kOut = SPILLWAY_TEST_OUT_DIR;
constexpr uint64_t kMiB = 1ull << 20;
constexpr int kLayers = 6;
constexpr uint64_t kTensor = 2 * kMiB;
constexpr uint64_t kBudget = 20 * kMiB;  // the step's peak is 40 MiB: 2x oversubscribed
const char kSimgpuMemory[] = "24MiB";    // a little above the budget: the engine's margin

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name + "." + std::to_string(::getpid());
}

std::string Checksum(const std::string& output) {
  const size_t at = output.rfind("checksum 0x");
  return at == std::string::npos ? "" : output.substr(at, 11 + 16);
}

// planned_step_program's step, as the engine sees it (allocation order, parameter order).
Workload ProgramWorkload() {
  Workload w;
  w.name = "planned-step";
  auto add = [&w](bool persistent) {
    policy::WorkloadAllocation a;
    a.id = w.allocations.size() + 1;
    a.bytes = kTensor;
    a.persistent = persistent;
    w.allocations.push_back(a);
    return a.id;
  };
  std::vector<uint64_t> weights, grads;
  for (int l = 0; l < kLayers; ++l) weights.push_back(add(true));
  for (int l = 0; l < kLayers; ++l) grads.push_back(add(true));
  auto event = [&w](StepEvent::Kind kind, uint64_t id) {
    StepEvent e;
    e.kind = kind;
    e.alloc_id = id;
    w.step.push_back(e);
  };
  auto alloc = [&](bool) {
    const uint64_t id = add(false);
    event(StepEvent::Kind::kAlloc, id);
    return id;
  };
  // Compute times as simgpu's train kernels charge them (examples/kernels/train_kernels_host.cc).
  auto launch = [&w](const char* kernel, double seconds, std::vector<uint64_t> ids) {
    StepEvent e;
    e.launch.kernel = kernel;
    e.launch.compute_seconds = seconds;
    for (const uint64_t id : ids) e.launch.accesses.push_back(ChunkRange{id, 0, 1});
    w.step.push_back(e);
  };
  const double layer = static_cast<double>(kTensor) / 45e9, device = kTensor / 2e12;
  std::vector<uint64_t> act(kLayers + 1);
  act[0] = alloc(false);
  launch("tl_fill", device, {act[0]});
  for (int l = 0; l < kLayers; ++l) {
    act[l + 1] = alloc(false);
    launch("tl_forward", layer, {act[l], weights[l], act[l + 1]});
  }
  uint64_t delta = alloc(false);
  launch("tl_loss", 2 * device, {act[kLayers], delta});
  event(StepEvent::Kind::kFree, act[kLayers]);
  for (int l = kLayers; l-- > 0;) {
    const uint64_t out = alloc(false);
    launch("tl_backward", 2 * layer, {act[l], weights[l], delta, out, grads[l]});
    event(StepEvent::Kind::kFree, act[l]);
    event(StepEvent::Kind::kFree, delta);
    delta = out;
  }
  event(StepEvent::Kind::kFree, delta);
  return w;
}

struct JobRun {
  ProcessResult result;
  std::string summary, stats;
};

JobRun RunProgram(int steps, const std::map<std::string, std::string>& extra_env, bool shim,
                  bool constrained = true) {
  const std::string summary = TempPath("planned_summary.json");
  const std::string stats = TempPath("planned_stats.json");
  std::map<std::string, std::string> env = {{"LD_LIBRARY_PATH", kOut + "/simgpu"},
                                            {"SIMGPU_STATS", stats}};
  if (shim) {
    env["LD_PRELOAD"] = kOut + "/libspillway.so";
    env["SPILLWAY_SUMMARY"] = summary;
    env["SPILLWAY_DEVICE_MEMORY"] = std::to_string(kBudget);
    env["SIMGPU_MEMORY"] = constrained ? kSimgpuMemory : "1GiB";
  } else {
    env["SIMGPU_MEMORY"] = "1GiB";
  }
  for (const auto& [k, v] : extra_env) env[k] = v;
  JobRun run;
  run.result = RunProcess({kOut + "/planned_step_program", std::to_string(kLayers),
                           std::to_string(steps), std::to_string(kTensor)},
                          env);
  run.summary = ReadFile(summary);
  run.stats = ReadFile(stats);
  std::remove(summary.c_str());
  std::remove(stats.c_str());
  return run;
}

// Bytes simgpu moved over the link: prefetched, demand-faulted, evicted.
// Bytes simgpu copied over the link: prefetches, faults and write-backs, less the chunks it made
// resident without a copy because they held no data (zero-filled, as real UVM does).
long long Moved(const JobRun& run) {
  return JsonInt(run.stats, "prefetched_bytes") + JsonInt(run.stats, "bytes", "demand_faults") +
         JsonInt(run.stats, "evicted_bytes") - JsonInt(run.stats, "zero_filled_bytes");
}

// The planner's options at the tests' budget, for the schedule alone (host placement is tested
// with hand-written rules).
policy::PlanOptions BudgetOptions() {
  policy::PlanOptions options;
  options.sim.device_memory = kBudget;
  options.place_on_host = false;
  return options;
}

// Records `planned_step_program` (3 steps, SPILLWAY_MODE=record, on an unconstrained device) to a
// trace named `name` and reads the workload back from it.
void RecordWorkload(const std::string& name, Workload* out) {
  const std::string trace = TempPath(name);
  const JobRun recorded =
      RunProgram(3, {{"SPILLWAY_MODE", "record"}, {"SPILLWAY_TRACE", trace}}, true, false);
  ASSERT_EQ(recorded.result.exit_code, 0) << recorded.result.output;
  absl::StatusOr<Workload> from_trace = policy::WorkloadFromTrace(trace);
  std::remove(trace.c_str());
  ASSERT_TRUE(from_trace.ok()) << from_trace.status();
  *out = *std::move(from_trace);
}

class PlannedRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    workload_ = ProgramWorkload();
    ASSERT_TRUE(policy::ValidateWorkload(workload_).ok());
    absl::StatusOr<policy::PolicyFile> plan = policy::PlanPolicy(workload_, BudgetOptions());
    ASSERT_TRUE(plan.ok()) << plan.status();
    plan_ = *plan;
    path_ = TempPath("planned.policy.toml");
    std::ofstream(path_) << policy::FormatPolicyFile(plan_);
  }
  void TearDown() override { std::remove(path_.c_str()); }

  Workload workload_;
  policy::PolicyFile plan_;
  std::string path_;
};

TEST_F(PlannedRunTest, SameResultsAndTheSimulatorsBytes) {
  std::map<int, JobRun> runs;
  for (const int steps : {3, 6}) {
    const JobRun reference = RunProgram(steps, {}, false);
    ASSERT_EQ(reference.result.exit_code, 0) << reference.result.output;
    const JobRun run = RunProgram(steps, {{"SPILLWAY_POLICY", path_}}, true);
    ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
    EXPECT_FALSE(Checksum(run.result.output).empty()) << run.result.output;
    EXPECT_EQ(Checksum(run.result.output), Checksum(reference.result.output));
    EXPECT_NE(run.summary.find("\"policy\":\"planned\""), std::string::npos) << run.summary;
    EXPECT_NE(run.summary.find("\"errors\":[]"), std::string::npos) << run.summary;
    // Recognised at the end of the first step; every later step followed to its end.
    EXPECT_NE(run.summary.find("\"aligned\":true"), std::string::npos) << run.summary;
    EXPECT_EQ(JsonInt(run.summary, "steps_followed", "policy_file"), steps - 1) << run.summary;
    EXPECT_EQ(JsonInt(run.summary, "positions_followed", "policy_file"),
              (steps - 1) * static_cast<long long>(workload_.num_launches()));
    EXPECT_EQ(JsonInt(run.summary, "moves_issued", "policy_file"),
              JsonInt(run.summary, "moves_planned", "policy_file"));
    EXPECT_EQ(JsonInt(run.summary, "mismatches", "policy_file"), 0);
    runs[steps] = run;
  }
  policy::SimOptions options;
  options.device_memory = kBudget;
  const policy::SimResult predicted = policy::SimulatePlanned(workload_, plan_, options);
  const double per_step = static_cast<double>(Moved(runs[6]) - Moved(runs[3])) / 3;
  const double expected = static_cast<double>(predicted.h2d_bytes + predicted.d2h_bytes);
  ASSERT_GT(expected, 0);
  EXPECT_NEAR(per_step / expected, 1.0, 0.05)
      << "simgpu moved " << per_step << " bytes per followed step, the simulator predicts "
      << expected << "\n"
      << runs[6].stats;
  std::printf("planned step: simgpu %.0f bytes per step, simulator %.0f (ratio %.3f)\n", per_step,
              expected, per_step / expected);
  // And its time: simgpu's virtual clock per followed step against the simulator's step.
  auto seconds = [](const JobRun& run) {
    const std::string key = "\"virtual_seconds\":";
    const size_t at = run.stats.find(key);
    return at == std::string::npos ? -1.0
                                   : std::strtod(run.stats.c_str() + at + key.size(), nullptr);
  };
  const double step_seconds = (seconds(runs[6]) - seconds(runs[3])) / 3;
  ASSERT_GT(predicted.step_seconds, 0);
  std::printf("planned step: simgpu %.1f us per step, simulator %.1f (ratio %.3f)\n",
              step_seconds * 1e6, predicted.step_seconds * 1e6,
              step_seconds / predicted.step_seconds);
  EXPECT_NEAR(step_seconds / predicted.step_seconds, 1.0, 0.10) << runs[6].stats;
}

TEST_F(PlannedRunTest, FallbacksGiveOneLineAndTheLearnedPolicy) {
  const JobRun reference = RunProgram(3, {}, false);
  ASSERT_EQ(reference.result.exit_code, 0) << reference.result.output;
  // Another job's policy (a different tensor size), a malformed file, a missing file.
  policy::PolicyFile other = plan_;
  other.step_signature ^= 1;
  const std::string other_path = TempPath("other.policy.toml");
  std::ofstream(other_path) << policy::FormatPolicyFile(other);
  const std::string bad_path = TempPath("bad.policy.toml");
  std::ofstream(bad_path) << "version = 1\n[budget]\ndevice_memory = \"20MiB\"\n[[rule]]\n"
                             "action = \"pin\"\n";
  // Input that once crashed or hung the job: arrays nested deeper than a stack holds, a step
  // count that would size 32 GiB, a device that never ends.
  const std::string deep_path = TempPath("deep.policy.toml");
  std::ofstream(deep_path) << "version = 1\nx = " << std::string(100000, '[')
                           << std::string(100000, ']') << "\n";
  policy::PolicyFile long_step = plan_;
  long_step.step_events = 4000000000;
  const std::string long_text = policy::FormatPolicyFile(long_step);
  const std::string long_path = TempPath("long.policy.toml");
  std::ofstream(long_path) << long_text;
  const auto long_line =
      1 + std::count(long_text.begin(), long_text.begin() + long_text.find("step_events"), '\n');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {other_path, ""},  // never recognised: said once after enough events (not in 3 steps)
      {bad_path, bad_path + ":5: 'rule.action' is \"pin\"; it must be keep, host, swap or never"},
      {"/nonexistent.policy.toml", "/nonexistent.policy.toml: cannot open the policy file"},
      {deep_path, deep_path +
                      ":2: Error while parsing value: exceeded maximum nested value depth of "
                      "256 (TOML_MAX_NESTED_VALUES)"},
      {long_path, absl::StrCat(long_path, ":", long_line,
                               ": 'model.step_events' 4000000000 is more than the engine follows "
                               "(4194304 events per step)")},
      {"/dev/zero", "/dev/zero: not a regular file (a policy file is a TOML text file)"}};
  for (const auto& [path, line] : cases) {
    SCOPED_TRACE(path);
    const JobRun run = RunProgram(3, {{"SPILLWAY_POLICY", path}}, true);
    ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
    EXPECT_EQ(Checksum(run.result.output), Checksum(reference.result.output));
    EXPECT_NE(run.summary.find("\"aligned\":false"), std::string::npos) << run.summary;
    EXPECT_EQ(JsonInt(run.summary, "positions_followed", "policy_file"), 0) << run.summary;
    if (line.empty()) {
      EXPECT_NE(run.summary.find("\"policy\":\"planned\""), std::string::npos) << run.summary;
      continue;
    }
    EXPECT_NE(run.summary.find("\"policy\":\"learned\""), std::string::npos) << run.summary;
    EXPECT_NE(run.result.output.find("SPILLWAY_POLICY: " + line), std::string::npos)
        << run.result.output;
    // One line, also listed in the summary's errors.
    size_t count = 0;
    for (size_t at = run.result.output.find("SPILLWAY_POLICY"); at != std::string::npos;
         at = run.result.output.find("SPILLWAY_POLICY", at + 1)) {
      ++count;
    }
    EXPECT_EQ(count, 1u) << run.result.output;
  }
  std::remove(other_path.c_str());
  std::remove(bad_path.c_str());
  std::remove(deep_path.c_str());
  std::remove(long_path.c_str());
}

// From a recorded trace (SPILLWAY_MODE=record) instead of a hand-written model: the workload
// read from the trace is the same step, and the engine follows the policy planned from it with
// the simulator's bytes.
TEST_F(PlannedRunTest, PolicyPlannedFromARecordedTraceIsFollowed) {
  Workload from_trace;
  ASSERT_NO_FATAL_FAILURE(RecordWorkload("planned_step.trace", &from_trace));
  EXPECT_EQ(from_trace.allocations.size(), workload_.allocations.size());
  EXPECT_EQ(from_trace.step.size(), workload_.step.size());
  absl::StatusOr<policy::PolicyFile> plan = policy::PlanPolicy(from_trace, BudgetOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->step_signature, plan_.step_signature);  // the engine sees the same step
  std::ofstream(path_) << policy::FormatPolicyFile(*plan);
  std::map<int, JobRun> runs;
  for (const int steps : {3, 6}) {
    runs[steps] = RunProgram(steps, {{"SPILLWAY_POLICY", path_}}, true);
    ASSERT_EQ(runs[steps].result.exit_code, 0) << runs[steps].result.output;
    EXPECT_EQ(JsonInt(runs[steps].summary, "steps_followed", "policy_file"), steps - 1)
        << runs[steps].summary;
  }
  EXPECT_EQ(Checksum(runs[3].result.output), Checksum(RunProgram(3, {}, false).result.output));
  policy::SimOptions sim;
  sim.device_memory = kBudget;
  const policy::SimResult predicted = policy::SimulatePlanned(from_trace, *plan, sim);
  const double per_step = static_cast<double>(Moved(runs[6]) - Moved(runs[3])) / 3;
  EXPECT_NEAR(per_step / static_cast<double>(predicted.h2d_bytes + predicted.d2h_bytes), 1.0, 0.05);
}

// Rules by call site and module (docs/policy.md) match in a run: the shim names each allocation's
// stack as the recorded trace does. A host rule naming the call site of the first allocation in
// the trace places every allocation the trace made there, and only those; a rule naming the
// program's own module (its file name) and the first allocation's order places that one; one
// naming a module on no stack places none. The checksum is the run's without spillway.
TEST_F(PlannedRunTest, RulesByCallSiteAndModuleMatchTheRecordedTrace) {
  Workload from_trace;
  ASSERT_NO_FATAL_FAILURE(RecordWorkload("sites_step.trace", &from_trace));
  const policy::WorkloadAllocation& first = from_trace.allocations.front();
  ASSERT_FALSE(first.call_site.empty()) << "the recorder took no stacks";
  ASSERT_FALSE(first.modules.empty());
  const long long at_site =
      std::count_if(from_trace.allocations.begin(), from_trace.allocations.end(),
                    [&first](const policy::WorkloadAllocation& a) {
                      return a.persistent && a.call_site == first.call_site;
                    });
  ASSERT_GT(at_site, 0);
  ASSERT_LT(at_site, static_cast<long long>(from_trace.allocations.size()));
  policy::PolicyRule by_site, by_module, by_missing_module;
  by_site.call_site = first.call_site;
  by_module.module = "planned_step_program";
  by_module.first_order = by_module.last_order = 1;
  by_missing_module.module = "libmissing.so";
  const std::string reference = Checksum(RunProgram(3, {}, false).result.output);
  for (const auto& [rule, placed] : {std::pair{by_site, at_site}, std::pair{by_module, 1LL},
                                     std::pair{by_missing_module, 0LL}}) {
    policy::PlanOptions options = BudgetOptions();
    options.rules.push_back(rule);
    options.rules.back().action = policy::RuleAction::kHost;
    absl::StatusOr<policy::PolicyFile> plan = policy::PlanPolicy(from_trace, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    std::ofstream(path_) << policy::FormatPolicyFile(*plan);
    const JobRun run = RunProgram(3, {{"SPILLWAY_POLICY", path_}}, true);
    ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
    EXPECT_EQ(Checksum(run.result.output), reference);
    EXPECT_NE(run.summary.find("\"errors\":[]"), std::string::npos) << run.summary;
    EXPECT_EQ(JsonInt(run.summary, "host_placements", "policy_file"), placed)
        << rule.call_site << rule.module << "\n"
        << run.summary;
    EXPECT_EQ(JsonInt(run.summary, "host_bytes", "policy_file"),
              placed * static_cast<long long>(first.bytes));
    EXPECT_EQ(JsonInt(run.stats, "remote_mapped_bytes") > 0, placed > 0) << run.stats;
    // The simulator prices the same placements from the trace.
    policy::SimOptions sim;
    sim.device_memory = kBudget;
    EXPECT_EQ(policy::SimulatePlanned(from_trace, *plan, sim).remote_bytes > 0, placed > 0);
  }
}

// A host rule (docs/policy.md): the first layer's weights placed on the host, the rest planned
// around them. The run gives the same checksum; from the step the weights are numbered in (the
// second) on, simgpu maps them remotely at every use and never brings them in
// (remote_mapped_bytes per step is the simulator's remote traffic, read and write counted once);
// the bytes moved per followed step are the simulator's within 5%.
TEST_F(PlannedRunTest, HostRuleIsExecutedAsTheSimulatorPricesIt) {
  policy::PlanOptions options = BudgetOptions();
  policy::PolicyRule host;
  host.first_order = host.last_order = 1;  // weights[0]
  host.action = policy::RuleAction::kHost;
  options.rules.push_back(host);
  absl::StatusOr<policy::PolicyFile> plan = policy::PlanPolicy(workload_, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::ofstream(path_) << policy::FormatPolicyFile(*plan);
  std::map<int, JobRun> runs;
  for (const int steps : {3, 6}) {
    const JobRun reference = RunProgram(steps, {}, false);
    ASSERT_EQ(reference.result.exit_code, 0) << reference.result.output;
    runs[steps] = RunProgram(steps, {{"SPILLWAY_POLICY", path_}}, true);
    const JobRun& run = runs[steps];
    ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
    EXPECT_FALSE(Checksum(run.result.output).empty()) << run.result.output;
    EXPECT_EQ(Checksum(run.result.output), Checksum(reference.result.output));
    EXPECT_NE(run.summary.find("\"errors\":[]"), std::string::npos) << run.summary;
    EXPECT_EQ(JsonInt(run.summary, "steps_followed", "policy_file"), steps - 1) << run.summary;
    EXPECT_EQ(JsonInt(run.summary, "host_placements", "policy_file"), 1) << run.summary;
    EXPECT_EQ(JsonInt(run.summary, "host_bytes", "policy_file"), static_cast<long long>(kTensor));
    EXPECT_EQ(JsonInt(run.summary, "host_failures", "policy_file"), 0);
    EXPECT_GT(JsonInt(run.stats, "remote_mapped_bytes"), 0) << run.stats;
  }
  policy::SimOptions sim;
  sim.device_memory = kBudget;
  const policy::SimResult predicted = policy::SimulatePlanned(workload_, *plan, sim);
  ASSERT_GT(predicted.remote_bytes, 0u);
  // Remote: the weights' chunk at each of its two uses per step, never resident in between.
  const long long remote = (JsonInt(runs[6].stats, "remote_mapped_bytes") -
                            JsonInt(runs[3].stats, "remote_mapped_bytes")) /
                           3;
  EXPECT_EQ(2 * remote, static_cast<long long>(predicted.remote_bytes)) << runs[6].stats;
  const double moved = static_cast<double>(Moved(runs[6]) - Moved(runs[3])) / 3;
  const double expected = static_cast<double>(predicted.h2d_bytes + predicted.d2h_bytes);
  ASSERT_GT(expected, 0);
  EXPECT_NEAR(moved / expected, 1.0, 0.05) << runs[6].stats;
  const double total = moved + 2.0 * static_cast<double>(remote);
  EXPECT_NEAR(total / static_cast<double>(predicted.bytes_moved()), 1.0, 0.05);
  std::printf(
      "host rule: simgpu %.0f bytes moved + %lld remote per step, simulator %llu + %llu "
      "(ratio %.3f)\n",
      moved, 2 * remote, static_cast<unsigned long long>(predicted.h2d_bytes + predicted.d2h_bytes),
      static_cast<unsigned long long>(predicted.remote_bytes),
      total / static_cast<double>(predicted.bytes_moved()));
}

// Early loads and held room (policy/planner/planner.h) on a recorded step where Belady's schedule
// waits for room: train_like, 8 layers, recorded on a big device and planned at 124 MiB (about 2x).
// Early loads make the simulated step at least 1% faster than Belady's victims alone, and held room
// (searched alongside) 1% faster again, in the schedule's model and with the engine following
// the plan, within 10% of the chunk-level bound's bytes and with no demand faults; and a run
// following the plan gives the checksum of the run without spillway and moves the bytes the
// simulator predicts, within 5%.
TEST(PlannedRun, EarlyLoadsAndHeldRoomShortenTheRecordedTrainLikeStep) {
  const std::string trace = TempPath("train_like8.trace");
  const std::vector<std::string> job = {
      kOut + "/train_like", "--oversubscription", "2", "--memory", "128MiB", "--layers", "8"};
  std::vector<std::string> record = job;
  record.insert(record.end(), {"--steps", "4"});
  const ProcessResult recorded = RunProcess(record, {{"LD_LIBRARY_PATH", kOut + "/simgpu"},
                                                     {"SIMGPU_MEMORY", "64GiB"},
                                                     {"LD_PRELOAD", kOut + "/libspillway.so"},
                                                     {"SPILLWAY_DEVICE_MEMORY", "64GiB"},
                                                     {"SPILLWAY_MODE", "record"},
                                                     {"SPILLWAY_TRACE", trace}});
  ASSERT_EQ(recorded.exit_code, 0) << recorded.output;
  absl::StatusOr<Workload> w = policy::WorkloadFromTrace(trace);
  std::remove(trace.c_str());
  ASSERT_TRUE(w.ok()) << w.status();
  policy::PlanOptions options;
  options.sim.device_memory = 124 * kMiB;
  options.early_loads = false;
  options.held_room = false;
  absl::StatusOr<policy::PolicyFile> plain = policy::PlanPolicy(*w, options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  options.early_loads = true;
  policy::PlanChoices early_choices;
  absl::StatusOr<policy::PolicyFile> early = policy::PlanPolicy(*w, options, &early_choices);
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_GT(early_choices.early_launches, 0u);
  EXPECT_EQ(early_choices.held_chunks, 0u);
  options.held_room = true;
  policy::PlanChoices choices;
  absl::StatusOr<policy::PolicyFile> with = policy::PlanPolicy(*w, options, &choices);
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_GT(choices.held_chunks, 0u);
  const policy::SimResult before = policy::SimulatePlanned(*w, *plain, options.sim);
  const policy::SimResult middle = policy::SimulatePlanned(*w, *early, options.sim);
  const policy::SimResult after = policy::SimulatePlanned(*w, *with, options.sim);
  const policy::SimResult bound = policy::ChunkLowerBound(*w, options.sim);
  EXPECT_LT(middle.step_seconds, 0.99 * before.step_seconds);
  EXPECT_LT(after.step_seconds, 0.99 * middle.step_seconds);
  EXPECT_LE(static_cast<double>(after.bytes_moved()), 1.1 * bound.bytes_moved());
  EXPECT_EQ(after.demand_faults, 0u);
  auto engine = [&](const policy::PolicyFile& plan) {
    return policy::SimulateEngineFollowing(*w, plan, options.sim).step_seconds;
  };
  EXPECT_LT(engine(*early), 0.99 * engine(*plain));
  EXPECT_LT(engine(*with), 0.99 * engine(*early));
  std::printf(
      "train_like 8 layers at 124 MiB: planned %.3f ms -> %.3f ms with early loads -> %.3f ms with "
      "held "
      "room too (%llu -> %llu -> %llu bytes; bound %.3f ms, %llu bytes)\n",
      before.step_seconds * 1e3, middle.step_seconds * 1e3, after.step_seconds * 1e3,
      static_cast<unsigned long long>(before.bytes_moved()),
      static_cast<unsigned long long>(middle.bytes_moved()),
      static_cast<unsigned long long>(after.bytes_moved()), bound.step_seconds * 1e3,
      static_cast<unsigned long long>(bound.bytes_moved()));

  const std::string plan_path = TempPath("train_like8.policy.toml");
  std::ofstream(plan_path) << policy::FormatPolicyFile(*with);
  std::map<int, JobRun> runs;
  for (const int steps : {3, 6}) {
    std::vector<std::string> argv = job;
    argv.insert(argv.end(), {"--steps", std::to_string(steps)});
    const std::string stats = TempPath("train_like8_stats.json");
    const std::string summary = TempPath("train_like8_summary.json");
    const ProcessResult reference =
        RunProcess(argv, {{"LD_LIBRARY_PATH", kOut + "/simgpu"}, {"SIMGPU_MEMORY", "1GiB"}});
    ASSERT_EQ(reference.exit_code, 0) << reference.output;
    JobRun& run = runs[steps];
    run.result = RunProcess(argv, {{"LD_LIBRARY_PATH", kOut + "/simgpu"},
                                   {"SIMGPU_MEMORY", "136MiB"},
                                   {"SIMGPU_STATS", stats},
                                   {"LD_PRELOAD", kOut + "/libspillway.so"},
                                   {"SPILLWAY_DEVICE_MEMORY", "124MiB"},
                                   {"SPILLWAY_SUMMARY", summary},
                                   {"SPILLWAY_POLICY", plan_path}});
    run.stats = ReadFile(stats);
    run.summary = ReadFile(summary);
    std::remove(stats.c_str());
    std::remove(summary.c_str());
    ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
    EXPECT_FALSE(Checksum(run.result.output).empty()) << run.result.output;
    EXPECT_EQ(Checksum(run.result.output), Checksum(reference.output));
    EXPECT_GE(JsonInt(run.summary, "steps_followed", "policy_file"), steps - 2) << run.summary;
  }
  std::remove(plan_path.c_str());
  const double moved = static_cast<double>(Moved(runs[6]) - Moved(runs[3])) / 3;
  EXPECT_NEAR(moved / static_cast<double>(after.h2d_bytes + after.d2h_bytes), 1.0, 0.05)
      << runs[6].stats;
}

}  // namespace
}  // namespace spillway::testing
