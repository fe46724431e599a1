// attention_benchmark's plan: option parsing, the SDPA grid, FLOP counts and byte accounting.
#include "attention_kernels/benchmark/benchmark_plan.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace spillway::attention::benchmark {
namespace {

// Debian's Abseil has its own string_view type.
absl::string_view Sv(std::string_view text) { return absl::string_view(text.data(), text.size()); }

// Parses `text` as an integer in [min, max] for `flag`.
absl::StatusOr<int64_t> ParseBounded(std::string_view flag, std::string_view text, int64_t min,
                                     int64_t max) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(Sv(text), &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(flag), ": '", Sv(text), "' is not an integer"));
  }
  if (value < min || value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(flag), ": ", value, " is out of range [", min, ", ", max, "]"));
  }
  return value;
}

}  // namespace

std::string BenchmarkUsage() {
  return "usage: attention_benchmark [--quick] [--csv PATH] [--tokens N] [--warmup N] "
         "[--iters N]\n"
         "\n"
         "TFLOP/s of spillway's SDPA forward and backward over batch x heads x seq x dim\n"
         "(seq 512..16k, dims 64/128, causal and not, bf16 and fp16; batch * seq = --tokens,\n"
         "heads * dim = 2048), device memory per configuration, and fused additive attention's\n"
         "memory against the unfused [batch, target, source, units] intermediate at 400 x 400.\n"
         "\n"
         "--quick      bf16 only, seq 1k and 4k\n"
         "--csv PATH   also write every row to PATH as CSV\n"
         "--tokens N   batch * seq of every SDPA configuration (default 16384)\n"
         "--warmup N   untimed runs before each timed pass (default 3)\n"
         "--iters N    timed runs per pass; the table shows their median (default 10)\n"
         "\n"
         "Exit status: 0 all measured, 1 a configuration failed, 2 no CUDA device or kernels\n"
         "not built, 64 bad usage. See docs/attention-benchmark.md.\n";
}

absl::StatusOr<BenchmarkOptions> ParseBenchmarkOptions(absl::Span<const char* const> args) {
  BenchmarkOptions options;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      options.help = true;
      continue;
    }
    if (arg == "--quick") {
      options.quick = true;
      continue;
    }
    // Flags with a value: "--flag value" or "--flag=value".
    std::string_view flag = arg, value;
    bool has_value = false;
    if (const std::size_t eq = arg.find('='); arg.starts_with("--") && eq != arg.npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    if (flag != "--csv" && flag != "--tokens" && flag != "--warmup" && flag != "--iters") {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag '", Sv(arg), "' (see --help)"));
    }
    if (!has_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat(Sv(flag), " needs a value"));
      }
      value = args[++i];
    }
    if (flag == "--csv") {
      if (value.empty()) return absl::InvalidArgumentError("--csv: the path is empty");
      options.csv_path = std::string(value);
    } else if (flag == "--tokens") {
      absl::StatusOr<int64_t> n = ParseBounded(flag, value, 512, int64_t{1} << 22);
      if (!n.ok()) return n.status();
      options.tokens = *n;
    } else if (flag == "--warmup") {
      absl::StatusOr<int64_t> n = ParseBounded(flag, value, 0, 1000);
      if (!n.ok()) return n.status();
      options.warmup = static_cast<int>(*n);
    } else {
      absl::StatusOr<int64_t> n = ParseBounded(flag, value, 1, 10000);
      if (!n.ok()) return n.status();
      options.iters = static_cast<int>(*n);
    }
  }
  return options;
}

const char* DtypeName(Dtype dtype) { return dtype == Dtype::kBf16 ? "bf16" : "fp16"; }

std::vector<SdpaConfig> SdpaGrid(const BenchmarkOptions& options) {
  const std::vector<Dtype> dtypes =
      options.quick ? std::vector{Dtype::kBf16} : std::vector{Dtype::kBf16, Dtype::kFp16};
  const std::vector<int> seqlens =
      options.quick ? std::vector{1024, 4096} : std::vector{512, 1024, 2048, 4096, 8192, 16384};
  std::vector<SdpaConfig> grid;
  for (Dtype dtype : dtypes) {
    for (int head_dim : {64, 128}) {
      for (bool causal : {false, true}) {
        for (int seqlen : seqlens) {
          const int batch = static_cast<int>(std::max<int64_t>(1, options.tokens / seqlen));
          grid.push_back({dtype, head_dim, causal, batch, kModelDim / head_dim, seqlen});
        }
      }
    }
  }
  return grid;
}

double SdpaForwardFlops(const SdpaConfig& c) {
  const double flops = 4.0 * c.batch * c.heads * c.seqlen * c.seqlen * c.head_dim;
  return c.causal ? flops / 2 : flops;
}

double SdpaBackwardFlops(const SdpaConfig& c) { return 2.5 * SdpaForwardFlops(c); }

uint64_t SdpaTensorBytes(const SdpaConfig& c) {
  const uint64_t rows = uint64_t(c.batch) * c.seqlen * c.heads;
  return 8 * rows * c.head_dim * kElementBytes + rows * sizeof(float);
}

AdditiveConfig AdditiveBenchmarkConfig() {
  // The seed's case: 400 steps, batch 60 (its largest), 512 units, 512-wide values.
  return {Dtype::kBf16, 60, 400, 400, 512, 512};
}

uint64_t AdditiveFusedTensorBytes(const AdditiveConfig& c) {
  const uint64_t b = c.batch, t = c.target_len, s = c.source_len;
  const uint64_t elements = 2 * b * t * c.units         // query_proj, d_query_proj
                            + 2 * b * s * c.units       // key_proj, d_key_proj
                            + 2 * b * s * c.value_dim   // values, d_values
                            + 2 * b * t * c.value_dim;  // context, d_context
  const uint64_t fp32 = 2 * uint64_t(c.units) + b * t;  // attention_v, d_attention_v, lse
  return elements * kElementBytes + fp32 * sizeof(float);
}

uint64_t AdditiveUnfusedBytes(const AdditiveConfig& c) {
  const uint64_t pairs = uint64_t(c.batch) * c.target_len * c.source_len;
  return AdditiveFusedTensorBytes(c) + pairs * c.units * kElementBytes + pairs * kElementBytes;
}

std::string DriverVersionFromProcLine(std::string_view line) {
  constexpr std::string_view kMarker = "Kernel Module";
  const std::size_t at = line.find(kMarker);
  if (at == line.npos) return "unknown";
  std::string_view rest = line.substr(at + kMarker.size());
  auto next_word = [&rest]() {
    const std::size_t begin = std::min(rest.find_first_not_of(' '), rest.size());
    const std::size_t end = std::min(rest.find(' ', begin), rest.size());
    const std::string_view word = rest.substr(begin, end - begin);
    rest.remove_prefix(end);
    return word;
  };
  std::string_view word = next_word();
  if (word == "for") {  // "Open Kernel Module for x86_64  580.65.06"
    next_word();
    word = next_word();
  }
  const bool version = !word.empty() && word.find_first_not_of("0123456789.") == word.npos;
  return version ? std::string(word) : "unknown";
}

}  // namespace spillway::attention::benchmark
