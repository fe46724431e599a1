// Synthetic training steps with realistic tensor sizes, for the planner's and the simulator's
// tests and benchmarks when no recorded trace is at hand: a GPT-2-like transformer and a
// ResNet-like CNN. Compute times come from each kernel's FLOPs at a stated throughput, or from
// the bytes it touches at the device's memory bandwidth when that is longer.
#ifndef SPILLWAY_POLICY_PLANNER_SYNTHETIC_WORKLOADS_H_
#define SPILLWAY_POLICY_PLANNER_SYNTHETIC_WORKLOADS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "policy/plan/workload_model.h"

namespace spillway::policy {

// The device the compute times are derived for (an H100 PCIe at a realistic utilization).
struct SyntheticDevice {
  double flops_per_s = 200e12;         // dense fp16/bf16 matmul throughput reached
  double memory_bytes_per_s = 1.6e12;  // HBM bandwidth reached by elementwise kernels
};

struct TransformerShape {
  int layers = 24;
  int hidden = 1024;
  int heads = 16;
  int seq = 1024;
  int batch = 8;
  int vocab = 50257;
};

struct CnnShape {
  int batch = 128;
  int image = 224;
  int width = 64;                          // channels after the stem
  std::vector<int> blocks = {3, 4, 6, 3};  // bottleneck blocks per stage (ResNet-50)
};

// fp32 weights, gradients and Adam moments; fp16 activations saved for backward; attention
// computed blockwise (no seq x seq matrix kept).
Workload MakeTransformerStep(const TransformerShape& shape, const SyntheticDevice& device = {});
// fp32 weights, gradients and momentum; fp16 activations, the largest in the early stages.
Workload MakeCnnStep(const CnnShape& shape, const SyntheticDevice& device = {});

// By name: "transformer" (GPT-2 medium, batch 8 x 1024), "transformer-small" (6 layers,
// batch 4), "cnn" (ResNet-50, batch 128), "cnn-small" (ResNet-50 at batch 16, 112 px).
absl::StatusOr<Workload> MakeSyntheticWorkload(std::string_view name);
std::vector<std::string> SyntheticWorkloadNames();

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_PLANNER_SYNTHETIC_WORKLOADS_H_
