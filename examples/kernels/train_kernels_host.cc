// The training-like workload's kernels as a simgpu host kernel library (the contract is
// simgpu/include/simgpu/kernel_library.h). Each kernel walks its whole range on the host, so
// simgpu sees its real memory accesses, and declares the time it would take on the simulated GPU.
//
// Compute model: a layer's forward pass takes as long as moving its output activation over the
// host link (45 GB/s, simgpu's default H2D bandwidth) and its backward pass twice that — dense
// layers whose compute is comparable to the transfer of their activations, not so heavy that any
// transfer hides behind them. Element-wise kernels (fill, loss, update) run at HBM bandwidth.
#include <cstring>

#include "examples/kernels/train_kernels.h"
#include "simgpu/kernel_library.h"

namespace spillway_train {
namespace {

constexpr double kLayerBytesPerSecond = 45.0e9;   // forward: output bytes at the H2D link speed
constexpr double kDeviceBytesPerSecond = 2.0e12;  // element-wise kernels: HBM (H100: ~2 TB/s)

uint32_t* Words(const SimgpuLaunch* launch, int index) {
  return reinterpret_cast<uint32_t*>(SimgpuArg<uint64_t>(launch, index));
}

void Fill(const SimgpuLaunch* launch) {
  uint32_t* out = Words(launch, 0);
  const uint64_t count = SimgpuArg<uint64_t>(launch, 1);
  const uint32_t seed = SimgpuArg<uint32_t>(launch, 2);
  for (uint64_t i = 0; i < count; ++i) out[i] = Hash(i, seed);
}

void ForwardKernel(const SimgpuLaunch* launch) {
  const uint32_t* in = Words(launch, 0);
  const uint32_t* weight = Words(launch, 1);
  uint32_t* out = Words(launch, 2);
  const uint64_t count = SimgpuArg<uint64_t>(launch, 3);
  for (uint64_t i = 0; i < count; ++i) out[i] = Forward(in[i], weight[i]);
}

void Loss(const SimgpuLaunch* launch) {
  const uint32_t* act = Words(launch, 0);
  uint32_t* delta = Words(launch, 1);
  const uint64_t count = SimgpuArg<uint64_t>(launch, 2);
  const uint32_t seed = SimgpuArg<uint32_t>(launch, 3);
  for (uint64_t i = 0; i < count; ++i) delta[i] = act[i] ^ Hash(i, seed);
}

void Backward(const SimgpuLaunch* launch) {
  const uint32_t* act = Words(launch, 0);
  const uint32_t* weight = Words(launch, 1);
  const uint32_t* delta_in = Words(launch, 2);
  uint32_t* delta_out = Words(launch, 3);
  uint32_t* grad = Words(launch, 4);
  const uint64_t count = SimgpuArg<uint64_t>(launch, 5);
  for (uint64_t i = 0; i < count; ++i) {
    delta_out[i] = BackwardDelta(act[i], weight[i], delta_in[i]);
    grad[i] = Gradient(act[i], delta_in[i]);
  }
}

void UpdateKernel(const SimgpuLaunch* launch) {
  uint32_t* weight = Words(launch, 0);
  const uint64_t count = SimgpuArg<uint64_t>(launch, 1);
  const auto* table = reinterpret_cast<const uint64_t*>(SimgpuArg<uint64_t>(launch, 2));
  const uint64_t index = SimgpuArg<uint64_t>(launch, 3);
  const auto* grad = reinterpret_cast<const uint32_t*>(table[index]);  // a device-memory read
  for (uint64_t i = 0; i < count; ++i) weight[i] = Update(weight[i], grad[i]);
}

double Bytes(const SimgpuLaunch* launch, int count_index) {
  return 4.0 * static_cast<double>(SimgpuArg<uint64_t>(launch, count_index));
}
double FillSeconds(const SimgpuLaunch* l) { return Bytes(l, 1) / kDeviceBytesPerSecond; }
double ForwardSeconds(const SimgpuLaunch* l) { return Bytes(l, 3) / kLayerBytesPerSecond; }
double LossSeconds(const SimgpuLaunch* l) { return 2 * Bytes(l, 2) / kDeviceBytesPerSecond; }
double BackwardSeconds(const SimgpuLaunch* l) { return 2 * Bytes(l, 5) / kLayerBytesPerSecond; }
double UpdateSeconds(const SimgpuLaunch* l) { return 3 * Bytes(l, 1) / kDeviceBytesPerSecond; }

constexpr SimgpuParam kFillParams[] = {{0, 8}, {8, 8}, {16, 4}, {20, 4}};
constexpr SimgpuParam kForwardParams[] = {{0, 8}, {8, 8}, {16, 8}, {24, 8}};
constexpr SimgpuParam kLossParams[] = {{0, 8}, {8, 8}, {16, 8}, {24, 4}, {28, 4}};
constexpr SimgpuParam kBackwardParams[] = {{0, 8}, {8, 8}, {16, 8}, {24, 8}, {32, 8}, {40, 8}};
constexpr SimgpuParam kUpdateParams[] = {{0, 8}, {8, 8}, {16, 8}, {24, 8}};

constexpr SimgpuKernel kKernels[] = {
    {"tl_fill", 4, kFillParams, Fill, FillSeconds},
    {"tl_forward", 4, kForwardParams, ForwardKernel, ForwardSeconds},
    {"tl_loss", 5, kLossParams, Loss, LossSeconds},
    {"tl_backward", 6, kBackwardParams, Backward, BackwardSeconds},
    {"tl_update", 4, kUpdateParams, UpdateKernel, UpdateSeconds},
};

constexpr SimgpuKernelLibrary kLibrary = {SIMGPU_KERNEL_ABI_VERSION, 5, kKernels};

}  // namespace
}  // namespace spillway_train

extern "C" __attribute__((visibility("default"))) const SimgpuKernelLibrary*
simgpu_kernel_library() {
  return &spillway_train::kLibrary;
}
