// A policy file (TOML, see docs/policy.md): the device budget a schedule was planned for, the
// model fingerprint that ties it to a job, hand-written rules that place allocations, and the
// generated schedule (per launch position in the training step: what to prefetch, evict, discard
// or populate). Parsing is strict: unknown keys and bad values are errors naming file:line.
#ifndef SPILLWAY_POLICY_PLAN_POLICY_FILE_H_
#define SPILLWAY_POLICY_PLAN_POLICY_FILE_H_

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "policy/plan/workload_model.h"

namespace spillway::policy {

enum class RuleAction {
  kKeep,   // pinned: stays on the device once there
  kHost,   // placed on the host; kernels read it remotely over the link
  kSwap,   // moved by the schedule (the default for what no rule matches)
  kNever,  // never touched by the policy: left to demand paging
};
std::string_view RuleActionName(RuleAction a);

// An allocation matches when every given criterion matches (a criterion left empty, absent from
// the file, matches all; a file that gives `call_site = ""` is refused).
struct PolicyRule {
  std::string call_site;  // exact call-site id (a trace's: 16 lowercase hex digits, CallSiteName)
  // A module on the allocation's calling stack: its file name ("libnccl.so.2") or full path.
  std::string module;
  uint64_t min_bytes = 0;
  uint64_t max_bytes = std::numeric_limits<uint64_t>::max();
  uint64_t first_order = 0;  // allocation order in the step: its id (1-based); 0 = any
  uint64_t last_order = 0;
  RuleAction action = RuleAction::kSwap;
  int line = 0;  // where it was read from (0 when generated)

  bool Matches(const WorkloadAllocation& a) const;
};

// Per launch position (0-based index of the launch in the step): moves issued before it.
struct ScheduleEntry {
  uint32_t position = 0;
  std::vector<ChunkRange> evict;     // written back to the host (still needed later)
  std::vector<ChunkRange> discard;   // dropped with no copy (dead until freed or overwritten)
  std::vector<ChunkRange> prefetch;  // migrated to the device
  std::vector<ChunkRange> populate;  // made resident without a copy (fresh, not yet written)
  int line = 0;                      // where its [[step]] was read from (0 when generated)
  // Written back where resident, before the evictions: right after a launch larger than the
  // device, which the device paged in and out while it ran. They make no room that later moves
  // count on (the launch's loads past the budget are not in the schedule).
  std::vector<ChunkRange> evict_absent = {};
};

// The most events a step may have (`step_events`): the engine keeps one 8-byte token per event of
// the step it follows (policy/plan/step_signature.h), 32 MiB at most.
inline constexpr uint64_t kMaxStepEvents = uint64_t{1} << 22;
// What a policy file may ask of the engine, so that a file cannot slow the job it is followed in
// (a million moves at one position once cost a job 12-18 s and 455 MB): moves per schedule
// position, moves in the whole schedule, and rules (each allocation is matched against every rule).
inline constexpr uint64_t kMaxMovesPerPosition = 4096;
inline constexpr uint64_t kMaxScheduleMoves = uint64_t{1} << 18;
inline constexpr uint64_t kMaxRules = 16384;
// The largest policy file read (ReadPolicyFile).
inline constexpr uint64_t kMaxPolicyFileBytes = uint64_t{64} << 20;

struct PolicyFile {
  std::string model;         // a name for people
  uint64_t fingerprint = 0;  // WorkloadFingerprint of the job it was planned for; 0 = none
  uint64_t launches = 0;     // launches per step (0 = not checked)
  uint64_t allocations = 0;  // allocations (0 = not checked)
  // How the engine follows the step online (policy/plan/step_signature.h); 0 = cannot be followed.
  uint64_t step_signature = 0;
  uint64_t step_events = 0;             // events (allocations, frees, launches) per step
  uint64_t persistent = 0;              // persistent allocations: ids 1..persistent
  uint64_t budget_bytes = 0;            // device memory it was planned for
  std::vector<PolicyRule> rules;        // first match wins
  std::vector<ScheduleEntry> schedule;  // ascending positions
  // Where `fingerprint`, `launches` and `allocations` were read from (0: not in the file).
  int fingerprint_line = 0, launches_line = 0, allocations_line = 0;

  // The action for an allocation: the first matching rule's, else kSwap.
  RuleAction ActionFor(const WorkloadAllocation& a) const;
  // True when a rule matches by call site or module (a run then takes allocations' stacks).
  bool NamesCallSites() const;
};

// Parses policy-file text; errors read "<file>:<line>: <what is wrong>".
absl::StatusOr<PolicyFile> ParsePolicyFile(std::string_view text, std::string_view file_name);
// Reads and parses the file at `path`: a regular file of at most kMaxPolicyFileBytes; errors
// read "<path>: <what is wrong>" (or as ParsePolicyFile's).
absl::StatusOr<PolicyFile> ReadPolicyFile(const std::string& path);
// Writes the file (with comments); ParsePolicyFile reads back an equal PolicyFile.
std::string FormatPolicyFile(const PolicyFile& policy);

// What a job's training step shows of itself, to check a policy file against: taken from a
// workload (spillway simulate) or from the step the engine has just recognised by its signature
// (the planned policy), so both refuse the same files.
struct JobStep {
  uint64_t fingerprint = 0;  // WorkloadFingerprint; 0: not known (the engine sees no kernel names)
  uint64_t launches = 0;
  std::vector<uint64_t> allocation_bytes;  // by the policy's allocation id - 1
};
JobStep JobStepOf(const Workload& w);

// Checks that `policy` (read from `file_name`) belongs to `job` (fingerprint when known, launch
// and allocation counts) and that its schedule names only positions, allocations and chunks the
// step has. Errors read "<file_name>:<line>: <what is wrong>".
absl::Status CheckPolicyMatches(const PolicyFile& policy, std::string_view file_name,
                                const JobStep& job);
// As above for `w`, and the step signature, which the engine recognises the step by.
absl::Status CheckPolicyMatches(const PolicyFile& policy, std::string_view file_name,
                                const Workload& w);

// The chunks of the persistent allocations (numbers 1 to `persistent`) whose first move in the
// schedule's step brings them in (a prefetch or a populate before any eviction or discard of
// theirs): the plan has them off the device when its step begins. Sorted, contiguous chunks of an
// allocation merged into one range.
std::vector<ChunkRange> OffDeviceAtStepStart(const PolicyFile& policy);
// The other chunks of the persistent allocations, `persistent_bytes[w - 1]` being allocation w's
// size (0 for one the step does not use: never moved, it is never on the simulated device): those
// the schedule never moves or first sends out. The plan has them on the device when its step
// begins. Those sent out at the step's first launch (position 0) are left out: bringing one in when
// following begins would only send it out again (and the engine issues a launch's evictions before
// its loads, so the chunk would stay). Sorted and merged like OffDeviceAtStepStart's.
std::vector<ChunkRange> OnDeviceAtStepStart(const PolicyFile& policy,
                                            const std::vector<uint64_t>& persistent_bytes);

bool operator==(const ChunkRange& a, const ChunkRange& b);
bool operator==(const PolicyRule& a, const PolicyRule& b);
bool operator==(const ScheduleEntry& a, const ScheduleEntry& b);
bool operator==(const PolicyFile& a, const PolicyFile& b);

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_PLAN_POLICY_FILE_H_
