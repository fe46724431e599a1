// JSON checks for the export tests, with nlohmann-json: validates a document and counts every
// event object's "ph" value, so export tests can check what kinds of events they got.
#ifndef SPILLWAY_TESTS_PROFILER_REPORT_JSON_CHECK_H_
#define SPILLWAY_TESTS_PROFILER_REPORT_JSON_CHECK_H_

#include <map>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"

namespace spillway::report::testing {

class JsonCheck {
 public:
  // True when `text` is one valid JSON value (RFC 8259, with surrounding whitespace).
  bool Parse(std::string_view text) {
    phases_.clear();
    error_offset_ = 0;
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      error_offset_ = e.byte;
      return false;
    }
    Count(doc);
    return true;
  }
  // How many objects had "ph": <string>, by value.
  const std::map<std::string, int>& phases() const { return phases_; }
  size_t error_offset() const { return error_offset_; }

 private:
  void Count(const nlohmann::json& value) {
    if (value.is_object()) {
      const auto ph = value.find("ph");
      if (ph != value.end() && ph->is_string()) ++phases_[ph->get<std::string>()];
    }
    if (value.is_structured()) {
      for (const nlohmann::json& child : value) Count(child);
    }
  }

  std::map<std::string, int> phases_;
  size_t error_offset_ = 0;
};

}  // namespace spillway::report::testing

#endif  // SPILLWAY_TESTS_PROFILER_REPORT_JSON_CHECK_H_
