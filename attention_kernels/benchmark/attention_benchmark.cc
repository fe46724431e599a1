// attention_benchmark: TFLOP/s of spillway's SDPA forward and backward over a grid of batch x
// heads x seq x dim, device memory per configuration, and fused additive attention's memory
// against an unfused implementation at 400 x 400 steps. Prints markdown tables (optionally CSV).
// Needs a CUDA GPU: without one it says so on one line and exits 2. See
// docs/attention-benchmark.md.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "attention_kernels/benchmark/benchmark_plan.h"
#include "attention_kernels/reference/half_convert.h"
#include "spillway/attention.hpp"

namespace {

namespace sa = spillway::attention;
namespace sab = spillway::attention::benchmark;
using sab::Dtype;

constexpr char kProg[] = "attention_benchmark";

std::string CudaError(const char* what, cudaError_t error) {
  return std::string(what) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) +
         ")";
}

// Device memory in use on the current device (all processes), from cudaMemGetInfo.
uint64_t UsedDeviceBytes() {
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return 0;
  return total_bytes - free_bytes;
}

// The device allocations of one configuration, freed together when it goes out of scope.
class DeviceArena {
 public:
  DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena() {
    for (void* p : blocks_) cudaFree(p);
  }
  // Returns `bytes` of device memory (nullptr for 0 bytes); on failure nullptr and error() says
  // why.
  void* Allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    if (const cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) {
      error_ = CudaError(("cudaMalloc(" + std::to_string(bytes) + ")").c_str(), e);
      return nullptr;
    }
    blocks_.push_back(p);
    return p;
  }
  const std::string& error() const { return error_; }

 private:
  std::vector<void*> blocks_;
  std::string error_;
};

// Host inputs of fp16/bf16 bits, uniform in [-1, 1): a cheap generator (splitmix64), as the
// timing does not depend on the values and a 16k-token grid needs 4 x 32M of them.
std::vector<uint16_t> RandomInput(std::size_t n, Dtype dtype, uint64_t seed) {
  std::vector<uint16_t> out(n);
  uint64_t state = seed;
  for (uint16_t& x : out) {
    state += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    const float f = static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
    x = dtype == Dtype::kBf16 ? sa::FloatToBf16Bits(f) : sa::FloatToHalfBits(f);
  }
  return out;
}

spillway_attention_dtype_t ApiDtype(Dtype dtype) {
  return dtype == Dtype::kBf16 ? SPILLWAY_ATTENTION_BF16 : SPILLWAY_ATTENTION_FP16;
}

// Copies host bits to device; false (and `error`) on failure.
bool Upload(void* device, const std::vector<uint16_t>& host, std::size_t n, std::string* error) {
  if (const cudaError_t e = cudaMemcpy(device, host.data(), n * 2, cudaMemcpyHostToDevice);
      e != cudaSuccess) {
    *error = CudaError("cudaMemcpy", e);
    return false;
  }
  return true;
}

// Counts the elements of a device fp16/bf16 buffer that are NaN or infinite (all exponent bits
// set); -1 when the copy fails.
int64_t CountNonFinite(const void* device, std::size_t n, Dtype dtype) {
  std::vector<uint16_t> host(n);
  if (cudaMemcpy(host.data(), device, n * 2, cudaMemcpyDeviceToHost) != cudaSuccess) return -1;
  const uint16_t exponent = dtype == Dtype::kBf16 ? 0x7F80 : 0x7C00;
  return std::count_if(host.begin(), host.end(),
                       [exponent](uint16_t x) { return (x & exponent) == exponent; });
}

// Runs `launch` `warmup` times, then `iters` times between CUDA events; returns the median
// milliseconds of one run.
absl::StatusOr<double> MedianMs(const std::function<sa::Status()>& launch, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i) {
    if (sa::Status s = launch(); !s.ok()) return absl::InternalError(s.ToString());
  }
  std::vector<cudaEvent_t> events(2 * iters);
  for (cudaEvent_t& e : events) cudaEventCreate(&e);
  std::string error;
  for (int i = 0; i < iters && error.empty(); ++i) {
    cudaEventRecord(events[2 * i], nullptr);
    if (sa::Status s = launch(); !s.ok()) error = s.ToString();
    cudaEventRecord(events[2 * i + 1], nullptr);
  }
  if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess && error.empty()) {
    error = CudaError("kernel", e);
  }
  std::vector<double> ms;
  for (int i = 0; i < iters && error.empty(); ++i) {
    float t = 0.0f;
    if (const cudaError_t e = cudaEventElapsedTime(&t, events[2 * i], events[2 * i + 1]);
        e != cudaSuccess) {
      error = CudaError("cudaEventElapsedTime", e);
    }
    ms.push_back(t);
  }
  for (cudaEvent_t e : events) cudaEventDestroy(e);
  if (!error.empty()) return absl::InternalError(error);
  std::sort(ms.begin(), ms.end());
  return ms.size() % 2 == 1 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
}

// Device bytes that came into use since `before` (0 if fewer are in use now).
uint64_t UsedSince(uint64_t before) {
  const uint64_t now = UsedDeviceBytes();
  return now > before ? now - before : 0;
}

double Tflops(double flops, double ms) { return flops / (ms * 1e-3) / 1e12; }
double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// Times `forward`, then `backward` (which reads the forward's outputs) into *fwd_ms and *bwd_ms;
// returns "" or what failed.
std::string TimeForwardBackward(const std::function<sa::Status()>& forward,
                                const std::function<sa::Status()>& backward,
                                const sab::BenchmarkOptions& options, double* fwd_ms,
                                double* bwd_ms) {
  absl::StatusOr<double> ms = MedianMs(forward, options.warmup, options.iters);
  if (!ms.ok()) return "forward: " + std::string(ms.status().message());
  *fwd_ms = *ms;
  ms = MedianMs(backward, options.warmup, options.iters);
  if (!ms.ok()) return "backward: " + std::string(ms.status().message());
  *bwd_ms = *ms;
  return "";
}

// One measured SDPA row; `error` set when the configuration failed.
// Sizes the backward's workspace, times the forward and backward of `call` and measures the
// device memory used since `used_before`. False (with row->error set) when any of it failed.
template <typename Call, typename Row>
bool TimeCall(const Call& call, const sab::BenchmarkOptions& options, uint64_t used_before,
              DeviceArena& arena, Row* row) {
  if (sa::Status s = sa::WorkspaceSize(call.bwd, &row->workspace_bytes); !s.ok()) {
    row->error = s.ToString();
    return false;
  }
  void* workspace = arena.Allocate(row->workspace_bytes);
  row->error = arena.error();
  if (row->error.empty()) {
    row->error = TimeForwardBackward(
        [&] { return sa::Launch(call.fwd, nullptr, 0, nullptr); },
        [&] { return sa::Launch(call.bwd, workspace, row->workspace_bytes, nullptr); }, options,
        &row->fwd_ms, &row->bwd_ms);
  }
  if (!row->error.empty()) return false;
  row->measured_bytes = UsedSince(used_before);
  return true;
}

struct SdpaRow {
  sab::SdpaConfig config;
  double fwd_ms = 0, bwd_ms = 0;
  uint64_t tensor_bytes = 0, measured_bytes = 0;
  std::size_t workspace_bytes = 0;
  int64_t non_finite = 0;
  std::string error;
};

// The host inputs (Q, K, V, dO) of the current dtype, regenerated when the dtype changes.
struct HostInputs {
  Dtype dtype = Dtype::kBf16;
  std::size_t elements = 0;
  std::vector<uint16_t> tensors[4];
  void Ensure(Dtype want, std::size_t n) {
    if (want == dtype && n <= elements) return;
    dtype = want;
    elements = n;
    for (int i = 0; i < 4; ++i) tensors[i] = RandomInput(n, want, 1000 + i);
  }
};

// The forward and backward calls of one configuration over BSHD tensors t = {q, k, v, d_o, o,
// dq, dk, dv} and the log-sum-exp.
struct SdpaCall {
  spillway_attention_sdpa_forward_args_t fwd{};
  spillway_attention_sdpa_backward_args_t bwd{};
};
SdpaCall MakeSdpaCall(const sab::SdpaConfig& c, void* const (&t)[8], float* lse) {
  SdpaCall call;
  spillway_attention_sdpa_problem_t& p = call.fwd.problem;
  p.dtype = ApiDtype(c.dtype);
  p.batch = c.batch;
  p.num_heads_q = p.num_heads_kv = c.heads;
  p.seqlen_q = p.seqlen_k = c.seqlen;
  p.head_dim = c.head_dim;
  p.softmax_scale = 0.0f;  // 1/sqrt(head_dim)
  p.causal = c.causal ? 1 : 0;
  auto bshd = [&](void* data) { return sa::BshdTensor(data, c.seqlen, c.heads, c.head_dim); };
  call.fwd.q = bshd(t[0]);
  call.fwd.k = bshd(t[1]);
  call.fwd.v = bshd(t[2]);
  call.fwd.o = bshd(t[4]);
  call.fwd.lse = lse;
  spillway_attention_sdpa_backward_args_t& b = call.bwd;
  b.problem = p;
  b.q = call.fwd.q;
  b.k = call.fwd.k;
  b.v = call.fwd.v;
  b.o = call.fwd.o;
  b.lse = lse;
  b.d_o = bshd(t[3]);
  b.dq = bshd(t[5]);
  b.dk = bshd(t[6]);
  b.dv = bshd(t[7]);
  b.deterministic = 1;
  return call;
}

// Allocates, fills and times one configuration; device memory is measured around it.
SdpaRow MeasureSdpa(const sab::SdpaConfig& c, const sab::BenchmarkOptions& options,
                    HostInputs& inputs) {
  SdpaRow row;
  row.config = c;
  row.tensor_bytes = sab::SdpaTensorBytes(c);
  const std::size_t n = std::size_t(c.batch) * c.seqlen * c.heads * c.head_dim;
  inputs.Ensure(c.dtype, n);
  cudaDeviceSynchronize();
  const uint64_t used_before = UsedDeviceBytes();
  DeviceArena arena;
  void* t[8];  // q k v d_o o dq dk dv
  for (void*& p : t) p = arena.Allocate(n * 2);
  auto* lse = static_cast<float*>(arena.Allocate(std::size_t(c.batch) * c.seqlen * c.heads * 4));
  for (int i = 0; i < 4 && arena.error().empty() && row.error.empty(); ++i) {
    Upload(t[i], inputs.tensors[i], n, &row.error);
  }
  if (row.error.empty()) row.error = arena.error();
  if (!row.error.empty()) return row;
  for (int i = 4; i < 8; ++i) cudaMemset(t[i], 0xFF, n * 2);  // NaN: unwritten outputs show

  if (!TimeCall(MakeSdpaCall(c, t, lse), options, used_before, arena, &row)) return row;
  for (int i = 4; i < 8 && row.non_finite >= 0; ++i) {
    const int64_t bad = CountNonFinite(t[i], n, c.dtype);
    row.non_finite = bad < 0 ? bad : row.non_finite + bad;
  }
  return row;
}

// Fused additive attention at the seed's size: forward and backward time, accounted and
// measured device bytes, against the unfused lower bound.
struct AdditiveRow {
  sab::AdditiveConfig config;
  double fwd_ms = 0, bwd_ms = 0;
  uint64_t tensor_bytes = 0, measured_bytes = 0, unfused_bytes = 0;
  std::size_t workspace_bytes = 0;
  int64_t non_finite = 0;
  std::string error;
};

// The device tensors of one additive configuration: fp16/bf16 except the fp32 v, d_v and lse.
struct AdditiveBuffers {
  void *qp, *kp, *values, *context, *d_context, *d_qp, *d_kp, *d_values;
  float *v, *d_v, *lse;
};

struct AdditiveCall {
  spillway_attention_additive_forward_args_t fwd{};
  spillway_attention_additive_backward_args_t bwd{};
};
AdditiveCall MakeAdditiveCall(const sab::AdditiveConfig& c, const AdditiveBuffers& m) {
  auto rows = [](void* data, int len, int width) {
    return spillway_attention_tensor_t{data, int64_t{len} * width, 0, width};
  };
  AdditiveCall call;
  spillway_attention_additive_forward_args_t& f = call.fwd;
  f.problem.dtype = ApiDtype(c.dtype);
  f.problem.batch = c.batch;
  f.problem.target_len = c.target_len;
  f.problem.source_len = c.source_len;
  f.problem.units = c.units;
  f.problem.value_dim = c.value_dim;
  f.query_proj = rows(m.qp, c.target_len, c.units);
  f.key_proj = rows(m.kp, c.source_len, c.units);
  f.values = rows(m.values, c.source_len, c.value_dim);
  f.attention_v = m.v;
  f.context = rows(m.context, c.target_len, c.value_dim);
  f.lse = m.lse;
  spillway_attention_additive_backward_args_t& b = call.bwd;
  b.problem = f.problem;
  b.query_proj = f.query_proj;
  b.key_proj = f.key_proj;
  b.values = f.values;
  b.attention_v = m.v;
  b.context = f.context;
  b.lse = m.lse;
  b.d_context = rows(m.d_context, c.target_len, c.value_dim);
  b.d_query_proj = rows(m.d_qp, c.target_len, c.units);
  b.d_key_proj = rows(m.d_kp, c.source_len, c.units);
  b.d_values = rows(m.d_values, c.source_len, c.value_dim);
  b.d_attention_v = m.d_v;
  return call;
}

AdditiveRow MeasureAdditive(const sab::AdditiveConfig& c, const sab::BenchmarkOptions& options) {
  AdditiveRow row;
  row.config = c;
  row.tensor_bytes = sab::AdditiveFusedTensorBytes(c);
  row.unfused_bytes = sab::AdditiveUnfusedBytes(c);
  const std::size_t nt = std::size_t(c.batch) * c.target_len;
  const std::size_t ns = std::size_t(c.batch) * c.source_len;
  cudaDeviceSynchronize();
  const uint64_t used_before = UsedDeviceBytes();
  DeviceArena arena;
  AdditiveBuffers m;
  const std::pair<void**, std::size_t> halves[] = {
      {&m.qp, nt * c.units},          {&m.kp, ns * c.units},
      {&m.values, ns * c.value_dim},  {&m.d_context, nt * c.value_dim},
      {&m.context, nt * c.value_dim}, {&m.d_qp, nt * c.units},
      {&m.d_kp, ns * c.units},        {&m.d_values, ns * c.value_dim}};
  for (const auto& [slot, n] : halves) *slot = arena.Allocate(n * 2);
  m.v = static_cast<float*>(arena.Allocate(std::size_t(c.units) * 4));
  m.d_v = static_cast<float*>(arena.Allocate(std::size_t(c.units) * 4));
  m.lse = static_cast<float*>(arena.Allocate(nt * 4));
  for (int i = 0; i < 4 && arena.error().empty() && row.error.empty(); ++i) {  // the inputs
    Upload(*halves[i].first, RandomInput(halves[i].second, c.dtype, 2000 + i), halves[i].second,
           &row.error);
  }
  if (row.error.empty()) row.error = arena.error();
  if (!row.error.empty()) return row;
  std::vector<float> host_v(c.units);
  for (int u = 0; u < c.units; ++u) host_v[u] = (u % 7 - 3) * 0.05f;
  cudaMemcpy(m.v, host_v.data(), host_v.size() * 4, cudaMemcpyHostToDevice);
  for (int i = 4; i < 8; ++i) cudaMemset(*halves[i].first, 0xFF, halves[i].second * 2);  // NaN

  if (!TimeCall(MakeAdditiveCall(c, m), options, used_before, arena, &row)) return row;
  for (int i = 4; i < 8 && row.non_finite >= 0; ++i) {  // the outputs
    const int64_t bad = CountNonFinite(*halves[i].first, halves[i].second, c.dtype);
    row.non_finite = bad < 0 ? bad : row.non_finite + bad;
  }
  return row;
}

// Runs every kernel once on a tiny problem, so that the runtime inside libspillway_attention is
// initialized and the kernels' modules are loaded before any memory is measured. Returns the
// first error ("" when all ran).
std::string PrimeKernels(const std::vector<sab::SdpaConfig>& grid) {
  const sab::BenchmarkOptions once = [] {
    sab::BenchmarkOptions o;
    o.warmup = 0;
    o.iters = 1;
    return o;
  }();
  HostInputs inputs;
  for (Dtype dtype : {Dtype::kBf16, Dtype::kFp16}) {
    for (int head_dim : {64, 128}) {
      const bool used = std::any_of(grid.begin(), grid.end(), [&](const sab::SdpaConfig& c) {
        return c.dtype == dtype && c.head_dim == head_dim;
      });
      if (!used) continue;
      const SdpaRow r = MeasureSdpa({dtype, head_dim, true, 1, 1, 128}, once, inputs);
      if (!r.error.empty()) return r.error;
    }
  }
  sab::AdditiveConfig tiny = sab::AdditiveBenchmarkConfig();
  tiny.batch = 1;
  tiny.target_len = tiny.source_len = 16;
  return MeasureAdditive(tiny, once).error;
}

std::string FiniteCell(int64_t non_finite) {
  if (non_finite < 0) return "copy failed";
  return non_finite == 0 ? "yes" : "NO (" + std::to_string(non_finite) + " NaN/inf)";
}

// The NVIDIA kernel driver's version from /proc/driver/nvidia/version, or "unknown".
std::string KernelDriverVersion() {
  std::ifstream file("/proc/driver/nvidia/version");
  std::string line;
  std::getline(file, line);
  return sab::DriverVersionFromProcLine(line);
}

// Prints the device header; returns false (after one line on stderr) when there is no GPU.
bool PrintDevice() {
  int count = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
    std::fprintf(stderr, "%s: no CUDA device (%s); nothing measured\n", kProg,
                 e != cudaSuccess ? CudaError("cudaGetDeviceCount", e).c_str() : "0 devices");
    return false;
  }
  if (!spillway_attention_kernels_available()) {
    std::fprintf(stderr, "%s: libspillway_attention.so was built without the CUDA kernels\n",
                 kProg);
    return false;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::printf("# attention_benchmark\n\n");
  std::printf(
      "Device: %s (sm_%d%d, %d SMs, %.1f GiB); NVIDIA driver %s (CUDA %d.%d), CUDA runtime "
      "%d.%d.\n\n",
      prop.name, prop.major, prop.minor, prop.multiProcessorCount,
      static_cast<double>(prop.totalGlobalMem) / (1 << 30), KernelDriverVersion().c_str(),
      driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
  return true;
}

// Quotes a CSV cell.
std::string CsvQuoted(const std::string& text) {
  std::string out = "\"";
  for (char ch : text) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

// Measures and prints the SDPA grid (and writes CSV rows when `csv` is open); false when a
// configuration failed.
bool RunSdpaGrid(const std::vector<sab::SdpaConfig>& grid, const sab::BenchmarkOptions& options,
                 std::ofstream& csv) {
  std::printf(
      "| dtype | dim | causal | batch | heads | seq | fwd ms | fwd TFLOP/s | bwd ms | "
      "bwd TFLOP/s | MiB accounted | MiB measured | outputs finite |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  bool ok = true;
  HostInputs inputs;
  for (const sab::SdpaConfig& c : grid) {
    const SdpaRow r = MeasureSdpa(c, options, inputs);
    const bool measured = r.error.empty();
    const double fwd_tf = measured ? Tflops(sab::SdpaForwardFlops(c), r.fwd_ms) : 0;
    const double bwd_tf = measured ? Tflops(sab::SdpaBackwardFlops(c), r.bwd_ms) : 0;
    std::printf("| %s | %d | %s | %d | %d | %d ", sab::DtypeName(c.dtype), c.head_dim,
                c.causal ? "yes" : "no", c.batch, c.heads, c.seqlen);
    if (measured) {
      std::printf("| %.3f | %.1f | %.3f | %.1f | %.0f | %.0f | %s |\n", r.fwd_ms, fwd_tf, r.bwd_ms,
                  bwd_tf, MiB(r.tensor_bytes + r.workspace_bytes), MiB(r.measured_bytes),
                  FiniteCell(r.non_finite).c_str());
    } else {
      std::printf("| error: %s | | | | | | |\n", r.error.c_str());
    }
    std::fflush(stdout);
    ok &= measured && r.non_finite == 0;
    if (csv.is_open()) {
      csv << "sdpa," << sab::DtypeName(c.dtype) << ',' << c.head_dim << ',' << int(c.causal) << ','
          << c.batch << ',' << c.heads << ',' << c.seqlen << ',' << r.fwd_ms << ',' << fwd_tf << ','
          << r.bwd_ms << ',' << bwd_tf << ',' << r.tensor_bytes << ',' << r.workspace_bytes << ','
          << r.measured_bytes << ",," << int(measured && r.non_finite == 0) << ','
          << CsvQuoted(r.error) << '\n';
    }
  }
  return ok;
}

// Measures and prints fused additive attention against the unfused bytes; false on failure.
bool RunAdditive(const sab::BenchmarkOptions& options, std::ofstream& csv) {
  const AdditiveRow a = MeasureAdditive(sab::AdditiveBenchmarkConfig(), options);
  const sab::AdditiveConfig& c = a.config;
  std::printf(
      "\nAdditive (Bahdanau) attention, fused, %s: batch %d, %d target x %d source steps, "
      "%d units, value dim %d. Unfused: the same tensors plus the [batch, target, source, "
      "units] tanh output and the [batch, target, source] probabilities (a lower bound).\n\n",
      sab::DtypeName(c.dtype), c.batch, c.target_len, c.source_len, c.units, c.value_dim);
  std::printf(
      "| fwd ms | bwd ms | fused MiB accounted | fused MiB measured | unfused MiB (computed) "
      "| fused / unfused (measured) | goal < 0.1 | outputs finite |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  const bool measured = a.error.empty();
  if (!measured) {
    std::printf("| error: %s | | | | %.0f | | | |\n", a.error.c_str(), MiB(a.unfused_bytes));
  } else if (a.measured_bytes == 0) {  // cudaMemGetInfo failed or saw nothing: no ratio
    std::printf("| %.3f | %.3f | %.0f | n/a | %.0f | n/a | not measured | %s |\n", a.fwd_ms,
                a.bwd_ms, MiB(a.tensor_bytes + a.workspace_bytes), MiB(a.unfused_bytes),
                FiniteCell(a.non_finite).c_str());
  } else {
    const double ratio = static_cast<double>(a.measured_bytes) / a.unfused_bytes;
    std::printf("| %.3f | %.3f | %.0f | %.0f | %.0f | %.4f | %s | %s |\n", a.fwd_ms, a.bwd_ms,
                MiB(a.tensor_bytes + a.workspace_bytes), MiB(a.measured_bytes),
                MiB(a.unfused_bytes), ratio, ratio < 0.1 ? "met" : "NOT met",
                FiniteCell(a.non_finite).c_str());
  }
  if (csv.is_open()) {
    csv << "additive," << sab::DtypeName(c.dtype) << ",,0," << c.batch << ",," << c.target_len
        << ',' << a.fwd_ms << ",," << a.bwd_ms << ",," << a.tensor_bytes << ',' << a.workspace_bytes
        << ',' << a.measured_bytes << ',' << a.unfused_bytes << ','
        << int(measured && a.non_finite == 0) << ',' << CsvQuoted(a.error) << '\n';
  }
  return measured && a.non_finite == 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<sab::BenchmarkOptions> parsed =
      sab::ParseBenchmarkOptions(absl::MakeConstSpan(argv + 1, argc > 0 ? argc - 1 : 0));
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s: %s\n", kProg, std::string(parsed.status().message()).c_str());
    return sab::kExitUsage;
  }
  const sab::BenchmarkOptions& options = *parsed;
  if (options.help) {
    std::fputs(sab::BenchmarkUsage().c_str(), stdout);
    return sab::kExitOk;
  }
  std::ofstream csv;
  if (!options.csv_path.empty()) {
    csv.open(options.csv_path);
    if (!csv) {
      std::fprintf(stderr, "%s: --csv: cannot write '%s'\n", kProg, options.csv_path.c_str());
      return sab::kExitUsage;
    }
    csv << "kind,dtype,head_dim,causal,batch,heads,seqlen,fwd_ms,fwd_tflops,bwd_ms,bwd_tflops,"
           "tensor_bytes,workspace_bytes,measured_bytes,unfused_bytes,outputs_finite,error\n";
  }
  if (!PrintDevice()) return sab::kExitNoGpu;
  const std::vector<sab::SdpaConfig> grid = sab::SdpaGrid(options);
  if (const std::string error = PrimeKernels(grid); !error.empty()) {
    std::printf("\nFirst calls on a tiny problem failed: %s\n", error.c_str());
    std::fprintf(stderr, "%s: first calls on a tiny problem failed: %s\n", kProg, error.c_str());
    return sab::kExitFailed;
  }
  std::printf(
      "Median of %d timed runs after %d warm-up runs (CUDA events), batch x seq = %lld "
      "tokens, heads x dim = %d; FLOPs as FlashAttention counts them (causal halved, "
      "backward 2.5x forward). MiB: tensors allocated + library workspace (accounted) and "
      "the cudaMemGetInfo difference over the configuration (measured).\n\n",
      options.iters, options.warmup, static_cast<long long>(options.tokens), sab::kModelDim);
  const bool sdpa_ok = RunSdpaGrid(grid, options, csv);
  const bool additive_ok = RunAdditive(options, csv);
  return sdpa_ok && additive_ok ? sab::kExitOk : sab::kExitFailed;
}
