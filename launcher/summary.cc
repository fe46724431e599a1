// Exit summaries read with nlohmann-json (as common/calibration.cc reads its files).
#include "launcher/summary.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace spillway::launcher {
namespace {

using Json = nlohmann::json;

// The value at PATH ("engine.policy_file.path"), or null when a part is missing.
const Json* Find(const Json& root, const std::string& path) {
  const Json* node = &root;
  for (absl::string_view key : absl::StrSplit(path, '.')) {
    if (!node->is_object()) return nullptr;
    const auto it = node->find(std::string(key));
    if (it == node->end()) return nullptr;
    node = &*it;
  }
  return node;
}

// A leaf as the file has it: a string without its quotes (escaped again as JSON, so a message
// with quotes shows \" as the bash launcher showed it), a number or a literal as its text; "" when
// missing or not a leaf.
std::string LeafText(const Json* node) {
  if (node == nullptr || node->is_structured()) return "";
  const std::string text = node->dump(-1, ' ', false, Json::error_handler_t::replace);
  if (node->is_string()) return text.substr(1, text.size() - 2);
  return text;
}

// The leaf at PATH as LeafText shows it.
std::string Text(const Json& root, const std::string& path) { return LeafText(Find(root, path)); }

// TEXT, or "?" when empty.
std::string OrUnknown(const std::string& text) { return text.empty() ? "?" : text; }

// The number at PATH, 0 when it is missing or not one (as awk reads it).
double Number(const Json& root, const std::string& path) {
  return std::strtod(Text(root, path).c_str(), nullptr);
}

// The size at PATH for the first line: "?" when missing.
std::string SizeAt(const Json& root, const std::string& path) {
  const Json* node = Find(root, path);
  if (node == nullptr || !node->is_number()) return "?";
  return SummarySize(node->get<double>());
}

// Whether the process called CUDA through the hooks: "calls" holds an entry.
bool MadeCalls(const Json& root) {
  const Json* calls = Find(root, "calls");
  return calls != nullptr && calls->is_structured() && !calls->empty();
}

// The first line's error count: the length of "errors" ("?" when missing).
std::string ErrorCount(const Json& root) {
  const Json* errors = Find(root, "errors");
  if (errors != nullptr && errors->is_array()) return absl::StrCat(errors->size());
  return OrUnknown(Text(root, "errors"));
}

// The policy file's or online plan's line, or "" when there is none worth printing.
std::string PlanLine(const Json& root) {
  std::string plan = Text(root, "engine.policy_file.path");
  const std::string followed = Text(root, "engine.policy_file.steps_followed");
  const std::string trial = Text(root, "engine.policy_file.trial");
  // An online plan never made or never followed says nothing worth a line.
  if (plan == "online plan" && (followed.empty() || followed == "0") && trial.empty()) plan = "";
  if (plan.empty()) return "";
  const std::string mismatches = Text(root, "engine.policy_file.mismatches");
  std::string line =
      absl::StrCat("spillway:   ", plan, ": ", OrUnknown(followed), " steps followed, ",
                   OrUnknown(mismatches), " mismatch", mismatches == "1" ? "" : "es");
  if (trial == "kept" || trial == "rejected") {
    absl::StrAppendFormat(&line,
                          "; %s after its trial (a step %.3f ms following it, %.3f ms with the "
                          "learned policy)",
                          trial, Number(root, "engine.policy_file.trial_plan_step_ms"),
                          Number(root, "engine.policy_file.trial_learned_step_ms"));
  } else if (trial == "running") {
    line += "; still on trial at exit";
  }
  return line;
}

}  // namespace

std::string SummarySize(double bytes) {
  if (bytes >= std::ldexp(1.0, 30)) return absl::StrFormat("%.2f GiB", bytes / std::ldexp(1.0, 30));
  if (bytes >= std::ldexp(1.0, 20)) return absl::StrFormat("%.1f MiB", bytes / std::ldexp(1.0, 20));
  if (bytes >= std::ldexp(1.0, 10)) return absl::StrFormat("%.1f KiB", bytes / std::ldexp(1.0, 10));
  return absl::StrFormat("%.17g B", bytes);
}

std::optional<std::vector<std::string>> SummaryLines(std::string_view text) {
  const Json root = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !MadeCalls(root)) return std::nullopt;
  std::vector<std::string> lines;
  const std::string errors = ErrorCount(root);
  lines.push_back(absl::StrCat(
      "spillway: pid ", OrUnknown(Text(root, "pid")), ": policy ",
      OrUnknown(Text(root, "engine.policy")), ", budget ", SizeAt(root, "engine.budget_bytes"),
      ", peak ", SizeAt(root, "allocations.bytes_peak"), ", prefetched ",
      SizeAt(root, "engine.prefetch_bytes"), ", evicted ", SizeAt(root, "engine.evict_bytes"), ", ",
      errors, " error", errors == "1" ? "" : "s"));
  const Json* errors_list = Find(root, "errors");
  if (errors_list != nullptr && errors_list->is_array() && !errors_list->empty()) {
    const std::string first = LeafText(&errors_list->front());
    if (!first.empty()) lines.push_back("spillway:   first error: " + first);
  }
  if (std::string plan = PlanLine(root); !plan.empty()) lines.push_back(std::move(plan));
  const std::string threads = Text(root, "engine.thread_steps");
  if (!threads.empty() && threads != "0") {
    lines.push_back(absl::StrCat("spillway:   learned: each launching thread's own step (", threads,
                                 " threads; their launches interleave, so the job as a whole "
                                 "repeats no step)"));
  }
  const std::string moved = Text(root, "engine.reordered_launches");
  if (!moved.empty() && moved != "0") {
    lines.push_back(absl::StrCat(
        "spillway:   learned: the job's launch order changes from step to step (", moved, " launch",
        moved == "1" ? "" : "es",
        " at another place than in the step before); its step is learned all the same"));
  }
  return lines;
}

bool MatchesPidPattern(const std::string& pattern, const std::string& full_name) {
  absl::string_view name = full_name;
  const std::vector<absl::string_view> pieces = absl::StrSplit(pattern, "%p");
  if (pieces.size() == 1) return name == pattern;
  if (!absl::StartsWith(name, pieces.front())) return false;
  name.remove_prefix(pieces.front().size());
  for (size_t i = 1; i + 1 < pieces.size(); ++i) {
    const size_t at = name.find(pieces[i]);
    if (at == std::string_view::npos) return false;
    name.remove_prefix(at + pieces[i].size());
  }
  return absl::EndsWith(name, pieces.back());
}

}  // namespace spillway::launcher
