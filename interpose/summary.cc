// Formats the exit summary with spillway's JSON writer.
#include "interpose/summary.h"

#include "absl/strings/str_cat.h"
#include "common/json_writer.h"

namespace spillway::interpose {

std::string BoundedMessage(const std::string& text) {
  if (text.size() <= kMaxSummaryMessageBytes) return text;
  size_t cut = kMaxSummaryMessageBytes - 64;
  // Not inside a UTF-8 sequence: back up over continuation bytes.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(text.substr(0, cut), "... (", text.size() - cut, " more bytes)");
}

std::string FormatSummary(const SummaryData& data) {
  JsonWriter json;
  json.BeginObject();
  json.Key("version").String(data.version);
  json.Key("mode").String(data.mode);
  json.Key("pid").Int(data.pid);
  json.Key("driver").String(data.driver);
  json.Key("calls").BeginObject();
  for (const auto& [name, count] : data.calls) json.Key(name).Uint(count);
  json.EndObject();
  json.Key("launches").Uint(data.launches);
  json.Key("graph_launches").Uint(data.graph_launches);
  json.Key("allocations").BeginObject();
  json.Key("count").Uint(data.allocation_count);
  json.Key("bytes_peak").Uint(data.bytes_peak);
  json.Key("managed_bytes_peak").Uint(data.managed_bytes_peak);
  json.Key("vmm_count").Uint(data.vmm_count);
  json.Key("device_exceptions").BeginObject();
  json.Key("capture").Uint(data.device_exceptions_capture);
  json.Key("module").Uint(data.device_exceptions_module);
  json.EndObject();
  json.Key("ipc_refused").Uint(data.ipc_refused);
  json.EndObject();
  json.Key("engine").BeginObject();
  json.Key("policy").String(data.engine_policy);
  json.Key("prefetch_bytes").Uint(data.prefetch_bytes);
  json.Key("evict_bytes").Uint(data.evict_bytes);
  json.Key("discard_bytes").Uint(data.discard_bytes);
  json.Key("overwrite_discard_bytes").Uint(data.overwrite_discard_bytes);
  json.Key("predicted_launches").Uint(data.predicted_launches);
  json.Key("step_length").Uint(data.step_length);
  json.Key("thread_steps").Uint(data.thread_steps);
  json.Key("reordered_launches").Uint(data.reordered_launches);
  json.Key("lookahead_prefetch_bytes").Uint(data.lookahead_prefetch_bytes);
  json.Key("budget_bytes").Uint(data.budget_bytes);
  json.Key("devices").Uint(data.engine_devices);
  json.Key("ballast_bytes").Uint(data.ballast_bytes);
  json.Key("launches_resolved").Uint(data.launches_resolved);
  json.Key("capture_skips").Uint(data.capture_skips);
  if (!data.policy_file.empty()) {
    // One object for all devices: counters summed, aligned when any engine follows the schedule.
    policy::ScheduleAdherence sum;
    for (const policy::ScheduleAdherence& a : data.policy_file) {
      if (sum.path.empty()) sum.path = a.path;
      sum.aligned = sum.aligned || a.aligned;
      sum.alignments += a.alignments;
      sum.steps_followed += a.steps_followed;
      sum.positions_followed += a.positions_followed;
      sum.moves_planned += a.moves_planned;
      sum.moves_issued += a.moves_issued;
      sum.evict_bytes += a.evict_bytes;
      sum.discard_bytes += a.discard_bytes;
      sum.prefetch_bytes += a.prefetch_bytes;
      sum.populate_bytes += a.populate_bytes;
      sum.mismatches += a.mismatches;
      sum.unscheduled_load_bytes += a.unscheduled_load_bytes;
      sum.host_placements += a.host_placements;
      sum.host_bytes += a.host_bytes;
      sum.host_failures += a.host_failures;
      if (sum.fallback_reason.empty()) sum.fallback_reason = a.fallback_reason;
      if (sum.trial.empty()) {
        sum.trial = a.trial;
        sum.trial_plan_step_seconds = a.trial_plan_step_seconds;
        sum.trial_learned_step_seconds = a.trial_learned_step_seconds;
      }
    }
    json.Key("policy_file").BeginObject();
    json.Key("path").String(BoundedMessage(sum.path));
    json.Key("aligned").Bool(sum.aligned);
    json.Key("alignments").Uint(sum.alignments);
    json.Key("steps_followed").Uint(sum.steps_followed);
    json.Key("positions_followed").Uint(sum.positions_followed);
    json.Key("moves_planned").Uint(sum.moves_planned);
    json.Key("moves_issued").Uint(sum.moves_issued);
    json.Key("evict_bytes").Uint(sum.evict_bytes);
    json.Key("discard_bytes").Uint(sum.discard_bytes);
    json.Key("prefetch_bytes").Uint(sum.prefetch_bytes);
    json.Key("populate_bytes").Uint(sum.populate_bytes);
    json.Key("mismatches").Uint(sum.mismatches);
    json.Key("unscheduled_load_bytes").Uint(sum.unscheduled_load_bytes);
    json.Key("host_placements").Uint(sum.host_placements);
    json.Key("host_bytes").Uint(sum.host_bytes);
    json.Key("host_failures").Uint(sum.host_failures);
    json.Key("fallback_reason").String(BoundedMessage(sum.fallback_reason));
    json.Key("trial").String(sum.trial);
    json.Key("trial_plan_step_ms").Double(sum.trial_plan_step_seconds * 1e3);
    json.Key("trial_learned_step_ms").Double(sum.trial_learned_step_seconds * 1e3);
    json.EndObject();
  }
  json.EndObject();
  json.Key("errors").BeginArray();
  for (const std::string& error : data.errors) json.String(BoundedMessage(error));
  json.EndArray();
  json.EndObject();
  return json.str() + "\n";
}

}  // namespace spillway::interpose
