// A strict parser for the subset of TOML that policy files use: comments, bare keys, [tables],
// [[arrays of tables]], basic and literal strings, integers, booleans and (multi-line) arrays of
// those. Anything else (floats, dates, inline tables, dotted keys, multi-line strings) is refused
// with "<file>:<line>: ..." rather than misread.
#ifndef SPILLWAY_POLICY_TOML_SUBSET_H_
#define SPILLWAY_POLICY_TOML_SUBSET_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace spillway::policy {

struct TomlValue {
  enum class Type { kString, kInteger, kBool, kArray };
  Type type = Type::kString;
  std::string string;
  int64_t integer = 0;
  bool boolean = false;
  std::vector<TomlValue> array;
  int line = 0;
};

struct TomlTable {
  std::string name;            // "" for the root table
  bool array_element = false;  // from [[name]]
  int line = 0;
  std::vector<std::pair<std::string, TomlValue>> entries;  // in file order
};

struct TomlDocument {
  std::vector<TomlTable> tables;  // tables[0] is the root
};

absl::StatusOr<TomlDocument> ParseToml(std::string_view text, std::string_view file_name);

// A TOML basic string literal for `s` (quoted, escaped).
std::string TomlQuote(std::string_view s);

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_TOML_SUBSET_H_
