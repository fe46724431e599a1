// Reading and writing calibration files (see calibration.h; the format: docs/calibration.md).
#include "common/calibration.h"

#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace spillway {
namespace {

using Json = nlohmann::json;

// A figure of the file: where it is ("section.key"), its range and what it sets.
struct Figure {
  const char* section;
  const char* key;
  double lo, hi;
  bool whole;  // a whole number
  const char* unit;
  std::function<double&(Calibration&)> ref;
};

// The calls section's entries, in the file's order.
const std::vector<std::pair<const char*, CallCost HostCallCosts::*>>& Calls() {
  static const auto* calls = new std::vector<std::pair<const char*, CallCost HostCallCosts::*>>{
      {"launch", &HostCallCosts::launch},
      {"prefetch_to_device", &HostCallCosts::prefetch_to_device},
      {"prefetch_to_host", &HostCallCosts::prefetch_to_host},
      {"discard", &HostCallCosts::discard},
      {"advise", &HostCallCosts::advise},
      {"alloc_managed", &HostCallCosts::alloc_managed},
      {"pool_alloc", &HostCallCosts::pool_alloc},
      {"mem_get_info", &HostCallCosts::mem_get_info},
  };
  return *calls;
}

// The figures outside the calls section. Whole numbers are kept as doubles while parsed.
struct Wholes {
  double copy_engines, batch_bytes, chunk_bytes, piece_bytes;
};

absl::Status Bad(const std::string& name, const std::string& where, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("calibration ", name, ": ", where, ": ", why));
}

std::string Show(const Json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

// A number in [lo, hi] (a whole one when `whole`), else the error naming `where`.
absl::StatusOr<double> Number(const Json& v, const std::string& name, const std::string& where,
                              double lo, double hi, bool whole, const std::string& unit) {
  const std::string range =
      absl::StrFormat("%s from %g to %g (%s)", whole ? "a whole number" : "a number", lo, hi, unit);
  if (!v.is_number()) return Bad(name, where, absl::StrCat(Show(v), " is not ", range));
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi || (whole && d != std::floor(d))) {
    return Bad(name, where, absl::StrCat(Show(v), " is not ", range));
  }
  return d;
}

// Every key of object `v` (at `where`) is one of `known`.
absl::Status OnlyKeys(const Json& v, const std::string& name, const std::string& where,
                      const std::vector<std::string>& known) {
  if (!v.is_object()) return Bad(name, where, absl::StrCat(Show(v), " is not an object"));
  for (const auto& [key, value] : v.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string list;
      for (const std::string& k : known) absl::StrAppend(&list, list.empty() ? "" : ", ", k);
      return Bad(name, absl::StrCat(where, where.empty() ? "" : ".", key),
                 absl::StrCat("unknown key (known here: ", list, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Calibration> ParseCalibration(std::string_view text, std::string_view name_view) {
  const std::string name(name_view);
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration ", name, ": not JSON (byte ", e.byte, "): ", e.what()));
  } catch (const Json::exception& e) {  // a number too large for a double (1e400), ...
    return absl::InvalidArgumentError(absl::StrCat("calibration ", name, ": not JSON: ", e.what()));
  }
  if (absl::Status s = OnlyKeys(root, name, "",
                                {"spillway_calibration", "device", "driver_version", "source",
                                 "link", "faults", "granule", "calls"});
      !s.ok()) {
    return s;
  }
  if (!root.contains("spillway_calibration")) {
    return Bad(name, "spillway_calibration",
               absl::StrCat("missing: not a calibration file (format version ", kCalibrationVersion,
                            " expected)"));
  }
  if (root["spillway_calibration"] != kCalibrationVersion) {
    return Bad(name, "spillway_calibration",
               absl::StrCat("format version ", Show(root["spillway_calibration"]),
                            " is not readable (this reads ", kCalibrationVersion, ")"));
  }
  Calibration c;
  for (const char* key : {"device", "source"}) {
    if (!root.contains(key)) continue;
    if (!root[key].is_string())
      return Bad(name, key, absl::StrCat(Show(root[key]), " is not a string"));
    (std::string(key) == "device" ? c.device : c.source) = root[key].get<std::string>();
  }
  Wholes wholes{static_cast<double>(c.cost.copy_engines),
                static_cast<double>(c.cost.fault_batch_bytes), static_cast<double>(c.chunk_bytes),
                static_cast<double>(c.piece_bytes)};
  std::vector<Figure> figures = {
      {"link", "h2d_bytes_per_s", 1e3, 1e13, false, "bytes per second",
       [](Calibration& x) -> double& { return x.cost.h2d_bytes_per_s; }},
      {"link", "d2h_bytes_per_s", 1e3, 1e13, false, "bytes per second",
       [](Calibration& x) -> double& { return x.cost.d2h_bytes_per_s; }},
      {"link", "d2d_bytes_per_s", 1e3, 1e14, false, "bytes per second",
       [](Calibration& x) -> double& { return x.cost.d2d_bytes_per_s; }},
      {"link", "copy_engines", 1, 2, true, "1: one engine both ways, 2: one each way",
       [&wholes](Calibration&) -> double& { return wholes.copy_engines; }},
      {"faults", "batch_seconds", 0, 1, false, "seconds",
       [](Calibration& x) -> double& { return x.cost.fault_batch_seconds; }},
      {"faults", "batch_bytes", 4096, 1 << 30, true, "bytes",
       [&wholes](Calibration&) -> double& { return wholes.batch_bytes; }},
      {"granule", "chunk_bytes", 4096, 1 << 30, true, "bytes",
       [&wholes](Calibration&) -> double& { return wholes.chunk_bytes; }},
      {"granule", "piece_bytes", 4096, 1 << 30, true, "bytes",
       [&wholes](Calibration&) -> double& { return wholes.piece_bytes; }},
  };
  if (root.contains("driver_version")) {
    absl::StatusOr<double> v = Number(root["driver_version"], name, "driver_version", 0, 1e6, true,
                                      "as cuDriverGetVersion");
    if (!v.ok()) return v.status();
    c.driver_version = static_cast<int>(*v);
  }
  for (const char* section : {"link", "faults", "granule"}) {
    if (!root.contains(section)) continue;
    std::vector<std::string> keys;
    for (const Figure& f : figures) {
      if (std::string(f.section) == section) keys.push_back(f.key);
    }
    if (absl::Status s = OnlyKeys(root[section], name, section, keys); !s.ok()) return s;
    for (const Figure& f : figures) {
      if (std::string(f.section) != section || !root[section].contains(f.key)) continue;
      absl::StatusOr<double> v =
          Number(root[section][f.key], name, absl::StrCat(section, ".", f.key), f.lo, f.hi, f.whole,
                 f.unit);
      if (!v.ok()) return v.status();
      f.ref(c) = *v;
    }
  }
  if (root.contains("calls")) {
    std::vector<std::string> names;
    for (const auto& [call, member] : Calls()) names.push_back(call);
    if (absl::Status s = OnlyKeys(root["calls"], name, "calls", names); !s.ok()) return s;
    for (const auto& [call, member] : Calls()) {
      if (!root["calls"].contains(call)) continue;
      const Json& entry = root["calls"][call];
      const std::string where = absl::StrCat("calls.", call);
      if (absl::Status s = OnlyKeys(entry, name, where, {"seconds", "seconds_per_byte"}); !s.ok()) {
        return s;
      }
      // The time the call blocks its thread: at most a second; per byte, at most a microsecond
      // (1 MB/s).
      CallCost& cost = c.cost.calls.*member;
      const struct {
        const char* key;
        double hi;
        const char* unit;
        double* value;
      } parts[] = {{"seconds", 1, "seconds", &cost.seconds},
                   {"seconds_per_byte", 1e-6, "seconds per byte", &cost.seconds_per_byte}};
      for (const auto& part : parts) {
        if (!entry.contains(part.key)) continue;
        absl::StatusOr<double> v = Number(entry[part.key], name, absl::StrCat(where, ".", part.key),
                                          0, part.hi, false, part.unit);
        if (!v.ok()) return v.status();
        *part.value = *v;
      }
    }
  }
  c.cost.copy_engines = static_cast<int>(wholes.copy_engines);
  c.cost.fault_batch_bytes = static_cast<uint64_t>(wholes.batch_bytes);
  c.chunk_bytes = static_cast<uint64_t>(wholes.chunk_bytes);
  c.piece_bytes = static_cast<uint64_t>(wholes.piece_bytes);
  return c;
}

absl::StatusOr<Calibration> ReadCalibration(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("calibration ", path, ": cannot be read"));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("calibration ", path, ": read failed"));
  return ParseCalibration(text.str(), path);
}

std::string FormatCalibration(const Calibration& c) {
  Json root = Json::object();
  root["spillway_calibration"] = kCalibrationVersion;
  root["device"] = c.device;
  root["driver_version"] = c.driver_version;
  root["source"] = c.source;
  root["link"] = {{"h2d_bytes_per_s", c.cost.h2d_bytes_per_s},
                  {"d2h_bytes_per_s", c.cost.d2h_bytes_per_s},
                  {"d2d_bytes_per_s", c.cost.d2d_bytes_per_s},
                  {"copy_engines", c.cost.copy_engines}};
  root["faults"] = {{"batch_seconds", c.cost.fault_batch_seconds},
                    {"batch_bytes", c.cost.fault_batch_bytes}};
  root["granule"] = {{"chunk_bytes", c.chunk_bytes}, {"piece_bytes", c.piece_bytes}};
  Json calls = Json::object();
  for (const auto& [call, member] : Calls()) {
    const CallCost& cost = c.cost.calls.*member;
    calls[call] = {{"seconds", cost.seconds}, {"seconds_per_byte", cost.seconds_per_byte}};
  }
  root["calls"] = calls;
  return root.dump(2) + "\n";
}

std::string GranuleWarning(const Calibration& c) {
  if (c.chunk_bytes == kChunkBytes && c.piece_bytes == kPieceBytes) return "";
  return absl::StrFormat(
      "the calibration's granules (a %llu-byte block, %llu-byte pieces) differ from the residency "
      "model's (%llu and %llu, nvidia-uvm's): residency is still counted in the model's",
      static_cast<unsigned long long>(c.chunk_bytes),
      static_cast<unsigned long long>(c.piece_bytes), static_cast<unsigned long long>(kChunkBytes),
      static_cast<unsigned long long>(kPieceBytes));
}

}  // namespace spillway
