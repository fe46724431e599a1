// Policy files: reading (strict, over TOML parsed by toml++), writing, and matching to a workload.
#include "policy/plan/policy_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/size.h"
#include "policy/plan/step_signature.h"
#include "policy/plan/tomlplusplus.h"

namespace spillway::policy {
namespace {

constexpr int kVersion = 1;

absl::string_view TypeName(toml::node_type t) {
  switch (t) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

// The line a node starts on (toml++ counts from 1; 1 where it has no source, as an implicit table).
int LineOf(const toml::node& n) { return std::max(1, static_cast<int>(n.source().begin.line)); }

// One table of the file as the policy reader sees it: [name] or one [[name]] element, its line,
// and its keys in file order (toml++ keeps them sorted by name).
struct Table {
  std::string name;            // "" for the root table
  bool array_element = false;  // from [[name]]
  int line = 1;
  std::vector<std::pair<std::string, const toml::node*>> entries;
};

std::vector<std::pair<std::string, const toml::node*>> InFileOrder(const toml::table& t,
                                                                   bool skip_tables) {
  std::vector<std::pair<std::string, const toml::node*>> entries;
  for (const auto& [key, node] : t) {
    if (skip_tables && (node.is_table() || node.is_array_of_tables())) continue;
    entries.emplace_back(std::string(key.str()), &node);
  }
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    const toml::source_position& x = a.second->source().begin;
    const toml::source_position& y = b.second->source().begin;
    return std::tie(x.line, x.column) < std::tie(y.line, y.column);
  });
  return entries;
}

// The root's own keys first, then every table and [[table]] element in file order.
std::vector<Table> TablesOf(const toml::table& root) {
  std::vector<Table> tables;
  tables.push_back(Table{"", false, 1, InFileOrder(root, /*skip_tables=*/true)});
  for (const auto& [key, node] : root) {
    if (const toml::table* t = node.as_table()) {
      tables.push_back(Table{std::string(key.str()), false, LineOf(*t), InFileOrder(*t, false)});
    } else if (node.is_array_of_tables()) {
      for (const toml::node& element : *node.as_array()) {
        tables.push_back(Table{std::string(key.str()), true, LineOf(element),
                               InFileOrder(*element.as_table(), false)});
      }
    }
  }
  std::stable_sort(tables.begin() + 1, tables.end(),
                   [](const Table& a, const Table& b) { return a.line < b.line; });
  return tables;
}

// Reads the entries of one table, checking keys, types and values; errors name file:line.
class TableReader {
 public:
  TableReader(absl::string_view file, const Table& table) : file_(file), table_(table) {}

  absl::Status Error(int line, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ":", line, ": ", what));
  }
  std::string Where(absl::string_view key) const {
    return table_.name.empty() ? std::string(key) : absl::StrCat(table_.name, ".", key);
  }
  // Rejects keys not in `known`.
  absl::Status OnlyKeys(std::initializer_list<absl::string_view> known) const {
    for (const auto& [key, value] : table_.entries) {
      bool ok = false;
      for (absl::string_view k : known) ok = ok || k == key;
      if (!ok) {
        std::string list;
        for (absl::string_view k : known) absl::StrAppend(&list, list.empty() ? "" : ", ", k);
        return Error(LineOf(*value),
                     absl::StrCat("unknown key '", Where(key), "' (known: ", list, ")"));
      }
    }
    return absl::OkStatus();
  }
  const toml::node* Find(absl::string_view key) const {
    for (const auto& [k, v] : table_.entries) {
      if (k == key) return v;
    }
    return nullptr;
  }
  absl::Status Expect(absl::string_view key, const toml::node& v, toml::node_type type) const {
    if (v.type() == type) return absl::OkStatus();
    return Error(LineOf(v), absl::StrCat("'", Where(key), "' must be ", TypeName(type), ", not ",
                                         TypeName(v.type())));
  }
  absl::Status Required(absl::string_view key) const {
    return Error(table_.line, absl::StrCat("missing key '", Where(key), "'"));
  }
  absl::Status String(absl::string_view key, std::string* out) const {
    const toml::node* v = Find(key);
    if (v == nullptr) return absl::OkStatus();
    if (absl::Status s = Expect(key, *v, toml::node_type::string); !s.ok()) return s;
    *out = v->as_string()->get();
    return absl::OkStatus();
  }
  absl::Status Count(absl::string_view key, uint64_t* out) const {
    const toml::node* v = Find(key);
    if (v == nullptr) return absl::OkStatus();
    if (absl::Status s = Expect(key, *v, toml::node_type::integer); !s.ok()) return s;
    const int64_t n = v->as_integer()->get();
    if (n < 0) return Error(LineOf(*v), absl::StrCat("'", Where(key), "' must not be negative"));
    *out = static_cast<uint64_t>(n);
    return absl::OkStatus();
  }
  // A size: bytes as an integer or a string such as "8GiB".
  absl::Status Size(absl::string_view key, uint64_t* out) const {
    const toml::node* v = Find(key);
    if (v == nullptr) return absl::OkStatus();
    if (v->is_integer()) return Count(key, out);
    if (!v->is_string()) {
      return Error(LineOf(*v),
                   absl::StrCat("'", Where(key), "' must be a size (\"8GiB\" or bytes)"));
    }
    absl::StatusOr<uint64_t> size = ParseSize(v->as_string()->get());
    if (!size.ok()) {
      return Error(LineOf(*v), absl::StrCat("'", Where(key), "': ", size.status().message()));
    }
    *out = *size;
    return absl::OkStatus();
  }

 private:
  absl::string_view file_;
  const Table& table_;
};

absl::StatusOr<ChunkRange> ParseChunkRange(const TableReader& t, absl::string_view key,
                                           const toml::node& v) {
  if (!v.is_string()) {
    return t.Error(LineOf(v), absl::StrCat("'", t.Where(key), "' must be an array of strings"));
  }
  const std::string& text = v.as_string()->get();
  auto bad = [&](absl::string_view why) {
    return t.Error(LineOf(v), absl::StrCat("'", t.Where(key), "' entry \"", text, "\": ", why,
                                           " (write \"ALLOC:CHUNK\" or "
                                           "\"ALLOC:FIRST-LAST\")"));
  };
  const absl::string_view s = text;
  const size_t colon = s.find(':');
  if (colon == absl::string_view::npos) return bad("no ':'");
  const absl::string_view id_text = s.substr(0, colon);
  absl::string_view chunks = s.substr(colon + 1);
  const size_t dash = chunks.find('-');
  uint64_t id = 0, first = 0, last = 0;
  if (!absl::SimpleAtoi(absl::string_view(id_text.data(), id_text.size()), &id) || id == 0 ||
      id_text.empty() || id_text[0] == '+' || id_text[0] == '-') {
    return bad("the allocation must be a positive integer");
  }
  const absl::string_view first_text = chunks.substr(0, dash);
  const absl::string_view last_text =
      dash == absl::string_view::npos ? first_text : chunks.substr(dash + 1);
  auto digits = [](absl::string_view x) {
    return !x.empty() && x.size() <= 9 &&
           x.find_first_not_of("0123456789") == absl::string_view::npos;
  };
  if (!digits(first_text) || !digits(last_text) || !absl::SimpleAtoi(first_text, &first) ||
      !absl::SimpleAtoi(last_text, &last)) {
    return bad("chunks must be integers");
  }
  if (last < first) return bad("the last chunk is before the first");
  return ChunkRange{id, static_cast<uint32_t>(first), static_cast<uint32_t>(last - first + 1)};
}

absl::Status ReadModel(const TableReader& t, PolicyFile* p) {
  if (absl::Status s = t.OnlyKeys({"name", "fingerprint", "launches", "allocations",
                                   "step_signature", "step_events", "persistent"});
      !s.ok()) {
    return s;
  }
  if (absl::Status s = t.String("name", &p->model); !s.ok()) return s;
  std::string fp;
  if (absl::Status s = t.String("fingerprint", &fp); !s.ok()) return s;
  if (!fp.empty()) {
    const toml::node* v = t.Find("fingerprint");
    if (fp.size() != 16 || fp.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return t.Error(LineOf(*v), "'model.fingerprint' must be 16 lowercase hex digits");
    }
    p->fingerprint = std::stoull(fp, nullptr, 16);
    p->fingerprint_line = LineOf(*v);
  }
  std::string sig;
  if (absl::Status s = t.String("step_signature", &sig); !s.ok()) return s;
  if (!sig.empty()) {
    const toml::node* v = t.Find("step_signature");
    if (sig.size() != 16 || sig.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return t.Error(LineOf(*v), "'model.step_signature' must be 16 lowercase hex digits");
    }
    p->step_signature = std::stoull(sig, nullptr, 16);
  }
  if (absl::Status s = t.Count("step_events", &p->step_events); !s.ok()) return s;
  if (absl::Status s = t.Count("persistent", &p->persistent); !s.ok()) return s;
  if (p->step_signature != 0 && p->step_events == 0) {
    return t.Error(LineOf(*t.Find("step_signature")),
                   "'model.step_signature' needs 'model.step_events' (events per step)");
  }
  if (absl::Status s = t.Count("launches", &p->launches); !s.ok()) return s;
  if (absl::Status s = t.Count("allocations", &p->allocations); !s.ok()) return s;
  if (const toml::node* v = t.Find("launches")) p->launches_line = LineOf(*v);
  if (const toml::node* v = t.Find("allocations")) p->allocations_line = LineOf(*v);
  if (const toml::node* v = t.Find("step_events")) {
    // Each launch is one event, each allocation at most two (made and freed in the step).
    if (p->step_events > kMaxStepEvents) {
      return t.Error(LineOf(*v), absl::StrCat("'model.step_events' ", p->step_events,
                                              " is more than the engine follows (", kMaxStepEvents,
                                              " events per step)"));
    }
    if (p->launches != 0 && p->allocations != 0 &&
        p->step_events > p->launches + 2 * p->allocations) {
      return t.Error(LineOf(*v), absl::StrCat("'model.step_events' ", p->step_events,
                                              " is more than a step of ", p->launches,
                                              " launches and ", p->allocations,
                                              " allocations holds (launches + 2 x allocations)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadRule(const TableReader& t, const Table& table, PolicyFile* p) {
  if (absl::Status s =
          t.OnlyKeys({"call_site", "module", "min_size", "max_size", "order", "action"});
      !s.ok()) {
    return s;
  }
  PolicyRule rule;
  rule.line = table.line;
  if (absl::Status s = t.String("call_site", &rule.call_site); !s.ok()) return s;
  if (const toml::node* v = t.Find("call_site");
      v != nullptr && (rule.call_site.size() != 16 ||
                       rule.call_site.find_first_not_of("0123456789abcdef") != std::string::npos)) {
    return t.Error(LineOf(*v),
                   "'rule.call_site' must be 16 lowercase hex digits (a call-site id as "
                   "spillway-inspect prints it)");
  }
  if (absl::Status s = t.String("module", &rule.module); !s.ok()) return s;
  if (absl::Status s = t.Size("min_size", &rule.min_bytes); !s.ok()) return s;
  if (absl::Status s = t.Size("max_size", &rule.max_bytes); !s.ok()) return s;
  if (rule.min_bytes > rule.max_bytes) {
    return t.Error(LineOf(*t.Find("max_size")), "'rule.max_size' is less than 'rule.min_size'");
  }
  if (const toml::node* v = t.Find("order")) {
    const toml::array* range = v->as_array();
    const bool single = v->is_integer();
    const bool pair = range != nullptr && range->size() == 2 && (*range)[0].is_integer() &&
                      (*range)[1].is_integer();
    if (!single && !pair) {
      return t.Error(LineOf(*v), "'rule.order' must be an integer or [first, last]");
    }
    const int64_t first = single ? v->as_integer()->get() : (*range)[0].as_integer()->get();
    const int64_t last = single ? first : (*range)[1].as_integer()->get();
    if (first < 1 || last < first) {
      return t.Error(LineOf(*v), "'rule.order' must be positive and first <= last");
    }
    rule.first_order = static_cast<uint64_t>(first);
    rule.last_order = static_cast<uint64_t>(last);
  }
  const toml::node* action = t.Find("action");
  if (action == nullptr) return t.Required("action");
  if (absl::Status s = t.Expect("action", *action, toml::node_type::string); !s.ok()) return s;
  const std::string& a = action->as_string()->get();
  if (a == "keep") {
    rule.action = RuleAction::kKeep;
  } else if (a == "host") {
    rule.action = RuleAction::kHost;
  } else if (a == "swap") {
    rule.action = RuleAction::kSwap;
  } else if (a == "never") {
    rule.action = RuleAction::kNever;
  } else {
    return t.Error(LineOf(*action), absl::StrCat("'rule.action' is \"", a,
                                                 "\"; it must be keep, host, swap or never"));
  }
  if (p->rules.size() >= kMaxRules) {
    return t.Error(LineOf(*action),
                   absl::StrCat("more than the ", kMaxRules, " rules a policy file may have"));
  }
  p->rules.push_back(rule);
  return absl::OkStatus();
}

absl::Status ReadStep(const TableReader& t, const Table& table, PolicyFile* p,
                      uint64_t* schedule_moves) {
  if (absl::Status s =
          t.OnlyKeys({"position", "evict_absent", "evict", "discard", "prefetch", "populate"});
      !s.ok()) {
    return s;
  }
  ScheduleEntry e;
  e.line = table.line;
  const toml::node* pos = t.Find("position");
  if (pos == nullptr) return t.Required("position");
  uint64_t position = 0;
  if (absl::Status s = t.Count("position", &position); !s.ok()) return s;
  if (position > UINT32_MAX) return t.Error(LineOf(*pos), "'step.position' is too large");
  e.position = static_cast<uint32_t>(position);
  if (!p->schedule.empty() && p->schedule.back().position >= e.position) {
    return t.Error(LineOf(*pos),
                   absl::StrCat("'step.position' ", e.position,
                                " is not after the previous step's ", p->schedule.back().position));
  }
  const std::pair<absl::string_view, std::vector<ChunkRange>*> lists[] = {
      {"evict_absent", &e.evict_absent},
      {"evict", &e.evict},
      {"discard", &e.discard},
      {"prefetch", &e.prefetch},
      {"populate", &e.populate}};
  for (const auto& [key, out] : lists) {
    const toml::node* v = t.Find(key);
    if (v == nullptr) continue;
    if (!v->is_array()) {
      return t.Error(LineOf(*v), absl::StrCat("'", t.Where(key), "' must be an array of strings"));
    }
    for (const toml::node& item : *v->as_array()) {
      absl::StatusOr<ChunkRange> r = ParseChunkRange(t, key, item);
      if (!r.ok()) return r.status();
      out->push_back(*r);
    }
  }
  const uint64_t moves = e.evict_absent.size() + e.evict.size() + e.discard.size() +
                         e.prefetch.size() + e.populate.size();
  if (moves > kMaxMovesPerPosition) {
    return t.Error(LineOf(*pos),
                   absl::StrCat("position ", e.position, " has ", moves, " moves, more than the ",
                                kMaxMovesPerPosition, " the engine takes at one position"));
  }
  *schedule_moves += moves;
  if (*schedule_moves > kMaxScheduleMoves) {
    return t.Error(LineOf(*pos), absl::StrCat("the schedule has more than the ", kMaxScheduleMoves,
                                              " moves the engine takes in a step"));
  }
  p->schedule.push_back(std::move(e));
  return absl::OkStatus();
}

// Reads the policy file open at `fd` into `text`: a regular file of at most kMaxPolicyFileBytes
// (a device such as /dev/zero would never end; a directory is no file at all).
absl::Status ReadRegularFile(int fd, const std::string& path, std::string* text) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file (a policy file is a TOML text file)"));
  }
  const absl::Status too_large = absl::InvalidArgumentError(absl::StrCat(
      path, ": the policy file is larger than ", kMaxPolicyFileBytes >> 20, " MiB, the most read"));
  if (static_cast<uint64_t>(st.st_size) > kMaxPolicyFileBytes) return too_large;
  text->reserve(static_cast<size_t>(st.st_size));
  constexpr size_t kPiece = size_t{1} << 16;
  while (true) {
    const size_t old = text->size();
    if (old > kMaxPolicyFileBytes) return too_large;  // it grew while read
    text->resize(old + kPiece);
    const ssize_t r = ::read(fd, text->data() + old, kPiece);
    text->resize(old + static_cast<size_t>(std::max<ssize_t>(r, 0)));
    if (r == 0) return absl::OkStatus();
    if (r < 0 && errno != EINTR) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": cannot read the policy file: ", std::strerror(errno)));
    }
  }
}

std::string RangeText(const ChunkRange& r) {
  if (r.num_chunks == 1) return absl::StrCat(r.alloc_id, ":", r.first_chunk);
  return absl::StrCat(r.alloc_id, ":", r.first_chunk, "-", r.first_chunk + r.num_chunks - 1);
}

// A TOML basic string for `s`, escaped by toml++ (control characters as \uXXXX).
std::string TomlQuote(std::string_view s) {
  std::ostringstream out;
  out << toml::toml_formatter(toml::value<std::string>(std::string(s)), toml::format_flags::none);
  return out.str();
}

std::string SizeText(uint64_t bytes) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  if (bytes >= (kMiB << 10) && bytes % (kMiB << 10) == 0) {
    return absl::StrCat("\"", bytes / (kMiB << 10), "GiB\"");
  }
  if (bytes >= kMiB && bytes % kMiB == 0) return absl::StrCat("\"", bytes / kMiB, "MiB\"");
  return absl::StrCat(bytes);
}

}  // namespace

std::string_view RuleActionName(RuleAction a) {
  switch (a) {
    case RuleAction::kKeep:
      return "keep";
    case RuleAction::kHost:
      return "host";
    case RuleAction::kSwap:
      return "swap";
    case RuleAction::kNever:
      return "never";
  }
  return "swap";
}

namespace {

// `path` is the module `name`: the same path, or a file of that name.
bool ModuleIs(std::string_view path, std::string_view name) {
  if (path == name) return true;
  const size_t slash = path.rfind('/');
  return slash != std::string_view::npos && path.substr(slash + 1) == name;
}

}  // namespace

bool PolicyRule::Matches(const WorkloadAllocation& a) const {
  if (!call_site.empty() && call_site != a.call_site) return false;
  if (!module.empty() &&
      std::none_of(a.modules.begin(), a.modules.end(),
                   [this](const std::string& m) { return ModuleIs(m, module); })) {
    return false;
  }
  if (a.bytes < min_bytes || a.bytes > max_bytes) return false;
  if (first_order != 0 && (a.id < first_order || a.id > last_order)) return false;
  return true;
}

bool PolicyFile::NamesCallSites() const {
  return std::any_of(rules.begin(), rules.end(),
                     [](const PolicyRule& r) { return !r.call_site.empty() || !r.module.empty(); });
}

RuleAction PolicyFile::ActionFor(const WorkloadAllocation& a) const {
  for (const PolicyRule& r : rules) {
    if (r.Matches(a)) return r.action;
  }
  return RuleAction::kSwap;
}

absl::StatusOr<PolicyFile> ParsePolicyFile(std::string_view text_in, std::string_view file_in) {
  const absl::string_view file_name(file_in.data(), file_in.size());
  const toml::parse_result doc = toml::parse(text_in, file_in);
  if (!doc) {
    // toml++'s description, on the line it names (its own escapes keep it to one line).
    std::string what(doc.error().description());
    std::replace_if(
        what.begin(), what.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    return absl::InvalidArgumentError(absl::StrCat(
        file_name, ":", std::max<uint32_t>(1, doc.error().source().begin.line), ": ", what));
  }
  PolicyFile p;
  uint64_t schedule_moves = 0;  // in the [[step]]s read so far
  bool have_budget = false;
  for (const Table& table : TablesOf(doc.table())) {
    const TableReader t(file_name, table);
    if (table.name.empty()) {
      if (absl::Status s = t.OnlyKeys({"version"}); !s.ok()) return s;
      const toml::node* v = t.Find("version");
      if (v == nullptr) return t.Error(1, "missing key 'version' (this format is version 1)");
      if (v->value_exact<int64_t>() != kVersion) {
        return t.Error(LineOf(*v), "'version' must be 1 (the only version this spillway reads)");
      }
      continue;
    }
    const bool array = table.array_element;
    absl::Status s;
    if (table.name == "model" && !array) {
      s = ReadModel(t, &p);
    } else if (table.name == "budget" && !array) {
      s = t.OnlyKeys({"device_memory"});
      if (s.ok() && t.Find("device_memory") == nullptr) s = t.Required("device_memory");
      if (s.ok()) s = t.Size("device_memory", &p.budget_bytes);
      have_budget = true;
    } else if (table.name == "rule" && array) {
      s = ReadRule(t, table, &p);
    } else if (table.name == "step" && array) {
      s = ReadStep(t, table, &p, &schedule_moves);
    } else if (table.name == "model" || table.name == "budget") {
      s = t.Error(table.line, absl::StrCat("write [", table.name, "], not [[", table.name, "]]"));
    } else if (table.name == "rule" || table.name == "step") {
      s = t.Error(table.line, absl::StrCat("write [[", table.name, "]], not [", table.name, "]"));
    } else {
      s = t.Error(table.line, absl::StrCat("unknown table '", table.name,
                                           "' (known: model, budget, rule, step)"));
    }
    if (!s.ok()) return s;
  }
  if (!have_budget) {
    return absl::InvalidArgumentError(absl::StrCat(
        file_name, ":1: missing table [budget] (the device memory it was planned for)"));
  }
  return p;
}

absl::StatusOr<PolicyFile> ReadPolicyFile(const std::string& path) {
  // Non-blocking: opening a FIFO must not wait for a writer (it is refused below).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": cannot open the policy file"));
  std::string text;
  absl::Status status = ReadRegularFile(fd, path, &text);
  ::close(fd);
  if (!status.ok()) return status;
  return ParsePolicyFile(text, path);
}

std::string FormatPolicyFile(const PolicyFile& p) {
  std::string out =
      "# spillway policy file (docs/policy.md). Generated by spillway plan; rules may be edited.\n"
      "version = 1\n\n[model]\n";
  absl::StrAppend(&out, "name = ", TomlQuote(p.model), "\n");
  if (p.fingerprint != 0) {
    absl::StrAppend(&out, "fingerprint = \"", absl::StrFormat("%016x", p.fingerprint),
                    "\"  # launch sequence + allocation pattern\n");
  }
  if (p.launches != 0) absl::StrAppend(&out, "launches = ", p.launches, "\n");
  if (p.allocations != 0) absl::StrAppend(&out, "allocations = ", p.allocations, "\n");
  if (p.step_signature != 0) {
    absl::StrAppend(&out, "step_signature = \"", absl::StrFormat("%016x", p.step_signature),
                    "\"  # how the engine recognises the step online\n");
    absl::StrAppend(&out, "step_events = ", p.step_events, "\n");
    absl::StrAppend(&out, "persistent = ", p.persistent, "\n");
  }
  absl::StrAppend(&out, "\n[budget]\ndevice_memory = ", SizeText(p.budget_bytes), "\n");
  for (const PolicyRule& r : p.rules) {
    out += "\n[[rule]]\n";
    if (!r.call_site.empty()) absl::StrAppend(&out, "call_site = ", TomlQuote(r.call_site), "\n");
    if (!r.module.empty()) absl::StrAppend(&out, "module = ", TomlQuote(r.module), "\n");
    if (r.min_bytes != 0) absl::StrAppend(&out, "min_size = ", SizeText(r.min_bytes), "\n");
    if (r.max_bytes != std::numeric_limits<uint64_t>::max()) {
      absl::StrAppend(&out, "max_size = ", SizeText(r.max_bytes), "\n");
    }
    if (r.first_order != 0) {
      absl::StrAppend(&out, "order = [", r.first_order, ", ", r.last_order, "]\n");
    }
    absl::StrAppend(&out, "action = \"", std::string(RuleActionName(r.action)), "\"\n");
  }
  if (!p.schedule.empty()) {
    out +=
        "\n# The schedule: before the launch at `position` (0-based, in the step), evict (copy\n"
        "# back), discard (dead: no copy), prefetch (copy in), populate (fresh: no copy);\n"
        "# evict_absent: copy back what is resident after a launch larger than the device.\n"
        "# Entries are \"ALLOCATION:CHUNK\" or \"ALLOCATION:FIRST-LAST\" (2 MiB chunks).\n";
  }
  for (const ScheduleEntry& e : p.schedule) {
    absl::StrAppend(&out, "\n[[step]]\nposition = ", e.position, "\n");
    const std::pair<const char*, const std::vector<ChunkRange>*> lists[] = {
        {"evict_absent", &e.evict_absent},
        {"evict", &e.evict},
        {"discard", &e.discard},
        {"prefetch", &e.prefetch},
        {"populate", &e.populate}};
    for (const auto& [key, ranges] : lists) {
      if (ranges->empty()) continue;
      absl::StrAppend(&out, key, " = [");
      for (size_t i = 0; i < ranges->size(); ++i) {
        absl::StrAppend(&out, i ? ", " : "", "\"", RangeText((*ranges)[i]), "\"");
      }
      out += "]\n";
    }
  }
  return out;
}

JobStep JobStepOf(const Workload& w) {
  JobStep job;
  job.fingerprint = WorkloadFingerprint(w);
  job.launches = w.num_launches();
  job.allocation_bytes.reserve(w.allocations.size());
  for (const WorkloadAllocation& a : w.allocations) job.allocation_bytes.push_back(a.bytes);
  return job;
}

absl::Status CheckPolicyMatches(const PolicyFile& p, std::string_view file_name,
                                const JobStep& job) {
  const auto fail = [&](int line, const std::string& what) {
    return absl::FailedPreconditionError(
        absl::StrCat(std::string(file_name), line > 0 ? absl::StrCat(":", line) : "", ": ", what));
  };
  if (p.fingerprint != 0 && job.fingerprint != 0 && p.fingerprint != job.fingerprint) {
    return fail(p.fingerprint_line,
                absl::StrFormat("policy for model '%s' (fingerprint %016x) does not match this "
                                "job (fingerprint %016x)",
                                p.model, p.fingerprint, job.fingerprint));
  }
  if (p.launches != 0 && p.launches != job.launches) {
    return fail(p.launches_line, absl::StrCat("policy expects ", p.launches,
                                              " launches per step, the job has ", job.launches));
  }
  const uint64_t allocations = job.allocation_bytes.size();
  if (p.allocations != 0 && p.allocations != allocations) {
    return fail(p.allocations_line, absl::StrCat("policy expects ", p.allocations,
                                                 " allocations, the job has ", allocations));
  }
  for (const ScheduleEntry& e : p.schedule) {
    if (e.position >= job.launches) {
      return fail(e.line, absl::StrCat("schedule position ", e.position, " is past the step's ",
                                       job.launches, " launches"));
    }
    for (const auto* list : {&e.evict_absent, &e.evict, &e.discard, &e.prefetch, &e.populate}) {
      for (const ChunkRange& r : *list) {
        if (r.alloc_id == 0 || r.alloc_id > allocations ||
            uint64_t{r.first_chunk} + r.num_chunks >
                ChunksOf(job.allocation_bytes[r.alloc_id - 1])) {
          return fail(e.line,
                      absl::StrCat("schedule position ", e.position, " names ", r.alloc_id, ":",
                                   r.first_chunk, "+", r.num_chunks, ", which is not in the job"));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPolicyMatches(const PolicyFile& p, std::string_view file_name,
                                const Workload& w) {
  if (absl::Status s = CheckPolicyMatches(p, file_name, JobStepOf(w)); !s.ok()) return s;
  if (p.step_signature != 0) {
    const StepSignature job = ComputeStepSignature(w);
    if (job.signature != p.step_signature || job.events != p.step_events ||
        job.persistent != p.persistent) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: policy's step signature %016x (%d events, %d persistent allocations) does not "
          "match this job's %016x (%d events, %d persistent allocations)",
          file_name, p.step_signature, p.step_events, p.persistent, job.signature, job.events,
          job.persistent));
    }
  }
  return absl::OkStatus();
}

namespace {

// Per persistent chunk the schedule moves, what its first move is (in the order the engine executes
// a position's moves: evictions and discards before prefetches and populates) and its position.
enum class FirstMoveKind { kIn, kOut, kOutIfThere };
struct FirstMove {
  FirstMoveKind kind;
  uint32_t position;
};
absl::flat_hash_map<std::pair<uint64_t, uint32_t>, FirstMove> FirstMoves(const PolicyFile& policy) {
  absl::flat_hash_map<std::pair<uint64_t, uint32_t>, FirstMove> first;
  const auto note = [&](const std::vector<ChunkRange>& ranges, FirstMoveKind kind,
                        uint32_t position) {
    for (const ChunkRange& r : ranges) {
      if (r.alloc_id == 0 || r.alloc_id > policy.persistent) continue;
      for (uint32_t k = r.first_chunk; k < r.first_chunk + r.num_chunks; ++k) {
        first.try_emplace({r.alloc_id, k}, FirstMove{kind, position});
      }
    }
  };
  for (const ScheduleEntry& e : policy.schedule) {  // by position (ReadPolicyFile checks it)
    note(e.evict_absent, FirstMoveKind::kOutIfThere, e.position);
    note(e.evict, FirstMoveKind::kOut, e.position);
    note(e.discard, FirstMoveKind::kOut, e.position);
    note(e.prefetch, FirstMoveKind::kIn, e.position);
    note(e.populate, FirstMoveKind::kIn, e.position);
  }
  return first;
}

// Sorted (allocation, chunk) pairs as ranges, contiguous chunks of an allocation merged.
std::vector<ChunkRange> MergeChunks(std::vector<std::pair<uint64_t, uint32_t>> chunks) {
  std::sort(chunks.begin(), chunks.end());
  std::vector<ChunkRange> ranges;
  for (const auto& [id, k] : chunks) {
    if (!ranges.empty() && ranges.back().alloc_id == id &&
        ranges.back().first_chunk + ranges.back().num_chunks == k) {
      ++ranges.back().num_chunks;
    } else {
      ranges.push_back(ChunkRange{id, k, 1});
    }
  }
  return ranges;
}

}  // namespace

std::vector<ChunkRange> OffDeviceAtStepStart(const PolicyFile& policy) {
  std::vector<std::pair<uint64_t, uint32_t>> off;
  for (const auto& [chunk, move] : FirstMoves(policy)) {
    if (move.kind == FirstMoveKind::kIn) off.push_back(chunk);
  }
  return MergeChunks(std::move(off));
}

std::vector<ChunkRange> OnDeviceAtStepStart(const PolicyFile& policy,
                                            const std::vector<uint64_t>& persistent_bytes) {
  const absl::flat_hash_map<std::pair<uint64_t, uint32_t>, FirstMove> first = FirstMoves(policy);
  std::vector<std::pair<uint64_t, uint32_t>> on;
  const uint64_t n = std::min<uint64_t>(policy.persistent, persistent_bytes.size());
  for (uint64_t id = 1; id <= n; ++id) {
    for (uint32_t k = 0; k < ChunksOf(persistent_bytes[id - 1]); ++k) {
      const auto it = first.find({id, k});
      // Sent out at the step's first launch: not brought in only to leave again.
      if (it == first.end() ||
          (it->second.kind == FirstMoveKind::kOut && it->second.position != 0)) {
        on.emplace_back(id, k);
      }
    }
  }
  return MergeChunks(std::move(on));
}

bool operator==(const ChunkRange& a, const ChunkRange& b) {
  return a.alloc_id == b.alloc_id && a.first_chunk == b.first_chunk && a.num_chunks == b.num_chunks;
}
bool operator==(const PolicyRule& a, const PolicyRule& b) {
  return a.call_site == b.call_site && a.module == b.module && a.min_bytes == b.min_bytes &&
         a.max_bytes == b.max_bytes && a.first_order == b.first_order &&
         a.last_order == b.last_order && a.action == b.action;
}
bool operator==(const ScheduleEntry& a, const ScheduleEntry& b) {
  return a.position == b.position && a.evict_absent == b.evict_absent && a.evict == b.evict &&
         a.discard == b.discard && a.prefetch == b.prefetch && a.populate == b.populate;
}
bool operator==(const PolicyFile& a, const PolicyFile& b) {
  return a.model == b.model && a.fingerprint == b.fingerprint && a.launches == b.launches &&
         a.step_signature == b.step_signature && a.step_events == b.step_events &&
         a.persistent == b.persistent && a.allocations == b.allocations &&
         a.budget_bytes == b.budget_bytes && a.rules == b.rules && a.schedule == b.schedule;
}

}  // namespace spillway::policy
