// Reading the environment without getenv(): a scan of `environ` that takes no lock and allocates
// nothing, safe to call from inside a preloaded library's hooks.
#ifndef SPILLWAY_COMMON_ENV_H_
#define SPILLWAY_COMMON_ENV_H_

#include <optional>
#include <string_view>

namespace spillway {

// Returns the value of `name`, or nullopt when it is unset. The view points into `environ` and
// stays valid until the variable is changed.
std::optional<std::string_view> GetEnv(std::string_view name);

// True when `name` is set to a non-empty value other than "0", "false", "no" or "off".
bool EnvFlag(std::string_view name);

}  // namespace spillway

#endif  // SPILLWAY_COMMON_ENV_H_
