// A small streaming JSON writer for the exit summary and simgpu's stats: objects, arrays,
// strings (escaped), integers, doubles and booleans, written in order into one string.
#ifndef SPILLWAY_COMMON_JSON_WRITER_H_
#define SPILLWAY_COMMON_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace spillway {

class JsonWriter {
 public:
  // Containers. Inside an object, call Key() before each value.
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);

  // Values.
  JsonWriter& String(std::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Uint(uint64_t value);
  JsonWriter& Double(double value);
  JsonWriter& Bool(bool value);

  // The document so far.
  const std::string& str() const { return out_; }

 private:
  void BeforeValue();

  std::string out_;
  // One entry per open container: true once it holds an element (a comma goes first).
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

// Appends `value` to `out` as a quoted, escaped JSON string.
void AppendJsonString(std::string& out, std::string_view value);


}  // namespace spillway

#endif  // SPILLWAY_COMMON_JSON_WRITER_H_
