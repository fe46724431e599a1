// LookaheadSizer: the lookahead window from observed kernel times and bandwidth.
#include "policy/engine/lookahead_sizer.h"

#include <algorithm>

namespace spillway::policy {

void LookaheadSizer::AddKernelTime(uint64_t launch, double seconds) {
  if (!(seconds >= 0)) return;  // NaN too
  KernelSample& sample = kernel_ring_[launch % kRing];
  sample.launch_plus_one = launch + 1;
  sample.seconds = static_cast<float>(seconds);
  mean_kernel_seconds_ =
      kernel_samples_ == 0 ? seconds : mean_kernel_seconds_ + (seconds - mean_kernel_seconds_) / 64;
  ++kernel_samples_;
}

void LookaheadSizer::AddTransfer(uint64_t bytes, double seconds, bool to_device) {
  if (bytes < kMinTransferBytes || !(seconds > 0)) return;
  // Decayed sums: the rate of the recent transfers, each weighted by its bytes.
  Rate& rate = to_device ? to_device_ : to_host_;
  rate.bytes = rate.bytes * 0.9 + static_cast<double>(bytes);
  rate.seconds = rate.seconds * 0.9 + seconds;
}

double LookaheadSizer::KernelSeconds(uint64_t launch, uint64_t period) const {
  if (period != 0 && period <= kRing) {
    for (uint64_t k = 1; k <= 3 && launch >= k * period; ++k) {
      const uint64_t earlier = launch - k * period;
      const KernelSample& sample = kernel_ring_[earlier % kRing];
      if (sample.launch_plus_one == earlier + 1) return sample.seconds;
    }
  }
  return mean_kernel_seconds_;
}

size_t LookaheadSizer::Window(uint64_t now, uint64_t period,
                              const std::vector<uint64_t>& needed) const {
  if (needed.empty()) return 0;
  if (!has_kernel_times()) return std::min(kUntimedLaunches, needed.size());
  const double seconds_per_byte = 1 / to_device_.rate() + 1 / to_host_.rate();
  double compute = 0, bytes = 0;
  size_t window = 1;
  for (size_t d = 1; d <= needed.size(); ++d) {
    compute += KernelSeconds(now + d - 1, period);  // the kernels that run before launch now + d
    bytes += static_cast<double>(needed[d - 1]);
    if (needed[d - 1] != 0 && bytes * seconds_per_byte > compute) window = d;
  }
  return window;
}

}  // namespace spillway::policy
