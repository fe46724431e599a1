// Sizes the residency engine's lookahead from observed times: how many launches ahead the
// predicted access sets must be prefetched so that the host link can bring them in while the
// kernels before them run. Kernel times are observed per launch (LaunchTimer) and predicted for a
// future launch from the same position in earlier steps; the link's bandwidth, each way, is
// observed from the lookahead's own transfers (a default until then). No device calls: pure
// arithmetic, fed by the engine under its lock.
#ifndef SPILLWAY_POLICY_ENGINE_LOOKAHEAD_SIZER_H_
#define SPILLWAY_POLICY_ENGINE_LOOKAHEAD_SIZER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace spillway::policy {

class LookaheadSizer {
 public:
  // Until a transfer has been observed (each way): 25 GB/s, a PCIe 4.0 x16 link's practical rate
  // (a lower guess than the link has sizes the lookahead deeper, the safe side).
  static constexpr double kDefaultBytesPerSecond = 25e9;
  // Until a kernel time has been observed (or when the device cannot time): this many launches.
  static constexpr size_t kUntimedLaunches = 4;
  // Transfers shorter than this are not used for the bandwidth (latency dominates them).
  static constexpr uint64_t kMinTransferBytes = uint64_t{1} << 20;

  // @brief Launch `launch` (the engine's launch stamp) kept the compute stream busy `seconds`.
  void AddKernelTime(uint64_t launch, double seconds);
  // @brief `bytes` went to the device (`to_device`) or were written back to the host in `seconds`
  // (one lookahead batch's prefetches or evictions).
  void AddTransfer(uint64_t bytes, double seconds, bool to_device);

  // @brief The host-to-device and device-to-host rates: observed (recent transfers weigh most),
  // or the default.
  double bytes_per_second() const { return to_device_.rate(); }
  double write_back_bytes_per_second() const { return to_host_.rate(); }
  bool has_kernel_times() const { return kernel_samples_ != 0; }
  // @brief The predicted kernel time of launch `launch`: its time at the same position `period`
  // launches (one step) earlier, or up to 3 steps earlier when that was not observed; otherwise
  // the mean of the recent launches. 0 when nothing was observed.
  double KernelSeconds(uint64_t launch, uint64_t period) const;

  // @brief How many launches ahead data has to start moving after launch `now`. `needed[d - 1]`:
  // the bytes that launch now + d needs and that are not on the device (d = 1 .. needed.size()).
  // The window is the farthest d that needs bytes which, with all nearer launches' bytes, cannot
  // be moved within the kernel time of the launches before it (now .. now + d - 1): that data has
  // to start moving now. Moving a byte is priced as the room for it written back first and then
  // the byte brought in (1 / write-back rate + 1 / host-to-device rate), as on a full device. At
  // least 1 when `needed` is not empty (the next launch), and at most needed.size(). Without
  // observed kernel times: min(kUntimedLaunches, needed.size()).
  size_t Window(uint64_t now, uint64_t period, const std::vector<uint64_t>& needed) const;

 private:
  static constexpr size_t kRing = 16384;  // kernel times of the last launches, by stamp
  struct KernelSample {
    uint64_t launch_plus_one = 0;  // 0: empty
    float seconds = 0;
  };
  std::vector<KernelSample> kernel_ring_ = std::vector<KernelSample>(kRing);
  uint64_t kernel_samples_ = 0;
  double mean_kernel_seconds_ = 0;  // exponentially weighted over the recent launches
  struct Rate {                     // decayed sums of the observed transfers one way
    double bytes = 0;
    double seconds = 0;
    double rate() const { return seconds > 0 ? bytes / seconds : kDefaultBytesPerSecond; }
  };
  Rate to_device_;
  Rate to_host_;
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_ENGINE_LOOKAHEAD_SIZER_H_
