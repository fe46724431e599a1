// Policy files: round trips (hand-written and planner output), every error message for bad
// files, and the check that a policy belongs to a workload.
#include "policy/plan/policy_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "policy/planner/planner.h"
#include "policy/planner/synthetic_workloads.h"

namespace spillway::policy {
namespace {

constexpr char kExample[] = R"(# a hand-edited policy
version = 1

[model]
name = "gpt2-medium"
fingerprint = "0123456789abcdef"
launches = 12
allocations = 40

[budget]
device_memory = "8GiB"

[[rule]]              # optimizer state lives on the host, read remotely
call_site = "9c1d2e3f4a5b6c7d"
action = "host"

[[rule]]
module = "libnccl.so.2"
action = "never"

[[rule]]
min_size = "1MiB"
max_size = 4194304
order = [3, 7]
action = "keep"

[[rule]]
order = 9
action = "swap"

[[step]]
position = 0
prefetch = ["5:0-3", "6:2"]
populate = ["7:0"]

[[step]]
position = 4
evict = ["5:0-1"]
discard = ["8:0-15",
           "9:1"]
)";

TEST(PolicyFile, ParsesAnAnnotatedExample) {
  absl::StatusOr<PolicyFile> p = ParsePolicyFile(kExample, "ex.toml");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->model, "gpt2-medium");
  EXPECT_EQ(p->fingerprint, 0x0123456789abcdefull);
  EXPECT_EQ(p->launches, 12u);
  EXPECT_EQ(p->allocations, 40u);
  EXPECT_EQ(p->budget_bytes, uint64_t{8} << 30);
  ASSERT_EQ(p->rules.size(), 4u);
  EXPECT_EQ(p->rules[0].call_site, "9c1d2e3f4a5b6c7d");
  EXPECT_EQ(p->rules[0].action, RuleAction::kHost);
  EXPECT_EQ(p->rules[0].line, 13);
  EXPECT_EQ(p->rules[1].action, RuleAction::kNever);
  EXPECT_EQ(p->rules[2].min_bytes, uint64_t{1} << 20);
  EXPECT_EQ(p->rules[2].max_bytes, 4194304u);
  EXPECT_EQ(p->rules[2].first_order, 3u);
  EXPECT_EQ(p->rules[2].last_order, 7u);
  EXPECT_EQ(p->rules[3].first_order, 9u);
  EXPECT_EQ(p->rules[3].last_order, 9u);
  ASSERT_EQ(p->schedule.size(), 2u);
  EXPECT_EQ(p->schedule[0].prefetch[0], (ChunkRange{5, 0, 4}));
  EXPECT_EQ(p->schedule[0].prefetch[1], (ChunkRange{6, 2, 1}));
  EXPECT_EQ(p->schedule[0].populate[0], (ChunkRange{7, 0, 1}));
  EXPECT_EQ(p->schedule[1].position, 4u);
  EXPECT_EQ(p->schedule[1].discard[0], (ChunkRange{8, 0, 16}));
}

TEST(PolicyFile, HandWrittenRoundTrips) {
  absl::StatusOr<PolicyFile> p = ParsePolicyFile(kExample, "ex.toml");
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string written = FormatPolicyFile(*p);
  absl::StatusOr<PolicyFile> again = ParsePolicyFile(written, "written.toml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << written;
  EXPECT_TRUE(*again == *p) << written;
  EXPECT_EQ(FormatPolicyFile(*again), written);
}

TEST(PolicyFile, PlannerOutputRoundTrips) {
  absl::StatusOr<Workload> w = MakeSyntheticWorkload("transformer-small");
  ASSERT_TRUE(w.ok());
  PlanOptions options;
  options.sim.device_memory = w->peak_live_bytes() / 2;
  absl::StatusOr<PolicyFile> plan = PlanPolicy(*w, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_FALSE(plan->schedule.empty());
  absl::StatusOr<PolicyFile> again = ParsePolicyFile(FormatPolicyFile(*plan), "plan.toml");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(*again == *plan);
  EXPECT_TRUE(CheckPolicyMatches(*again, "again.toml", *w).ok());
}

// Two persistent allocations (1: chunks 0 and 1; 2: chunks 0 to 4) and a step-local one (3).
PolicyFile StartTestSchedule() {
  PolicyFile p;
  p.persistent = 2;
  ScheduleEntry at1;
  at1.position = 1;
  at1.evict = {{1, 0, 1}};
  at1.prefetch = {{2, 0, 2}, {1, 1, 1}};
  ScheduleEntry at3;
  at3.position = 3;
  at3.prefetch = {{1, 0, 1}, {3, 0, 1}};
  at3.evict = {{2, 0, 1}};
  at3.populate = {{2, 3, 1}};
  p.schedule = {at1, at3};
  return p;
}

// What the plan has off the device when its step begins: the persistent chunks whose first move
// in the step brings them in; a chunk first sent out is on the device then, and step-local
// allocations do not exist yet.
TEST(PolicyFile, OffDeviceAtStepStartIsWhatTheStepFirstBringsIn) {
  PolicyFile p = StartTestSchedule();
  const std::vector<ChunkRange> want = {{1, 1, 1}, {2, 0, 2}, {2, 3, 1}};
  EXPECT_EQ(OffDeviceAtStepStart(p), want);
  p.schedule.clear();
  EXPECT_TRUE(OffDeviceAtStepStart(p).empty());
}

// The complement within the persistent allocations' chunks: what the schedule never moves or first
// sends out. Allocations past `persistent`, or past the sizes given, have none.
TEST(PolicyFile, OnDeviceAtStepStartIsEveryOtherPersistentChunk) {
  PolicyFile p = StartTestSchedule();
  constexpr uint64_t kMiB = 1 << 20;
  // Allocation 2's last chunk is partial.
  const std::vector<ChunkRange> want = {{1, 0, 1}, {2, 2, 1}, {2, 4, 1}};
  EXPECT_EQ(OnDeviceAtStepStart(p, {4 * kMiB, 8 * kMiB + 1024, 2 * kMiB}), want);
  const std::vector<ChunkRange> first_only = {{1, 0, 1}};
  EXPECT_EQ(OnDeviceAtStepStart(p, {4 * kMiB}), first_only);
  p.schedule.clear();
  const std::vector<ChunkRange> all = {{1, 0, 2}, {2, 0, 5}};
  EXPECT_EQ(OnDeviceAtStepStart(p, {4 * kMiB, 8 * kMiB + 1024}), all);
}

TEST(PolicyFile, RulesMatchFirstWins) {
  absl::StatusOr<PolicyFile> p = ParsePolicyFile(kExample, "ex.toml");
  ASSERT_TRUE(p.ok());
  WorkloadAllocation a;
  a.id = 5;
  a.bytes = 2 << 20;
  a.call_site = "9c1d2e3f4a5b6c7d";
  EXPECT_EQ(p->ActionFor(a), RuleAction::kHost);
  a.call_site = "other";
  EXPECT_EQ(p->ActionFor(a), RuleAction::kKeep);  // order 3..7, 1-4 MiB
  a.bytes = 8 << 20;
  EXPECT_EQ(p->ActionFor(a), RuleAction::kSwap);  // too big for the keep rule
  // A module rule matches any module on the stack, by file name or full path, not a part of one.
  a.modules = {"/usr/lib/libcudart.so.12", "/opt/nccl/lib/libnccl.so.2"};
  EXPECT_EQ(p->ActionFor(a), RuleAction::kNever);
  a.modules = {"libnccl.so.2"};
  EXPECT_EQ(p->ActionFor(a), RuleAction::kNever);
  a.modules = {"/opt/nccl/lib/libnccl.so.2.19"};
  EXPECT_EQ(p->ActionFor(a), RuleAction::kSwap);
  EXPECT_TRUE(p->NamesCallSites());
  PolicyFile by_size;
  PolicyRule keep;
  keep.min_bytes = 1;
  keep.action = RuleAction::kKeep;
  by_size.rules.push_back(keep);
  EXPECT_FALSE(by_size.NamesCallSites());
}

struct BadCase {
  std::string text;
  std::string message;
};

std::string Head(const std::string& rest) {
  return "version = 1\n[budget]\ndevice_memory = \"1GiB\"\n" + rest;  // 3 lines
}

constexpr char kBadCallSite[] =
    "p.toml:5: 'rule.call_site' must be 16 lowercase hex digits (a call-site id as "
    "spillway-inspect prints it)";

TEST(PolicyFile, EveryErrorNamesFileLineAndProblem) {
  const BadCase cases[] = {
      {"[budget]\ndevice_memory = 1\n",
       "p.toml:1: missing key 'version' (this format is version 1)"},
      {"version = 2\n", "p.toml:1: 'version' must be 1 (the only version this spillway reads)"},
      {"version = \"1\"\n", "p.toml:1: 'version' must be 1 (the only version this spillway reads)"},
      {"version = 1\nversio = 1\n", "p.toml:2: unknown key 'versio' (known: version)"},
      {"version = 1\n", "p.toml:1: missing table [budget] (the device memory it was planned for)"},
      {"version = 1\n[budget]\n", "p.toml:2: missing key 'budget.device_memory'"},
      {"version = 1\n[budget]\ndevice_memory = \"1XB\"\n",
       "p.toml:3: 'budget.device_memory': unknown unit 'XB' in '1XB' (use B, KiB, MiB, GiB, TiB, "
       "PiB, KB, MB, GB, TB, PB)"},
      {"version = 1\n[budget]\ndevice_memory = true\n",
       "p.toml:3: 'budget.device_memory' must be a size (\"8GiB\" or bytes)"},
      {"version = 1\n[budget]\ndevice_memory = -5\n",
       "p.toml:3: 'budget.device_memory' must not be negative"},
      {"version = 1\n[budget]\ndevice_memory = 1\nsize = 2\n",
       "p.toml:4: unknown key 'budget.size' (known: device_memory)"},
      {Head("[model]\nnme = \"x\"\n"),
       "p.toml:5: unknown key 'model.nme' (known: name, fingerprint, launches, allocations, "
       "step_signature, step_events, persistent)"},
      {Head("[model]\nstep_signature = \"12\"\n"),
       "p.toml:5: 'model.step_signature' must be 16 lowercase hex digits"},
      {Head("[model]\nstep_signature = \"0123456789abcdef\"\n"),
       "p.toml:5: 'model.step_signature' needs 'model.step_events' (events per step)"},
      {Head("[model]\npersistent = -2\n"), "p.toml:5: 'model.persistent' must not be negative"},
      // The engine keeps a token per event of the step: the count is bounded before anything is
      // sized by it, absolutely and by what the step's launches and allocations can make.
      {Head("[model]\nstep_events = 4000000000\n"),
       "p.toml:5: 'model.step_events' 4000000000 is more than the engine follows (4194304 events "
       "per step)"},
      {Head("[model]\nstep_events = 4194305\n"),
       "p.toml:5: 'model.step_events' 4194305 is more than the engine follows (4194304 events "
       "per step)"},
      {Head("[model]\nlaunches = 26\nallocations = 28\nstep_events = 83\n"),
       "p.toml:7: 'model.step_events' 83 is more than a step of 26 launches and 28 allocations "
       "holds (launches + 2 x allocations)"},
      {Head("[model]\nname = 3\n"), "p.toml:5: 'model.name' must be a string, not an integer"},
      {Head("[model]\nfingerprint = \"abc\"\n"),
       "p.toml:5: 'model.fingerprint' must be 16 lowercase hex digits"},
      {Head("[model]\nlaunches = -1\n"), "p.toml:5: 'model.launches' must not be negative"},
      {Head("[model]\nallocations = true\n"),
       "p.toml:5: 'model.allocations' must be an integer, not a boolean"},
      {Head("[[model]]\n"), "p.toml:4: write [model], not [[model]]"},
      {Head("[rule]\n"), "p.toml:4: write [[rule]], not [rule]"},
      {Head("[[steps]]\n"), "p.toml:4: unknown table 'steps' (known: model, budget, rule, step)"},
      {Head("[[rule]]\ncall_site = \"0123456789abcdef\"\n"), "p.toml:4: missing key 'rule.action'"},
      // A call site is written as spillway-inspect prints it: 16 lowercase hex digits.
      {Head("[[rule]]\ncall_site = \"9C1D2E3F4A5B6C7D\"\naction = \"host\"\n"), kBadCallSite},
      {Head("[[rule]]\ncall_site = \" 9c1d2e3f4a5b6c7d\"\naction = \"host\"\n"), kBadCallSite},
      {Head("[[rule]]\ncall_site = \"0x9c1d2e3f4a5b6c7d\"\naction = \"host\"\n"), kBadCallSite},
      {Head("[[rule]]\ncall_site = \"9c1d2e3f\"\naction = \"host\"\n"), kBadCallSite},
      {Head("[[rule]]\ncall_site = \"\"\naction = \"host\"\n"), kBadCallSite},
      {Head("[[rule]]\ncall_site = \"optim.step\"\naction = \"host\"\n"), kBadCallSite},
      {Head("[[rule]]\naction = \"pin\"\n"),
       "p.toml:5: 'rule.action' is \"pin\"; it must be keep, host, swap or never"},
      {Head("[[rule]]\naction = 1\n"), "p.toml:5: 'rule.action' must be a string, not an integer"},
      {Head("[[rule]]\nsite = \"x\"\naction = \"keep\"\n"),
       "p.toml:5: unknown key 'rule.site' (known: call_site, module, min_size, max_size, order, "
       "action)"},
      {Head("[[rule]]\nmin_size = \"2MiB\"\nmax_size = \"1MiB\"\naction = \"keep\"\n"),
       "p.toml:6: 'rule.max_size' is less than 'rule.min_size'"},
      {Head("[[rule]]\norder = \"3\"\naction = \"keep\"\n"),
       "p.toml:5: 'rule.order' must be an integer or [first, last]"},
      {Head("[[rule]]\norder = [1, 2, 3]\naction = \"keep\"\n"),
       "p.toml:5: 'rule.order' must be an integer or [first, last]"},
      {Head("[[rule]]\norder = [5, 2]\naction = \"keep\"\n"),
       "p.toml:5: 'rule.order' must be positive and first <= last"},
      {Head("[[rule]]\norder = 0\naction = \"keep\"\n"),
       "p.toml:5: 'rule.order' must be positive and first <= last"},
      {Head("[[step]]\nevict = []\n"), "p.toml:4: missing key 'step.position'"},
      {Head("[[step]]\nposition = 4294967296\n"), "p.toml:5: 'step.position' is too large"},
      {Head("[[step]]\nposition = 3\n[[step]]\nposition = 3\n"),
       "p.toml:7: 'step.position' 3 is not after the previous step's 3"},
      {Head("[[step]]\nposition = 0\nwhen = 1\n"),
       "p.toml:6: unknown key 'step.when' (known: position, evict_absent, evict, discard, "
       "prefetch, populate)"},
      {Head("[[step]]\nposition = 0\nevict = \"1:0\"\n"),
       "p.toml:6: 'step.evict' must be an array of strings"},
      {Head("[[step]]\nposition = 0\nevict = [1]\n"),
       "p.toml:6: 'step.evict' must be an array of strings"},
      {Head("[[step]]\nposition = 0\nprefetch = [\"1\"]\n"),
       "p.toml:6: 'step.prefetch' entry \"1\": no ':' (write \"ALLOC:CHUNK\" or "
       "\"ALLOC:FIRST-LAST\")"},
      {Head("[[step]]\nposition = 0\ndiscard = [\"0:1\"]\n"),
       "p.toml:6: 'step.discard' entry \"0:1\": the allocation must be a positive integer (write "
       "\"ALLOC:CHUNK\" or \"ALLOC:FIRST-LAST\")"},
      {Head("[[step]]\nposition = 0\npopulate = [\"2:x\"]\n"),
       "p.toml:6: 'step.populate' entry \"2:x\": chunks must be integers (write \"ALLOC:CHUNK\" or "
       "\"ALLOC:FIRST-LAST\")"},
      {Head("[[step]]\nposition = 0\nevict = [\"2:5-1\"]\n"),
       "p.toml:6: 'step.evict' entry \"2:5-1\": the last chunk is before the first (write "
       "\"ALLOC:CHUNK\" or \"ALLOC:FIRST-LAST\")"},
      // TOML errors come through as toml++ words them, on the line it names.
      {Head("k = [\n"), "p.toml:4: Error while parsing array: encountered end-of-file"},
  };
  for (const BadCase& c : cases) {
    absl::StatusOr<PolicyFile> p = ParsePolicyFile(c.text, "p.toml");
    ASSERT_FALSE(p.ok()) << c.text;
    EXPECT_EQ(std::string(p.status().message()), c.message) << c.text;
  }
}

// What the old hand-written subset parser read, toml++ reads to the same policy: literal strings,
// `1_000`, a sign, comments and a trailing comma in a multi-line array, CRLF line ends.
TEST(PolicyFile, TheSubsetOfTomlReadsAsBefore) {
  const std::string text =
      "# comment\r\n"
      "version = +1  # trailing comment\r\n"
      "[model]\r\n"
      "name = 'lit\\eral'\r\n"
      "launches = 1_000\r\n"
      "[budget]\n"
      "device_memory = 4_096\n"
      "[[step]]\n"
      "position = 2\n"
      "evict = [\n"
      "  \"1:0\", # one\n"
      "  '2:1-3',\n"
      "]\n";
  absl::StatusOr<PolicyFile> p = ParsePolicyFile(text, "s.toml");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->model, "lit\\eral");
  EXPECT_EQ(p->launches, 1000u);
  EXPECT_EQ(p->launches_line, 5);
  EXPECT_EQ(p->budget_bytes, 4096u);
  ASSERT_EQ(p->schedule.size(), 1u);
  EXPECT_EQ(p->schedule[0].line, 8);
  const std::vector<ChunkRange> evict = {{1, 0, 1}, {2, 1, 3}};
  EXPECT_EQ(p->schedule[0].evict, evict);
}

// TOML the subset refused is read by what it means: dotted keys and inline tables are the tables
// they spell, and a value of the wrong type (a float, a nested array) is named as such.
TEST(PolicyFile, AnyTomlIsReadByWhatItMeans) {
  absl::StatusOr<PolicyFile> p = ParsePolicyFile(
      "version = 1\nbudget.device_memory = \"1GiB\"\nrule = [{order = 2, action = \"keep\"}]\n",
      "t.toml");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->budget_bytes, uint64_t{1} << 30);
  ASSERT_EQ(p->rules.size(), 1u);
  EXPECT_EQ(p->rules[0].first_order, 2u);
  EXPECT_EQ(p->rules[0].line, 3);
  const BadCase cases[] = {
      {Head("[model]\nlaunches = 1.5\n"),
       "p.toml:5: 'model.launches' must be an integer, not a float"},
      {Head("[[rule]]\norder = [1, \"2\"]\naction = \"keep\"\n"),
       "p.toml:5: 'rule.order' must be an integer or [first, last]"},
      {Head("[[step]]\nposition = 0\nevict = [[\"1:0\"]]\n"),
       "p.toml:6: 'step.evict' must be an array of strings"},
      {Head("[model.sub]\nk = 1\n"),
       "p.toml:4: unknown key 'model.sub' (known: name, fingerprint, launches, allocations, "
       "step_signature, step_events, persistent)"},
      {"version = 1\nversion = 1\n",
       "p.toml:2: Error while parsing key-value pair: cannot redefine existing integer 'version'"},
      {Head("[model]\nname = \"a\\q\"\n"),
       "p.toml:5: Error while parsing string: unknown escape sequence '\\q'"},
      // toml++ 3.3 asserted on these headers (policy/plan/tomlplusplus.h turns its checks off).
      {Head("[[[1]]]\n"),
       "p.toml:4: Error while parsing key: expected bare key starting character or string "
       "delimiter, saw '['"},
      {Head("[?\n"),
       "p.toml:4: Error while parsing key: expected bare key starting character or string "
       "delimiter, saw '?'"},
      // ... and reached an unreachable point in its Unicode tables on this (U+0401 after a value).
      {"version = 1\xd0\x81\n",
       "p.toml:1: Error while parsing decimal integer: expected digit, saw '\xd0\x81'"},
  };
  for (const BadCase& c : cases) {
    absl::StatusOr<PolicyFile> bad = ParsePolicyFile(c.text, "p.toml");
    ASSERT_FALSE(bad.ok()) << c.text;
    EXPECT_EQ(std::string(bad.status().message()), c.message) << c.text;
  }
}

// toml++ bounds nesting (256 deep): a million '[' is one error line, not a stack overflow.
TEST(PolicyFile, DeeplyNestedArrayIsOneErrorLine) {
  constexpr size_t kDepth = 1'000'000;
  const std::string text = "k = " + std::string(kDepth, '[') + std::string(kDepth, ']') + "\n";
  absl::StatusOr<PolicyFile> p = ParsePolicyFile(text, "f.toml");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(std::string(p.status().message()),
            "f.toml:1: Error while parsing value: exceeded maximum nested value depth of 256 "
            "(TOML_MAX_NESTED_VALUES)");
}

// Strings are written escaped (control characters as \uXXXX) and read back unchanged.
TEST(PolicyFile, StringsRoundTrip) {
  PolicyFile p;
  p.model = "a\"b\\c\nd\te\x01\x7f'f";
  PolicyRule rule;
  rule.module = "lib x'\"y\".so";
  rule.action = RuleAction::kNever;
  p.rules.push_back(rule);
  p.budget_bytes = 1 << 20;
  const std::string written = FormatPolicyFile(p);
  absl::StatusOr<PolicyFile> again = ParsePolicyFile(written, "w.toml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << written;
  EXPECT_TRUE(*again == p) << written;
}

// The annotated example in docs/policy.md is a valid file, and it belongs to the synthetic
// transformer it names.
// A file cannot ask the engine for more than it takes at a position, in a step or in rules: the
// first table past a limit is an error naming its line (a million moves at one position once cost
// a job 12-18 s).
TEST(PolicyFile, MovesAndRulesAreBounded) {
  std::string at_one = Head("[[step]]\nposition = 0\nprefetch = [");
  for (uint64_t i = 0; i <= kMaxMovesPerPosition; ++i)
    absl::StrAppend(&at_one, i ? ", " : "", "\"1:0\"");
  at_one += "]\n";
  absl::StatusOr<PolicyFile> p = ParsePolicyFile(at_one, "p.toml");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            absl::StrCat("p.toml:5: position 0 has ", kMaxMovesPerPosition + 1,
                         " moves, more than the 4096 the engine takes at one position"));

  std::string steps = Head("");
  const uint64_t per = kMaxMovesPerPosition;
  const uint64_t positions = kMaxScheduleMoves / per + 1;
  for (uint64_t k = 0; k < positions; ++k) {
    absl::StrAppend(&steps, "[[step]]\nposition = ", k, "\nprefetch = [");
    for (uint64_t i = 0; i < per; ++i) absl::StrAppend(&steps, i ? ", " : "", "\"1:0\"");
    steps += "]\n";
  }
  p = ParsePolicyFile(steps, "p.toml");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("the schedule has more than the 262144 moves"),
            std::string::npos)
      << p.status();

  std::string rules = Head("");
  for (uint64_t k = 0; k <= kMaxRules; ++k)
    rules += "[[rule]]\nmodule = \"libx\"\naction = \"keep\"\n";
  p = ParsePolicyFile(rules, "p.toml");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find(
                absl::StrCat("more than the ", kMaxRules, " rules a policy file may have")),
            std::string::npos)
      << p.status();
  rules.resize(rules.size() -
               std::string("[[rule]]\nmodule = \"libx\"\naction = \"keep\"\n").size());
  EXPECT_TRUE(ParsePolicyFile(rules, "p.toml").ok());  // exactly the limit
}

TEST(PolicyFile, DocumentedExampleParses) {
  std::ifstream in(std::string(SPILLWAY_SOURCE_DIR) + "/docs/policy.md");
  ASSERT_TRUE(in.good());
  std::stringstream doc;
  doc << in.rdbuf();
  const std::string text = doc.str();
  const size_t start = text.find("```toml\n");
  ASSERT_NE(start, std::string::npos);
  const size_t end = text.find("```", start + 8);
  absl::StatusOr<PolicyFile> p =
      ParsePolicyFile(text.substr(start + 8, end - start - 8), "docs/policy.md");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->rules.size(), 3u);
  EXPECT_EQ(p->schedule.size(), 2u);
  absl::StatusOr<Workload> w = MakeSyntheticWorkload("transformer");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(p->fingerprint, WorkloadFingerprint(*w));
  EXPECT_EQ(p->launches, w->num_launches());
  EXPECT_EQ(p->allocations, w->allocations.size());
}

TEST(PolicyFile, MissingFileIsOneClearLine) {
  absl::StatusOr<PolicyFile> p = ReadPolicyFile("/nonexistent/x.policy.toml");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "/nonexistent/x.policy.toml: cannot open the policy file");
}

TEST(PolicyFile, StepEventsUpToTheBoundAreRead) {
  absl::StatusOr<PolicyFile> p =
      ParsePolicyFile(Head("[model]\nlaunches = 26\nallocations = 28\nstep_events = 82\n"), "p");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->step_events, 82u);
  p = ParsePolicyFile(Head("[model]\nstep_events = 4194304\n"), "p");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->step_events, kMaxStepEvents);
}

// Only a regular file of at most 64 MiB is read: a device (endless), a FIFO (would wait for a
// writer), a directory or a larger file is one line naming the path, before anything is read.
TEST(PolicyFile, OnlyARegularFileOfAtMost64MiBIsRead) {
  const std::string dir = ::testing::TempDir() + "/policy_dir." + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {std::string("/dev/zero"), dir, fifo}) {
    absl::StatusOr<PolicyFile> p = ReadPolicyFile(path);
    ASSERT_FALSE(p.ok()) << path;
    EXPECT_EQ(p.status().message(),
              path + ": not a regular file (a policy file is a TOML text file)");
  }
  // A sparse file one byte over the limit: refused by its size, nothing read.
  const std::string large = dir + "/large.toml";
  {
    std::ofstream out(large);
    out << "version = 1\n";
  }
  ASSERT_EQ(::truncate(large.c_str(), static_cast<off_t>(kMaxPolicyFileBytes + 1)), 0);
  absl::StatusOr<PolicyFile> p = ReadPolicyFile(large);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), large + ": the policy file is larger than 64 MiB, the most read");
  // At the limit it is read (and parsed: the zeros after the first line are no TOML).
  ASSERT_EQ(::truncate(large.c_str(), static_cast<off_t>(kMaxPolicyFileBytes)), 0);
  p = ReadPolicyFile(large);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message().rfind(large + ":2: ", 0), 0u) << p.status();
  std::remove(large.c_str());
  std::remove(fifo.c_str());
  ::rmdir(dir.c_str());
}

TEST(PolicyFile, CheckPolicyMatchesNamesTheMismatchAndTheFilesLine) {
  absl::StatusOr<Workload> w = MakeSyntheticWorkload("cnn-small");
  ASSERT_TRUE(w.ok());
  PolicyFile p;
  p.model = "m";
  p.fingerprint = WorkloadFingerprint(*w);
  EXPECT_TRUE(CheckPolicyMatches(p, "f.toml", *w).ok());
  p.fingerprint ^= 1;
  p.fingerprint_line = 3;
  EXPECT_NE(CheckPolicyMatches(p, "f.toml", *w).message().find("f.toml:3: policy for model 'm'"),
            std::string::npos);
  // The engine knows no fingerprint (it sees no kernel names): the rest is checked.
  JobStep job = JobStepOf(*w);
  job.fingerprint = 0;
  EXPECT_TRUE(CheckPolicyMatches(p, "f.toml", job).ok());
  p.fingerprint = 0;
  p.launches = w->num_launches() + 1;
  p.launches_line = 4;
  EXPECT_EQ(CheckPolicyMatches(p, "f.toml", *w).message(),
            "f.toml:4: policy expects " + std::to_string(w->num_launches() + 1) +
                " launches per step, the job has " + std::to_string(w->num_launches()));
  p.launches = 0;
  p.allocations = 1;
  EXPECT_EQ(
      CheckPolicyMatches(p, "f.toml", *w).message(),
      "f.toml: policy expects 1 allocations, the job has " + std::to_string(w->allocations.size()));
  p.allocations = 0;
  p.schedule.emplace_back();
  p.schedule[0].position = static_cast<uint32_t>(w->num_launches());
  p.schedule[0].line = 20;
  EXPECT_EQ(CheckPolicyMatches(p, "f.toml", *w).message(),
            "f.toml:20: schedule position " + std::to_string(w->num_launches()) +
                " is past the step's " + std::to_string(w->num_launches()) + " launches");
  p.schedule[0].position = 0;
  p.schedule[0].prefetch.push_back(ChunkRange{1, 0, 1000000});
  EXPECT_EQ(CheckPolicyMatches(p, "f.toml", *w).message(),
            "f.toml:20: schedule position 0 names 1:0+1000000, which is not in the job");
  p.schedule[0].prefetch[0] = ChunkRange{w->allocations.size() + 1, 0, 1};
  EXPECT_NE(CheckPolicyMatches(p, "f.toml", *w).message().find("which is not in the job"),
            std::string::npos);
}

// The lines CheckPolicyMatches names are where the file says it.
TEST(PolicyFile, ParsingKeepsTheLinesOfWhatIsCheckedAgainstTheJob) {
  absl::StatusOr<PolicyFile> p = ParsePolicyFile(
      "version = 1\n[model]\nname = \"m\"\nfingerprint = \"00000000000000ab\"\nlaunches = 5\n"
      "allocations = 2\n[budget]\ndevice_memory = \"1GiB\"\n\n[[step]]\nposition = 1\n"
      "prefetch = [\"1:0\"]\n",
      "f.toml");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->fingerprint_line, 4);
  EXPECT_EQ(p->launches_line, 5);
  EXPECT_EQ(p->allocations_line, 6);
  ASSERT_EQ(p->schedule.size(), 1u);
  EXPECT_EQ(p->schedule[0].line, 10);
}

}  // namespace
}  // namespace spillway::policy
