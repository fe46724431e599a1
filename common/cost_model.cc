// The shared migration cost model (see cost_model.h).
#include "common/cost_model.h"

#include <algorithm>

namespace spillway {

uint64_t FaultBatches(const CostModel& c, uint64_t fault_bytes) {
  const uint64_t batch = std::max<uint64_t>(c.fault_batch_bytes, 1);
  return (fault_bytes + batch - 1) / batch;
}

double FaultStallSeconds(const CostModel& c, uint64_t fault_bytes, uint64_t evicted_bytes) {
  if (fault_bytes == 0 && evicted_bytes == 0) return 0;
  return static_cast<double>(FaultBatches(c, fault_bytes)) * c.fault_batch_seconds +
         H2DSeconds(c, fault_bytes) + D2HSeconds(c, evicted_bytes);
}

double H2DSeconds(const CostModel& c, uint64_t bytes) {
  return static_cast<double>(bytes) / c.h2d_bytes_per_s;
}

double D2HSeconds(const CostModel& c, uint64_t bytes) {
  return static_cast<double>(bytes) / c.d2h_bytes_per_s;
}

double CopyEngineSeconds(const CostModel& c, uint64_t h2d_bytes, uint64_t d2h_bytes) {
  const double in = H2DSeconds(c, h2d_bytes);
  const double out = D2HSeconds(c, d2h_bytes);
  return c.copy_engines >= 2 ? std::max(in, out) : in + out;
}

}  // namespace spillway
