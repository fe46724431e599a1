// Kernel-versus-reference tests (ctest label `gpu`): fresh random inputs each run, outputs
// poisoned (NaN) before each launch, relative error ||out - ref|| / ||ref|| below 1e-2 (bf16) and
// 5e-3 (fp16) for outputs and every gradient.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention_kernels/reference/attention_reference.h"
#include "attention_kernels/reference/half_convert.h"
#include "spillway/attention.h"
#include "spillway/attention.hpp"

namespace spillway::attention {
namespace {

namespace ref = reference;

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

// Rounds host values to the dtype, as the kernel will see them.
std::vector<uint16_t> Encode(const std::vector<float>& x, spillway_attention_dtype_t dtype) {
  std::vector<uint16_t> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    out[i] = dtype == SPILLWAY_ATTENTION_BF16 ? FloatToBf16Bits(x[i]) : FloatToHalfBits(x[i]);
  }
  return out;
}
std::vector<float> Decode(const std::vector<uint16_t>& x, spillway_attention_dtype_t dtype) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    out[i] = dtype == SPILLWAY_ATTENTION_BF16 ? Bf16BitsToFloat(x[i]) : HalfBitsToFloat(x[i]);
  }
  return out;
}
// Random values already representable in the dtype (so the reference sees the same inputs).
std::vector<float> RandomInput(std::size_t n, std::mt19937& gen, spillway_attention_dtype_t dtype,
                               float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);
  for (float& v : x) v = dist(gen);
  return Decode(Encode(x, dtype), dtype);
}

double RelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i]) && got[i] == want[i]) continue;  // lse of an empty row
    const double d = double(got[i]) - want[i];
    num += d * d;
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

double Tolerance(spillway_attention_dtype_t dtype) {
  return dtype == SPILLWAY_ATTENTION_BF16 ? 1e-2 : 5e-3;
}

// A device buffer of 16-bit elements or floats, poisoned with NaN on request.
template <typename E>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    if (cudaMalloc(&ptr_, std::max<std::size_t>(n, 1) * sizeof(E)) != cudaSuccess) ptr_ = nullptr;
  }
  DeviceBuffer(const std::vector<E>& host) : DeviceBuffer(host.size()) { Upload(host); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void Upload(const std::vector<E>& host) {
    cudaMemcpy(ptr_, host.data(), n_ * sizeof(E), cudaMemcpyHostToDevice);
  }
  void Poison() { cudaMemset(ptr_, 0xff, n_ * sizeof(E)); }  // NaN in fp16, bf16 and fp32
  std::vector<E> Download() const {
    std::vector<E> host(n_);
    cudaMemcpy(host.data(), ptr_, n_ * sizeof(E), cudaMemcpyDeviceToHost);
    return host;
  }
  E* get() const { return static_cast<E*>(ptr_); }

 private:
  std::size_t n_;
  void* ptr_ = nullptr;
};

struct SdpaConfig {
  spillway_attention_dtype_t dtype;
  int head_dim;
  int batch, heads_q, heads_kv, seqlen_q, seqlen_k;
  bool causal;
  std::vector<int> cu_q, cu_k;  // varlen when set
  int bias;                     // 0 none, 1 full [B,H,Sq,Sk], 2 broadcast [1,1,Sq,Sk], 3 [B,1,1,Sk]
  std::string Name() const {
    return std::string(dtype == SPILLWAY_ATTENTION_BF16 ? "bf16" : "fp16") + "_d" +
           std::to_string(head_dim) + "_b" + std::to_string(batch) + "_h" +
           std::to_string(heads_q) + "x" + std::to_string(heads_kv) + "_q" +
           std::to_string(seqlen_q) + "_k" + std::to_string(seqlen_k) + (causal ? "_causal" : "") +
           (cu_q.empty() ? "" : "_varlen") + (bias ? "_bias" + std::to_string(bias) : "");
  }
};

class SdpaGpuTest : public ::testing::TestWithParam<SdpaConfig> {};

TEST_P(SdpaGpuTest, ForwardAndBackwardMatchReference) {
  const SdpaConfig& cfg = GetParam();
  std::mt19937 gen(std::random_device{}());
  ref::SdpaShape shape;
  shape.batch = cfg.batch;
  shape.heads_q = cfg.heads_q;
  shape.heads_kv = cfg.heads_kv;
  shape.seqlen_q = cfg.seqlen_q;
  shape.seqlen_k = cfg.seqlen_k;
  shape.head_dim = cfg.head_dim;
  shape.causal = cfg.causal;
  shape.cu_seqlens_q = cfg.cu_q;
  shape.cu_seqlens_k = cfg.cu_k;
  const int d = cfg.head_dim;
  const std::size_t nq = std::size_t(shape.TokensQ()) * cfg.heads_q * d;
  const std::size_t nk = std::size_t(shape.TokensK()) * cfg.heads_kv * d;
  const std::vector<float> q = RandomInput(nq, gen, cfg.dtype), k = RandomInput(nk, gen, cfg.dtype),
                           v = RandomInput(nk, gen, cfg.dtype),
                           d_o = RandomInput(nq, gen, cfg.dtype);
  // Bias layout: strides in elements over a dense buffer.
  int64_t bb = 0, bh = 0, br = 0;
  std::size_t nbias = 0;
  const int64_t sq = cfg.seqlen_q, sk = cfg.seqlen_k;
  if (cfg.bias == 1) bb = cfg.heads_q * sq * sk, bh = sq * sk, br = sk, nbias = cfg.batch * bb;
  if (cfg.bias == 2) br = sk, nbias = sq * sk;
  if (cfg.bias == 3) bb = sk, nbias = cfg.batch * sk;
  const std::vector<float> bias = RandomInput(nbias, gen, cfg.dtype);
  const ref::BiasView bias_view{cfg.bias ? bias.data() : nullptr, bb, bh, br};

  std::vector<float> o_ref(nq), lse_ref(std::size_t(shape.TokensQ()) * cfg.heads_q);
  EXPECT_EQ(ref::SdpaForward(shape, q.data(), k.data(), v.data(), bias_view, o_ref.data(),
                             lse_ref.data()),
            "");
  std::vector<float> dq_ref(nq), dk_ref(nk), dv_ref(nk), dbias_ref(nbias, 0.0f);
  EXPECT_EQ(
      ref::SdpaBackward(shape, q.data(), k.data(), v.data(), bias_view, d_o.data(), dq_ref.data(),
                        dk_ref.data(), dv_ref.data(), cfg.bias ? dbias_ref.data() : nullptr),
      "");

  DeviceBuffer<uint16_t> dev_q(Encode(q, cfg.dtype)), dev_k(Encode(k, cfg.dtype)),
      dev_v(Encode(v, cfg.dtype)), dev_do(Encode(d_o, cfg.dtype)), dev_o(nq), dev_dq(nq),
      dev_dk(nk), dev_dv(nk), dev_bias(Encode(bias, cfg.dtype)), dev_dbias(nbias);
  DeviceBuffer<float> dev_lse(lse_ref.size());
  DeviceBuffer<int32_t> dev_cu_q(std::vector<int32_t>(cfg.cu_q.begin(), cfg.cu_q.end())),
      dev_cu_k(std::vector<int32_t>(cfg.cu_k.begin(), cfg.cu_k.end()));

  spillway_attention_sdpa_forward_args_t f{};
  f.problem = {cfg.dtype,
               cfg.batch,
               cfg.heads_q,
               cfg.heads_kv,
               cfg.seqlen_q,
               cfg.seqlen_k,
               d,
               0.0f,
               cfg.causal ? 1 : 0,
               cfg.cu_q.empty() ? nullptr : dev_cu_q.get(),
               cfg.cu_k.empty() ? nullptr : dev_cu_k.get()};
  f.q = BshdTensor(dev_q.get(), cfg.seqlen_q, cfg.heads_q, d);
  f.k = BshdTensor(dev_k.get(), cfg.seqlen_k, cfg.heads_kv, d);
  f.v = BshdTensor(dev_v.get(), cfg.seqlen_k, cfg.heads_kv, d);
  f.o = BshdTensor(dev_o.get(), cfg.seqlen_q, cfg.heads_q, d);
  f.lse = dev_lse.get();
  if (cfg.bias) f.bias = {dev_bias.get(), bb, bh, br};
  dev_o.Poison();
  dev_lse.Poison();
  std::size_t fwd_ws_bytes = 0;  // the varlen status block, or nothing
  ASSERT_TRUE(WorkspaceSize(f, &fwd_ws_bytes).ok()) << spillway_attention_last_error_message();
  DeviceBuffer<unsigned char> fwd_ws(fwd_ws_bytes);
  const Status fs = Launch(f, fwd_ws_bytes ? fwd_ws.get() : nullptr, fwd_ws_bytes, nullptr);
  ASSERT_TRUE(fs.ok()) << fs.ToString();
  CUDA_OK(cudaDeviceSynchronize());
  if (!cfg.cu_q.empty()) {
    EXPECT_EQ(spillway_attention_sdpa_varlen_status(fwd_ws.get(), nullptr, nullptr),
              SPILLWAY_ATTENTION_SUCCESS)
        << spillway_attention_last_error_message();
  }
  const double tol = Tolerance(cfg.dtype);
  EXPECT_LT(RelativeError(Decode(dev_o.Download(), cfg.dtype), o_ref), tol) << "o";
  EXPECT_LT(RelativeError(dev_lse.Download(), lse_ref), 1e-3) << "lse";

  spillway_attention_sdpa_backward_args_t bw{};
  bw.problem = f.problem;
  bw.q = f.q;
  bw.k = f.k;
  bw.v = f.v;
  bw.bias = f.bias;
  bw.o = f.o;
  bw.lse = f.lse;
  bw.d_o = BshdTensor(dev_do.get(), cfg.seqlen_q, cfg.heads_q, d);
  bw.dq = BshdTensor(dev_dq.get(), cfg.seqlen_q, cfg.heads_q, d);
  bw.dk = BshdTensor(dev_dk.get(), cfg.seqlen_k, cfg.heads_kv, d);
  bw.dv = BshdTensor(dev_dv.get(), cfg.seqlen_k, cfg.heads_kv, d);
  if (cfg.bias) bw.dbias = {dev_dbias.get(), bb, bh, br};
  bw.deterministic = 1;
  std::size_t ws_bytes = 0;
  ASSERT_TRUE(WorkspaceSize(bw, &ws_bytes).ok());
  DeviceBuffer<unsigned char> ws(ws_bytes);
  std::vector<float> first_dq;
  for (int run = 0; run < 2; ++run) {  // twice: the backward must be bitwise deterministic
    dev_dq.Poison();
    dev_dk.Poison();
    dev_dv.Poison();
    dev_dbias.Poison();
    const Status bs = Launch(bw, ws.get(), ws_bytes, nullptr);
    ASSERT_TRUE(bs.ok()) << bs.ToString();
    CUDA_OK(cudaDeviceSynchronize());
    if (!cfg.cu_q.empty()) {
      EXPECT_EQ(spillway_attention_sdpa_varlen_status(ws.get(), nullptr, nullptr),
                SPILLWAY_ATTENTION_SUCCESS)
          << spillway_attention_last_error_message();
    }
    const std::vector<float> dq = Decode(dev_dq.Download(), cfg.dtype);
    if (run == 1) {
      EXPECT_EQ(std::memcmp(dq.data(), first_dq.data(), dq.size() * 4), 0) << "nondeterministic";
      break;
    }
    first_dq = dq;
    // Rows of varlen padding are not part of any sequence; compare only what the kernels own.
    EXPECT_LT(RelativeError(dq, dq_ref), tol) << "dq";
    EXPECT_LT(RelativeError(Decode(dev_dk.Download(), cfg.dtype), dk_ref), tol) << "dk";
    EXPECT_LT(RelativeError(Decode(dev_dv.Download(), cfg.dtype), dv_ref), tol) << "dv";
    if (cfg.bias) {
      EXPECT_LT(RelativeError(Decode(dev_dbias.Download(), cfg.dtype), dbias_ref), tol) << "dbias";
    }
  }
}

std::vector<SdpaConfig> SdpaConfigs() {
  const auto fp16 = SPILLWAY_ATTENTION_FP16;
  const auto bf16 = SPILLWAY_ATTENTION_BF16;
  return {
      {fp16, 64, 2, 4, 4, 128, 128, false, {}, {}, 0},
      {bf16, 64, 2, 4, 4, 128, 128, false, {}, {}, 0},
      {fp16, 128, 1, 2, 2, 200, 333, false, {}, {}, 0},
      {bf16, 128, 1, 2, 2, 200, 333, true, {}, {}, 0},
      {fp16, 64, 1, 2, 1, 333, 130, true, {}, {}, 0},   // more queries than keys: empty rows
      {bf16, 128, 2, 8, 2, 96, 160, true, {}, {}, 0},   // GQA
      {fp16, 64, 2, 4, 1, 100, 100, false, {}, {}, 0},  // MQA
      {bf16, 64, 3, 2, 2, 150, 170, true, {0, 37, 150, 190}, {0, 170, 200, 330}, 0},  // varlen
      {fp16, 128, 2, 2, 2, 70, 90, false, {}, {}, 1},
      {bf16, 64, 2, 4, 2, 70, 90, true, {}, {}, 2},
      {fp16, 64, 2, 3, 3, 70, 90, false, {}, {}, 3},
  };
}

INSTANTIATE_TEST_SUITE_P(Sdpa, SdpaGpuTest, ::testing::ValuesIn(SdpaConfigs()),
                         [](const auto& info) { return info.param.Name(); });

// Rows [first, last) of a token-major buffer of `width` elements per token.
std::vector<float> TokenRows(const std::vector<float>& x, int first, int last, std::size_t width) {
  return std::vector<float>(x.begin() + first * width, x.begin() + last * width);
}
bool AllNan(const std::vector<float>& x) {
  for (float v : x) {
    if (!std::isnan(v)) return false;
  }
  return !x.empty();
}

// Sequence 1 has 113 queries but seqlen_q says 100 (and D is sized for 100 rows a sequence): it
// must be skipped and reported, with no fault and no write to its rows, while sequences 0 and 2
// are computed as usual. (Before, its rows past 100 were silently dropped and the backward's D,
// indexed by token, ran past the workspace.)
TEST(SdpaVarlenGpuTest, ASequenceLongerThanDeclaredIsSkippedAndReported) {
  const auto dtype = SPILLWAY_ATTENTION_BF16;
  constexpr int kDim = 64, kHeads = 2;
  std::mt19937 gen(std::random_device{}());
  ref::SdpaShape shape;  // the truth, for the reference
  shape.batch = 3;
  shape.heads_q = shape.heads_kv = kHeads;
  shape.seqlen_q = 113;
  shape.seqlen_k = 170;
  shape.head_dim = kDim;
  shape.cu_seqlens_q = {0, 37, 150, 190};
  shape.cu_seqlens_k = {0, 170, 200, 330};
  const std::size_t width = std::size_t{kHeads} * kDim;
  const std::size_t nq = shape.TokensQ() * width, nk = shape.TokensK() * width;
  const std::vector<float> q = RandomInput(nq, gen, dtype), k = RandomInput(nk, gen, dtype),
                           v = RandomInput(nk, gen, dtype), d_o = RandomInput(nq, gen, dtype);
  std::vector<float> o_ref(nq), lse_ref(std::size_t(shape.TokensQ()) * kHeads);
  EXPECT_EQ(ref::SdpaForward(shape, q.data(), k.data(), v.data(), {}, o_ref.data(), lse_ref.data()),
            "");
  std::vector<float> dq_ref(nq), dk_ref(nk), dv_ref(nk);
  EXPECT_EQ(ref::SdpaBackward(shape, q.data(), k.data(), v.data(), {}, d_o.data(), dq_ref.data(),
                              dk_ref.data(), dv_ref.data(), nullptr),
            "");

  DeviceBuffer<uint16_t> dev_q(Encode(q, dtype)), dev_k(Encode(k, dtype)), dev_v(Encode(v, dtype)),
      dev_do(Encode(d_o, dtype)), dev_o(nq), dev_dq(nq), dev_dk(nk), dev_dv(nk);
  DeviceBuffer<float> dev_lse(lse_ref.size());
  DeviceBuffer<int32_t> dev_cu_q(std::vector<int32_t>{0, 37, 150, 190}),
      dev_cu_k(std::vector<int32_t>{0, 170, 200, 330});
  spillway_attention_sdpa_forward_args_t f{};
  f.problem = {dtype, 3, kHeads, kHeads, 100, 170, kDim, 0.0f, 0, dev_cu_q.get(), dev_cu_k.get()};
  f.q = BshdTensor(dev_q.get(), 0, kHeads, kDim);
  f.k = BshdTensor(dev_k.get(), 0, kHeads, kDim);
  f.v = BshdTensor(dev_v.get(), 0, kHeads, kDim);
  f.o = BshdTensor(dev_o.get(), 0, kHeads, kDim);
  f.lse = dev_lse.get();
  std::size_t fwd_bytes = 0;
  ASSERT_TRUE(WorkspaceSize(f, &fwd_bytes).ok()) << spillway_attention_last_error_message();
  DeviceBuffer<unsigned char> fwd_ws(fwd_bytes);
  dev_o.Poison();
  const Status fs = Launch(f, fwd_ws.get(), fwd_bytes, nullptr);
  ASSERT_TRUE(fs.ok()) << fs.ToString();
  CUDA_OK(cudaDeviceSynchronize());  // no fault
  spillway_attention_varlen_status_t word{};
  EXPECT_EQ(spillway_attention_sdpa_varlen_status(fwd_ws.get(), nullptr, &word),
            SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE);
  EXPECT_EQ(word.errors, uint32_t{SPILLWAY_ATTENTION_VARLEN_Q_TOO_LONG});
  EXPECT_EQ(word.first_bad_sequence, 1);
  const std::vector<float> o = Decode(dev_o.Download(), dtype);
  EXPECT_TRUE(AllNan(TokenRows(o, 37, 150, width))) << "sequence 1 was written";
  for (auto [first, last] : {std::pair{0, 37}, {150, 190}}) {
    EXPECT_LT(RelativeError(TokenRows(o, first, last, width), TokenRows(o_ref, first, last, width)),
              Tolerance(dtype))
        << "o rows " << first << ".." << last;
  }

  spillway_attention_sdpa_backward_args_t bw{};
  bw.problem = f.problem;
  bw.q = f.q;
  bw.k = f.k;
  bw.v = f.v;
  bw.o = f.o;
  bw.lse = f.lse;
  bw.d_o = BshdTensor(dev_do.get(), 0, kHeads, kDim);
  bw.dq = BshdTensor(dev_dq.get(), 0, kHeads, kDim);
  bw.dk = BshdTensor(dev_dk.get(), 0, kHeads, kDim);
  bw.dv = BshdTensor(dev_dv.get(), 0, kHeads, kDim);
  std::size_t bwd_bytes = 0;
  ASSERT_TRUE(WorkspaceSize(bw, &bwd_bytes).ok()) << spillway_attention_last_error_message();
  DeviceBuffer<unsigned char> bwd_ws(bwd_bytes);
  dev_dq.Poison();
  dev_dk.Poison();
  dev_dv.Poison();
  const Status bs = Launch(bw, bwd_ws.get(), bwd_bytes, nullptr);
  ASSERT_TRUE(bs.ok()) << bs.ToString();
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(spillway_attention_sdpa_varlen_status(bwd_ws.get(), nullptr, &word),
            SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE);
  EXPECT_EQ(word.first_bad_sequence, 1);
  const std::vector<float> dq = Decode(dev_dq.Download(), dtype);
  const std::vector<float> dk = Decode(dev_dk.Download(), dtype);
  EXPECT_TRUE(AllNan(TokenRows(dq, 37, 150, width))) << "sequence 1's dq was written";
  EXPECT_TRUE(AllNan(TokenRows(dk, 170, 200, width))) << "sequence 1's dk was written";
  for (auto [first, last] : {std::pair{0, 37}, {150, 190}}) {
    EXPECT_LT(
        RelativeError(TokenRows(dq, first, last, width), TokenRows(dq_ref, first, last, width)),
        Tolerance(dtype))
        << "dq rows " << first << ".." << last;
  }
  for (auto [first, last] : {std::pair{0, 170}, {200, 330}}) {
    EXPECT_LT(
        RelativeError(TokenRows(dk, first, last, width), TokenRows(dk_ref, first, last, width)),
        Tolerance(dtype))
        << "dk rows " << first << ".." << last;
  }
}

struct AdditiveConfig {
  spillway_attention_dtype_t dtype;
  int batch, target_len, source_len, units, value_dim;
  std::vector<int> source_lengths;
};

class AdditiveGpuTest : public ::testing::TestWithParam<AdditiveConfig> {};

TEST_P(AdditiveGpuTest, ForwardAndBackwardMatchReference) {
  const AdditiveConfig& cfg = GetParam();
  std::mt19937 gen(std::random_device{}());
  ref::AdditiveShape shape{cfg.batch, cfg.target_len, cfg.source_len,
                           cfg.units, cfg.value_dim,  cfg.source_lengths};
  const std::size_t nq = std::size_t(cfg.batch) * cfg.target_len * cfg.units;
  const std::size_t nk = std::size_t(cfg.batch) * cfg.source_len * cfg.units;
  const std::size_t nval = std::size_t(cfg.batch) * cfg.source_len * cfg.value_dim;
  const std::size_t nctx = std::size_t(cfg.batch) * cfg.target_len * cfg.value_dim;
  const auto qp = RandomInput(nq, gen, cfg.dtype, 0.5f), kp = RandomInput(nk, gen, cfg.dtype, 0.5f),
             values = RandomInput(nval, gen, cfg.dtype), dctx = RandomInput(nctx, gen, cfg.dtype);
  std::vector<float> attention_v(cfg.units);
  std::normal_distribution<float> vd(0.0f, 1.0f / std::sqrt(float(cfg.units)));
  for (float& x : attention_v) x = vd(gen);
  std::vector<float> ctx_ref(nctx), lse_ref(std::size_t(cfg.batch) * cfg.target_len);
  ASSERT_EQ(ref::AdditiveForward(shape, qp.data(), kp.data(), values.data(), attention_v.data(),
                                 ctx_ref.data(), lse_ref.data()),
            "");
  std::vector<float> dq_ref(nq), dk_ref(nk), dval_ref(nval), dv_ref(cfg.units);
  ASSERT_EQ(ref::AdditiveBackward(shape, qp.data(), kp.data(), values.data(), attention_v.data(),
                                  dctx.data(), dq_ref.data(), dk_ref.data(), dval_ref.data(),
                                  dv_ref.data()),
            "");

  DeviceBuffer<uint16_t> d_qp(Encode(qp, cfg.dtype)), d_kp(Encode(kp, cfg.dtype)),
      d_val(Encode(values, cfg.dtype)), d_dctx(Encode(dctx, cfg.dtype)), d_ctx(nctx), d_dq(nq),
      d_dk(nk), d_dval(nval);
  DeviceBuffer<float> d_v(attention_v), d_lse(lse_ref.size()), d_dv(cfg.units);
  DeviceBuffer<int32_t> d_len(
      std::vector<int32_t>(cfg.source_lengths.begin(), cfg.source_lengths.end()));
  auto rows = [](void* p, int len, int width) {
    return spillway_attention_tensor_t{p, int64_t{len} * width, 0, width};
  };
  spillway_attention_additive_forward_args_t f{};
  f.problem = {cfg.dtype,
               cfg.batch,
               cfg.target_len,
               cfg.source_len,
               cfg.units,
               cfg.value_dim,
               cfg.source_lengths.empty() ? nullptr : d_len.get()};
  f.query_proj = rows(d_qp.get(), cfg.target_len, cfg.units);
  f.key_proj = rows(d_kp.get(), cfg.source_len, cfg.units);
  f.values = rows(d_val.get(), cfg.source_len, cfg.value_dim);
  f.attention_v = d_v.get();
  f.context = rows(d_ctx.get(), cfg.target_len, cfg.value_dim);
  f.lse = d_lse.get();
  d_ctx.Poison();
  d_lse.Poison();
  std::size_t fwd_ws_bytes = 0;  // the source-length status block, or nothing
  ASSERT_TRUE(WorkspaceSize(f, &fwd_ws_bytes).ok()) << spillway_attention_last_error_message();
  DeviceBuffer<unsigned char> fwd_ws(fwd_ws_bytes);
  const Status fs = Launch(f, fwd_ws_bytes ? fwd_ws.get() : nullptr, fwd_ws_bytes, nullptr);
  ASSERT_TRUE(fs.ok()) << fs.ToString();
  CUDA_OK(cudaDeviceSynchronize());
  if (!cfg.source_lengths.empty()) {
    EXPECT_TRUE(AdditiveLengthsStatus(fwd_ws.get(), nullptr).ok());
  }
  const double tol = Tolerance(cfg.dtype);
  EXPECT_LT(RelativeError(Decode(d_ctx.Download(), cfg.dtype), ctx_ref), tol) << "context";
  EXPECT_LT(RelativeError(d_lse.Download(), lse_ref), 1e-3) << "lse";

  spillway_attention_additive_backward_args_t b{};
  b.problem = f.problem;
  b.query_proj = f.query_proj;
  b.key_proj = f.key_proj;
  b.values = f.values;
  b.attention_v = f.attention_v;
  b.context = f.context;
  b.lse = f.lse;
  b.d_context = rows(d_dctx.get(), cfg.target_len, cfg.value_dim);
  b.d_query_proj = rows(d_dq.get(), cfg.target_len, cfg.units);
  b.d_key_proj = rows(d_dk.get(), cfg.source_len, cfg.units);
  b.d_values = rows(d_dval.get(), cfg.source_len, cfg.value_dim);
  b.d_attention_v = d_dv.get();
  std::size_t ws_bytes = 0;
  ASSERT_TRUE(WorkspaceSize(b, &ws_bytes).ok());
  DeviceBuffer<unsigned char> ws(ws_bytes);
  d_dq.Poison();
  d_dk.Poison();
  d_dval.Poison();
  d_dv.Poison();
  const Status bs = Launch(b, ws.get(), ws_bytes, nullptr);
  ASSERT_TRUE(bs.ok()) << bs.ToString();
  CUDA_OK(cudaDeviceSynchronize());
  if (!cfg.source_lengths.empty()) {
    EXPECT_TRUE(AdditiveLengthsStatus(ws.get(), nullptr).ok());
  }
  EXPECT_LT(RelativeError(Decode(d_dq.Download(), cfg.dtype), dq_ref), tol) << "d_query_proj";
  EXPECT_LT(RelativeError(Decode(d_dk.Download(), cfg.dtype), dk_ref), tol) << "d_key_proj";
  EXPECT_LT(RelativeError(Decode(d_dval.Download(), cfg.dtype), dval_ref), tol) << "d_values";
  EXPECT_LT(RelativeError(d_dv.Download(), dv_ref), tol) << "d_attention_v";
}

INSTANTIATE_TEST_SUITE_P(
    Additive, AdditiveGpuTest,
    ::testing::Values(AdditiveConfig{SPILLWAY_ATTENTION_FP16, 2, 37, 45, 64, 32, {}},
                      AdditiveConfig{SPILLWAY_ATTENTION_BF16, 2, 40, 33, 128, 96, {33, 20}},
                      AdditiveConfig{SPILLWAY_ATTENTION_FP16, 1, 16, 16, 512, 512, {}},
                      AdditiveConfig{SPILLWAY_ATTENTION_BF16, 3, 5, 70, 300, 20, {0, 70, 1}}));

// Sequence 1's length is above source_len and sequence 2's negative: both must be reported and
// left untouched (no read past source_len, no clamping), sequence 0 computed as usual. (Before,
// both were silently clamped to [0, source_len].)
TEST(AdditiveLengthsGpuTest, BadSourceLengthsAreSkippedAndReported) {
  const auto dtype = SPILLWAY_ATTENTION_FP16;
  constexpr int kBatch = 3, kTarget = 20, kSource = 33, kUnits = 64, kDim = 32;
  std::mt19937 gen(std::random_device{}());
  const std::size_t nq = std::size_t{kBatch} * kTarget * kUnits;
  const std::size_t nk = std::size_t{kBatch} * kSource * kUnits;
  const std::size_t nval = std::size_t{kBatch} * kSource * kDim;
  const std::size_t nctx = std::size_t{kBatch} * kTarget * kDim;
  const auto qp = RandomInput(nq, gen, dtype, 0.5f), kp = RandomInput(nk, gen, dtype, 0.5f),
             values = RandomInput(nval, gen, dtype);
  std::vector<float> attention_v(kUnits, 0.1f);
  // The reference of sequence 0 alone (length 30): the first batch of every input.
  const ref::AdditiveShape one{1, kTarget, kSource, kUnits, kDim, {30}};
  std::vector<float> ctx_ref(std::size_t{kTarget} * kDim), lse_ref(kTarget);
  ASSERT_EQ(ref::AdditiveForward(one, qp.data(), kp.data(), values.data(), attention_v.data(),
                                 ctx_ref.data(), lse_ref.data()),
            "");
  DeviceBuffer<uint16_t> d_qp(Encode(qp, dtype)), d_kp(Encode(kp, dtype)),
      d_val(Encode(values, dtype)), d_ctx(nctx);
  DeviceBuffer<float> d_v(attention_v), d_lse(std::size_t{kBatch} * kTarget);
  DeviceBuffer<int32_t> d_len(std::vector<int32_t>{30, kSource + 1, -2});
  auto rows = [](void* p, int len, int width) {
    return spillway_attention_tensor_t{p, int64_t{len} * width, 0, width};
  };
  spillway_attention_additive_forward_args_t f{};
  f.problem = {dtype, kBatch, kTarget, kSource, kUnits, kDim, d_len.get()};
  f.query_proj = rows(d_qp.get(), kTarget, kUnits);
  f.key_proj = rows(d_kp.get(), kSource, kUnits);
  f.values = rows(d_val.get(), kSource, kDim);
  f.attention_v = d_v.get();
  f.context = rows(d_ctx.get(), kTarget, kDim);
  f.lse = d_lse.get();
  d_ctx.Poison();
  d_lse.Poison();
  std::size_t ws_bytes = 0;
  ASSERT_TRUE(WorkspaceSize(f, &ws_bytes).ok());
  ASSERT_EQ(ws_bytes, 256u);
  DeviceBuffer<unsigned char> ws(ws_bytes);
  ASSERT_TRUE(Launch(f, ws.get(), ws_bytes, nullptr).ok());
  spillway_attention_varlen_status_t word{};
  const Status status = AdditiveLengthsStatus(ws.get(), nullptr, &word);
  EXPECT_EQ(status.code(), SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE);
  EXPECT_EQ(word.errors, uint32_t{SPILLWAY_ATTENTION_VARLEN_SOURCE_TOO_LONG |
                                  SPILLWAY_ATTENTION_VARLEN_SOURCE_NEGATIVE});
  EXPECT_EQ(word.first_bad_sequence, 1);
  const std::vector<float> ctx = Decode(d_ctx.Download(), dtype), lse = d_lse.Download();
  const std::size_t row = std::size_t{kTarget} * kDim;
  EXPECT_LT(RelativeError(std::vector<float>(ctx.begin(), ctx.begin() + row), ctx_ref),
            Tolerance(dtype));
  EXPECT_LT(RelativeError(std::vector<float>(lse.begin(), lse.begin() + kTarget), lse_ref), 1e-3);
  EXPECT_TRUE(AllNan(std::vector<float>(ctx.begin() + row, ctx.end())));  // never written
  EXPECT_TRUE(AllNan(std::vector<float>(lse.begin() + kTarget, lse.end())));
}

}  // namespace
}  // namespace spillway::attention
