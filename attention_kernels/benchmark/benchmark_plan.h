// What attention_benchmark measures, kept apart from CUDA so it is testable on any machine: its
// command-line options, the grid of SDPA configurations (constant token count), FlashAttention's
// FLOP counts, and the byte accounting of fused vs unfused additive attention.
#ifndef SPILLWAY_ATTENTION_KERNELS_BENCHMARK_BENCHMARK_PLAN_H_
#define SPILLWAY_ATTENTION_KERNELS_BENCHMARK_BENCHMARK_PLAN_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace spillway::attention::benchmark {

// Exit statuses of attention_benchmark (documented in docs/attention-benchmark.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // a configuration failed (launch error, non-finite output)
inline constexpr int kExitNoGpu = 2;   // no CUDA device, or the kernels are not built
inline constexpr int kExitUsage = 64;  // bad command line (sysexits' EX_USAGE)

// heads * head_dim of every SDPA configuration (FlashAttention's benchmark uses the same).
inline constexpr int kModelDim = 2048;

struct BenchmarkOptions {
  bool help = false;
  bool quick = false;      // small grid: bf16, seq 1k and 4k
  std::string csv_path;    // empty: no CSV
  int64_t tokens = 16384;  // batch * seqlen of every SDPA configuration
  int warmup = 3;          // untimed runs before timing each configuration and pass
  int iters = 10;          // timed runs; the table shows their median
};

// The usage text printed by --help.
std::string BenchmarkUsage();

// Parses the arguments after argv[0]: --help/-h, --quick, --csv PATH (or --csv=PATH),
// --tokens N, --warmup N, --iters N. Errors name the flag and what is wrong, e.g.
// "--iters: 'x' is not an integer".
absl::StatusOr<BenchmarkOptions> ParseBenchmarkOptions(absl::Span<const char* const> args);

enum class Dtype { kFp16, kBf16 };
const char* DtypeName(Dtype dtype);  // "fp16", "bf16"
inline constexpr int64_t kElementBytes = 2;

// One SDPA measurement: [batch, seqlen, heads, head_dim] Q, K, V (BSHD), heads == KV heads.
struct SdpaConfig {
  Dtype dtype;
  int head_dim;
  bool causal;
  int batch;
  int heads;
  int seqlen;
};

// The grid: dtypes {bf16, fp16} x head dims {64, 128} x {non-causal, causal} x seqlen {512, 1k,
// 2k, 4k, 8k, 16k}, in that nesting order; --quick keeps bf16 and seqlen {1k, 4k}. heads =
// kModelDim / head_dim; batch = max(1, tokens / seqlen), so memory stays bounded.
std::vector<SdpaConfig> SdpaGrid(const BenchmarkOptions& options);

// FlashAttention's count: 4 * batch * heads * seqlen_q * seqlen_k * head_dim for the forward
// (two matrix products of 2 FLOPs per multiply-add), halved when causal; the backward is 2.5x
// the forward (five products instead of two). Recomputation and softmax are not counted.
double SdpaForwardFlops(const SdpaConfig& config);
double SdpaBackwardFlops(const SdpaConfig& config);

// Bytes of the tensors the benchmark allocates for one configuration: Q, K, V, O, dO, dQ, dK, dV
// and the fp32 log-sum-exp (the library's workspace is reported apart).
uint64_t SdpaTensorBytes(const SdpaConfig& config);

// Additive (Bahdanau) attention at the seed paper's size: 400 target x 400 source steps.
struct AdditiveConfig {
  Dtype dtype;
  int batch;
  int target_len;
  int source_len;
  int units;
  int value_dim;
};
AdditiveConfig AdditiveBenchmarkConfig();

// Bytes of the tensors a fused forward + backward needs (not counting workspace): query_proj,
// key_proj, values, context, d_context, their three gradients (dtype), and the fp32 attention_v,
// d_attention_v and log-sum-exp.
uint64_t AdditiveFusedTensorBytes(const AdditiveConfig& config);

// The least an unfused implementation needs for the same forward + backward: the same tensors
// plus the [batch, target, source, units] tanh output it keeps for the backward pass and the
// [batch, target, source] attention probabilities, both in dtype. A lower bound: real unfused
// graphs also hold the pre-activation sum and the energies at the same time.
uint64_t AdditiveUnfusedBytes(const AdditiveConfig& config);

// The NVIDIA driver's version in the first line of /proc/driver/nvidia/version, e.g. "580.65.06"
// from "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul ..." or from "...
// Open Kernel Module for x86_64  580.65.06  Release Build ..."; "unknown" when absent.
std::string DriverVersionFromProcLine(std::string_view line);

}  // namespace spillway::attention::benchmark

#endif  // SPILLWAY_ATTENTION_KERNELS_BENCHMARK_BENCHMARK_PLAN_H_
