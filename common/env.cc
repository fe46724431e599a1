// Environment lookups by scanning `environ`.
#include "common/env.h"

extern char** environ;

namespace spillway {

std::optional<std::string_view> GetEnv(std::string_view name) {
  if (environ == nullptr) return std::nullopt;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string_view kv(*entry);
    if (kv.size() > name.size() && kv[name.size()] == '=' && kv.substr(0, name.size()) == name) {
      return kv.substr(name.size() + 1);
    }
  }
  return std::nullopt;
}

bool EnvFlag(std::string_view name) {
  const std::optional<std::string_view> value = GetEnv(name);
  if (!value.has_value() || value->empty()) return false;
  return *value != "0" && *value != "false" && *value != "no" && *value != "off";
}

}  // namespace spillway
