// A small streaming JSON writer: objects, arrays, strings (escaped), integers, doubles ("%.9g") and
// booleans, written in order into one string. Other JSON is read and written with nlohmann-json;
// this one stays where that does not serve: the exit summary and simgpu's stats (written at exit
// inside preloaded libraries, in documented formats) and the Chrome trace export (streamed in 4 MiB
// pieces, hundreds of MB, whose numbers tests read as written: "ts":1, not 1.0).
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
