// The per-thread count of engine locks held (policy/engine/engine_mutex.h).
#include "policy/engine/engine_mutex.h"

namespace spillway::policy {

thread_local int EngineMutex::held_by_thread_ = 0;

}  // namespace spillway::policy
