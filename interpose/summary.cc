// Formats the exit summary with spillway's JSON writer.
#include "interpose/summary.h"

#include "common/json_writer.h"

namespace spillway::interpose {

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
  json.Key("predicted_launches").Uint(data.predicted_launches);
  json.Key("step_length").Uint(data.step_length);
  json.Key("lookahead_prefetch_bytes").Uint(data.lookahead_prefetch_bytes);
  json.Key("budget_bytes").Uint(data.budget_bytes);
  json.Key("devices").Uint(data.engine_devices);
  json.Key("ballast_bytes").Uint(data.ballast_bytes);
  json.Key("launches_resolved").Uint(data.launches_resolved);
  json.EndObject();
  json.Key("errors").BeginArray();
  for (const std::string& error : data.errors) json.String(error);
  json.EndArray();
  json.EndObject();
  return json.str() + "\n";
}

}  // namespace spillway::interpose
