// Tests of the CPU reference attention: forward against a naive softmax written another way,
// gradients against finite differences, the bottom-right causal mask, varlen, GQA and bias
// broadcast each against an equivalent plain call, and additive attention likewise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "attention_kernels/reference/attention_reference.h"

namespace spillway::attention::reference {
namespace {

// sum(a * b) in double: the scalar loss whose gradients the backward passes compute.
double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += double(a[i]) * b[i];
  return sum;
}

std::vector<float> Random(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

// Everything one SDPA case needs, sized from its shape.
struct SdpaCase {
  SdpaShape shape;
  std::vector<float> q, k, v, d_o, bias;
  BiasView bias_view;

  explicit SdpaCase(SdpaShape s, unsigned seed = 1) : shape(std::move(s)) {
    const std::size_t dq = std::size_t(shape.TokensQ()) * shape.heads_q * shape.head_dim;
    const std::size_t dk = std::size_t(shape.TokensK()) * shape.heads_kv * shape.head_dim;
    q = Random(dq, seed);
    k = Random(dk, seed + 1);
    v = Random(dk, seed + 2);
    d_o = Random(dq, seed + 3);
  }
  // A full [batch, heads_q, seqlen_q, seqlen_k] bias.
  void AddFullBias(unsigned seed) {
    bias = Random(std::size_t(shape.batch) * shape.heads_q * shape.seqlen_q * shape.seqlen_k, seed);
    bias_view = {bias.data(), int64_t{shape.heads_q} * shape.seqlen_q * shape.seqlen_k,
                 int64_t{shape.seqlen_q} * shape.seqlen_k, shape.seqlen_k};
  }
  std::size_t OElems() const { return q.size(); }
  std::size_t LseElems() const { return std::size_t(shape.TokensQ()) * shape.heads_q; }
  void Forward(std::vector<float>& o, std::vector<float>& lse) const {
    o.assign(OElems(), 0.0f);
    lse.assign(LseElems(), 0.0f);
    EXPECT_EQ(SdpaForward(shape, q.data(), k.data(), v.data(), bias_view, o.data(), lse.data()),
              "");
  }
  double Loss() const {  // sum(O * dO): its gradients are the backward pass's outputs
    std::vector<float> o, lse;
    Forward(o, lse);
    return Dot(o, d_o);
  }
};

// A fixed-length shape (causal off, default scale).
SdpaShape Shape(int batch, int heads_q, int heads_kv, int seqlen_q, int seqlen_k, int head_dim) {
  SdpaShape s;
  s.batch = batch;
  s.heads_q = heads_q;
  s.heads_kv = heads_kv;
  s.seqlen_q = seqlen_q;
  s.seqlen_k = seqlen_k;
  s.head_dim = head_dim;
  return s;
}

TEST(SdpaReferenceTest, ForwardMatchesNaiveSoftmax) {
  SdpaShape s = Shape(2, 2, 2, 5, 7, 8);
  SdpaCase c(s);
  std::vector<float> o, lse;
  c.Forward(o, lse);
  // Naive: exp without max subtraction, normalise after the weighted sum.
  for (int b = 0; b < 2; ++b) {
    for (int h = 0; h < 2; ++h) {
      for (int i = 0; i < 5; ++i) {
        double denom = 0.0;
        std::vector<double> num(8, 0.0);
        for (int j = 0; j < 7; ++j) {
          double dot = 0.0;
          for (int d = 0; d < 8; ++d) {
            dot += c.q[((b * 5 + i) * 2 + h) * 8 + d] * c.k[((b * 7 + j) * 2 + h) * 8 + d];
          }
          const double w = std::exp(dot / std::sqrt(8.0));
          denom += w;
          for (int d = 0; d < 8; ++d) num[d] += w * c.v[((b * 7 + j) * 2 + h) * 8 + d];
        }
        for (int d = 0; d < 8; ++d) {
          EXPECT_NEAR(o[((b * 5 + i) * 2 + h) * 8 + d], num[d] / denom, 1e-6);
        }
        EXPECT_NEAR(lse[(b * 5 + i) * 2 + h], std::log(denom), 1e-5);
      }
    }
  }
}

// Central differences of Loss() with respect to some elements of `x`, against `grad`.
void CheckGradient(SdpaCase& c, std::vector<float>& x, const std::vector<float>& grad,
                   const char* name) {
  const float eps = 1.0f / 256;
  for (std::size_t i = 0; i < x.size(); i += 1 + x.size() / 13) {
    const float saved = x[i];
    x[i] = saved + eps;
    const double up = c.Loss();
    x[i] = saved - eps;
    const double down = c.Loss();
    x[i] = saved;
    EXPECT_NEAR(grad[i], (up - down) / (2 * eps), 2e-3) << name << "[" << i << "]";
  }
}

void CheckAllGradients(SdpaCase& c) {
  std::vector<float> dq(c.q.size()), dk(c.k.size()), dv(c.v.size());
  std::vector<float> dbias(c.bias.size(), 0.0f);
  EXPECT_EQ(SdpaBackward(c.shape, c.q.data(), c.k.data(), c.v.data(), c.bias_view, c.d_o.data(),
                         dq.data(), dk.data(), dv.data(), c.bias.empty() ? nullptr : dbias.data()),
            "");
  CheckGradient(c, c.q, dq, "dq");
  CheckGradient(c, c.k, dk, "dk");
  CheckGradient(c, c.v, dv, "dv");
  if (!c.bias.empty()) CheckGradient(c, c.bias, dbias, "dbias");
}

TEST(SdpaReferenceTest, GradientsMatchFiniteDifferences) {
  SdpaShape s = Shape(1, 2, 1, 4, 6, 4);
  s.causal = true;
  SdpaCase c(s, 7);
  c.AddFullBias(11);
  CheckAllGradients(c);
}

TEST(SdpaReferenceTest, CausalMaskIsBottomRightAligned) {
  SdpaShape s;
  s.seqlen_q = 3;
  s.seqlen_k = 5;
  s.head_dim = 4;
  s.causal = true;
  EXPECT_TRUE(s.Visible(0, 0, 2));  // query 0 sees keys 0..2
  EXPECT_FALSE(s.Visible(0, 0, 3));
  EXPECT_TRUE(s.Visible(0, 2, 4));  // the last query sees every key
  SdpaCase c(s);
  std::vector<float> o, lse;
  c.Forward(o, lse);
  // Query 0 of the causal call equals a plain call over the first three keys.
  SdpaShape plain = s;
  plain.causal = false;
  plain.seqlen_q = 1;
  plain.seqlen_k = 3;
  std::vector<float> o1(4), lse1(1);
  EXPECT_EQ(SdpaForward(plain, c.q.data(), c.k.data(), c.v.data(), {}, o1.data(), lse1.data()), "");
  for (int d = 0; d < 4; ++d) EXPECT_FLOAT_EQ(o[d], o1[d]);

  // More queries than keys: the first two rows see nothing (zero output, lse -inf).
  s.seqlen_q = 5;
  s.seqlen_k = 3;
  SdpaCase tall(s);
  tall.Forward(o, lse);
  EXPECT_EQ(lse[0], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(lse[1], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isfinite(lse[2]));
  for (int d = 0; d < 8; ++d) EXPECT_EQ(o[d], 0.0f);
  for (int d = 0; d < 4; ++d) EXPECT_FLOAT_EQ(o[2 * 4 + d], tall.v[d]);  // row 2 sees key 0 only
  CheckAllGradients(tall);
}

TEST(SdpaReferenceTest, VarlenEqualsPerSequenceCalls) {
  SdpaShape s = Shape(2, 2, 2, 5, 4, 4);
  s.causal = true;
  s.cu_seqlens_q = {0, 3, 8};
  s.cu_seqlens_k = {0, 4, 6};
  SdpaCase c(s);
  std::vector<float> o, lse;
  c.Forward(o, lse);
  std::vector<float> dq(c.q.size()), dk(c.k.size()), dv(c.v.size());
  EXPECT_EQ(SdpaBackward(s, c.q.data(), c.k.data(), c.v.data(), {}, c.d_o.data(), dq.data(),
                         dk.data(), dv.data(), nullptr),
            "");
  for (int b = 0; b < 2; ++b) {
    SdpaShape one = s;
    one.batch = 1;
    one.cu_seqlens_q.clear();
    one.cu_seqlens_k.clear();
    one.seqlen_q = s.LenQ(b);
    one.seqlen_k = s.LenK(b);
    const std::size_t qo = std::size_t(s.FirstTokenQ(b)) * 2 * 4;
    const std::size_t ko = std::size_t(s.FirstTokenK(b)) * 2 * 4;
    std::vector<float> o1(one.seqlen_q * 8), lse1(one.seqlen_q * 2);
    EXPECT_EQ(SdpaForward(one, c.q.data() + qo, c.k.data() + ko, c.v.data() + ko, {}, o1.data(),
                          lse1.data()),
              "");
    std::vector<float> dq1(o1.size()), dk1(one.seqlen_k * 8), dv1(one.seqlen_k * 8);
    EXPECT_EQ(SdpaBackward(one, c.q.data() + qo, c.k.data() + ko, c.v.data() + ko, {},
                           c.d_o.data() + qo, dq1.data(), dk1.data(), dv1.data(), nullptr),
              "");
    for (std::size_t n = 0; n < o1.size(); ++n) {
      EXPECT_EQ(o[qo + n], o1[n]);
      EXPECT_EQ(dq[qo + n], dq1[n]);
    }
    for (std::size_t n = 0; n < lse1.size(); ++n) EXPECT_EQ(lse[qo / 4 + n], lse1[n]);
    for (std::size_t n = 0; n < dk1.size(); ++n) {
      EXPECT_EQ(dk[ko + n], dk1[n]);
      EXPECT_EQ(dv[ko + n], dv1[n]);
    }
  }
}

// A shape the reference cannot compute (the kernels would reject it on the host, or skip the
// sequence and report it in the varlen status) is an error naming the input; nothing is written.
TEST(SdpaReferenceTest, BadShapesAreErrorsAndWriteNothing) {
  SdpaShape valid = Shape(2, 2, 2, 5, 4, 4);
  valid.cu_seqlens_q = {0, 3, 8};
  valid.cu_seqlens_k = {0, 4, 6};
  const SdpaCase c(valid);  // buffers sized for `valid`: no bad shape below reads them
  ASSERT_EQ(SdpaShapeError(valid), "");
  const struct {
    std::function<void(SdpaShape&)> edit;
    std::string message;
  } kCases[] = {
      {[](SdpaShape& s) {
         s.cu_seqlens_q = {0, 3};
       },
       "cu_seqlens_q has 2 and cu_seqlens_k 3 entries; both must be empty or have batch+1 (3)"},
      {[](SdpaShape& s) {
         s.cu_seqlens_k = {0, 4, 6, 6};
       },
       "cu_seqlens_q has 3 and cu_seqlens_k 4 entries; both must be empty or have batch+1 (3)"},
      {[](SdpaShape& s) { s.cu_seqlens_q.clear(); },
       "cu_seqlens_q has 0 and cu_seqlens_k 3 entries; both must be empty or have batch+1 (3)"},
      {[](SdpaShape& s) { s.heads_kv = 4; }, "heads_q (2) must be a multiple of heads_kv (4)"},
      {[](SdpaShape& s) { s.heads_q = 3; }, "heads_q (3) must be a multiple of heads_kv (2)"},
      {[](SdpaShape& s) { s.heads_kv = 0; }, "heads_kv is 0; it must be at least 1"},
      {[](SdpaShape& s) { s.batch = 0; }, "batch is 0; it must be at least 1"},
      {[](SdpaShape& s) { s.seqlen_q = 4; },
       "cu_seqlens_q: sequence 1 has 5 tokens, more than seqlen_q = 4 (declare the true maximum; "
       "the kernels skip such a sequence)"},
      {[](SdpaShape& s) { s.seqlen_k = 3; },
       "cu_seqlens_k: sequence 0 has 4 tokens, more than seqlen_k = 3 (declare the true maximum; "
       "the kernels skip such a sequence)"},
      {[](SdpaShape& s) {
         s.cu_seqlens_k = {0, 4, 3};
       },
       "cu_seqlens_k at sequence 0 is negative, decreasing or past cu_seqlens_k[batch] ([0] = 0, "
       "[1] = 4, [batch] = 3)"},
      {[](SdpaShape& s) {
         s.cu_seqlens_q = {-1, 3, 8};
       },
       "cu_seqlens_q at sequence 0 is negative, decreasing or past cu_seqlens_q[batch] ([0] = -1, "
       "[1] = 3, [batch] = 8)"},
  };
  const float kSentinel = 7.0f;
  for (const auto& bad : kCases) {
    SdpaShape s = valid;
    bad.edit(s);
    EXPECT_EQ(SdpaShapeError(s), bad.message);
    std::vector<float> o(c.OElems(), kSentinel), lse(c.LseElems(), kSentinel);
    EXPECT_EQ(SdpaForward(s, c.q.data(), c.k.data(), c.v.data(), {}, o.data(), lse.data()),
              bad.message);
    EXPECT_EQ(o, std::vector<float>(o.size(), kSentinel));
    EXPECT_EQ(lse, std::vector<float>(lse.size(), kSentinel));
    std::vector<float> dq(c.q.size(), kSentinel), dk(c.k.size(), kSentinel),
        dv(c.v.size(), kSentinel);
    EXPECT_EQ(SdpaBackward(s, c.q.data(), c.k.data(), c.v.data(), {}, c.d_o.data(), dq.data(),
                           dk.data(), dv.data(), nullptr),
              bad.message);
    EXPECT_EQ(dq, std::vector<float>(dq.size(), kSentinel));
    EXPECT_EQ(dk, std::vector<float>(dk.size(), kSentinel));
    EXPECT_EQ(dv, std::vector<float>(dv.size(), kSentinel));
  }
  SdpaShape longest = valid;  // lengths equal to the declared maxima are valid
  longest.cu_seqlens_q = {0, 5, 10};
  longest.cu_seqlens_k = {0, 4, 4};
  EXPECT_EQ(SdpaShapeError(longest), "");
}

TEST(SdpaReferenceTest, GroupedQueryEqualsRepeatedKvHeads) {
  SdpaShape s = Shape(2, 4, 2, 3, 5, 4);
  SdpaCase c(s);
  SdpaShape full = s;
  full.heads_kv = 4;
  std::vector<float> k4, v4;  // KV head h/2 repeated for query head h
  for (int t = 0; t < s.TokensK(); ++t) {
    for (int h = 0; h < 4; ++h) {
      for (int d = 0; d < 4; ++d) {
        k4.push_back(c.k[(t * 2 + h / 2) * 4 + d]);
        v4.push_back(c.v[(t * 2 + h / 2) * 4 + d]);
      }
    }
  }
  std::vector<float> o, lse, o4(c.q.size()), lse4(c.LseElems());
  c.Forward(o, lse);
  EXPECT_EQ(SdpaForward(full, c.q.data(), k4.data(), v4.data(), {}, o4.data(), lse4.data()), "");
  EXPECT_EQ(o, o4);
  EXPECT_EQ(lse, lse4);
  std::vector<float> dq(c.q.size()), dk(c.k.size()), dv(c.v.size());
  std::vector<float> dq4(c.q.size()), dk4(k4.size()), dv4(v4.size());
  EXPECT_EQ(SdpaBackward(s, c.q.data(), c.k.data(), c.v.data(), {}, c.d_o.data(), dq.data(),
                         dk.data(), dv.data(), nullptr),
            "");
  EXPECT_EQ(SdpaBackward(full, c.q.data(), k4.data(), v4.data(), {}, c.d_o.data(), dq4.data(),
                         dk4.data(), dv4.data(), nullptr),
            "");
  ExpectNear(dq, dq4, 1e-6);
  for (int t = 0; t < s.TokensK(); ++t) {
    for (int hk = 0; hk < 2; ++hk) {
      for (int d = 0; d < 4; ++d) {
        const auto at = [&](int h) { return (t * 4 + h) * 4 + d; };
        EXPECT_NEAR(dk[(t * 2 + hk) * 4 + d], dk4[at(2 * hk)] + dk4[at(2 * hk + 1)], 1e-6);
        EXPECT_NEAR(dv[(t * 2 + hk) * 4 + d], dv4[at(2 * hk)] + dv4[at(2 * hk + 1)], 1e-6);
      }
    }
  }
}

TEST(SdpaReferenceTest, BroadcastBiasEqualsMaterialisedBias) {
  SdpaShape s = Shape(2, 3, 3, 4, 5, 4);
  // Bias [1, 1, 4, 5] broadcast over batch and heads, and [2, 1, 1, 5] over heads and rows.
  const std::vector<float> shared = Random(4 * 5, 21);
  const std::vector<float> per_key = Random(2 * 5, 22);
  struct Layout {
    const std::vector<float>* data;
    BiasView view;
  };
  for (const Layout& l :
       {Layout{&shared, {shared.data(), 0, 0, 5}}, Layout{&per_key, {per_key.data(), 5, 0, 0}}}) {
    SdpaCase c(s);
    c.AddFullBias(1);
    for (int b = 0; b < 2; ++b) {
      for (int h = 0; h < 3; ++h) {
        for (int i = 0; i < 4; ++i) {
          for (int j = 0; j < 5; ++j) c.bias[((b * 3 + h) * 4 + i) * 5 + j] = l.view.At(b, h, i, j);
        }
      }
    }
    std::vector<float> o_full, lse_full, o, lse(c.LseElems());
    c.Forward(o_full, lse_full);
    o.resize(c.OElems());
    EXPECT_EQ(SdpaForward(s, c.q.data(), c.k.data(), c.v.data(), l.view, o.data(), lse.data()), "");
    EXPECT_EQ(o, o_full);
    std::vector<float> dq(c.q.size()), dk(c.k.size()), dv(c.v.size());
    std::vector<float> dbias_full(c.bias.size(), 0.0f), dbias(l.data->size(), 0.0f);
    EXPECT_EQ(SdpaBackward(s, c.q.data(), c.k.data(), c.v.data(), c.bias_view, c.d_o.data(),
                           dq.data(), dk.data(), dv.data(), dbias_full.data()),
              "");
    EXPECT_EQ(SdpaBackward(s, c.q.data(), c.k.data(), c.v.data(), l.view, c.d_o.data(), dq.data(),
                           dk.data(), dv.data(), dbias.data()),
              "");
    std::vector<float> summed(dbias.size(), 0.0f);
    for (int b = 0; b < 2; ++b) {
      for (int h = 0; h < 3; ++h) {
        for (int i = 0; i < 4; ++i) {
          for (int j = 0; j < 5; ++j) {
            summed[b * l.view.batch_stride + h * l.view.head_stride + i * l.view.row_stride + j] +=
                dbias_full[((b * 3 + h) * 4 + i) * 5 + j];
          }
        }
      }
    }
    ExpectNear(dbias, summed, 1e-6);
  }
}

// Additive attention: one case's inputs, sized from its shape.
struct AdditiveCase {
  AdditiveShape shape;
  std::vector<float> qp, kp, values, v, d_context;
  explicit AdditiveCase(AdditiveShape s) : shape(std::move(s)) {
    qp = Random(std::size_t(shape.batch) * shape.target_len * shape.units, 31);
    kp = Random(std::size_t(shape.batch) * shape.source_len * shape.units, 32);
    values = Random(std::size_t(shape.batch) * shape.source_len * shape.value_dim, 33);
    v = Random(shape.units, 34);
    d_context = Random(std::size_t(shape.batch) * shape.target_len * shape.value_dim, 35);
  }
  void Forward(std::vector<float>& context, std::vector<float>& lse) const {
    context.assign(std::size_t(shape.batch) * shape.target_len * shape.value_dim, 0.0f);
    lse.assign(std::size_t(shape.batch) * shape.target_len, 0.0f);
    ASSERT_EQ(AdditiveForward(shape, qp.data(), kp.data(), values.data(), v.data(), context.data(),
                              lse.data()),
              "");
  }
  double Loss() const {
    std::vector<float> c, lse;
    Forward(c, lse);
    return Dot(c, d_context);
  }
};

TEST(AdditiveReferenceTest, ForwardMatchesNaiveSoftmax) {
  AdditiveCase c({1, 3, 4, 5, 2, {}});
  std::vector<float> context, lse;
  c.Forward(context, lse);
  for (int t = 0; t < 3; ++t) {
    double denom = 0.0, num[2] = {0.0, 0.0};
    for (int s = 0; s < 4; ++s) {
      double e = 0.0;
      for (int u = 0; u < 5; ++u) e += c.v[u] * std::tanh(c.qp[t * 5 + u] + c.kp[s * 5 + u]);
      denom += std::exp(e);
      for (int d = 0; d < 2; ++d) num[d] += std::exp(e) * c.values[s * 2 + d];
    }
    for (int d = 0; d < 2; ++d) EXPECT_NEAR(context[t * 2 + d], num[d] / denom, 1e-6);
    EXPECT_NEAR(lse[t], std::log(denom), 1e-5);
  }
}

TEST(AdditiveReferenceTest, GradientsMatchFiniteDifferences) {
  AdditiveCase c({2, 3, 4, 5, 3, {4, 2}});
  std::vector<float> dq(c.qp.size()), dk(c.kp.size()), dval(c.values.size()), dv(c.v.size());
  ASSERT_EQ(AdditiveBackward(c.shape, c.qp.data(), c.kp.data(), c.values.data(), c.v.data(),
                             c.d_context.data(), dq.data(), dk.data(), dval.data(), dv.data()),
            "");
  const float eps = 1.0f / 256;
  auto check = [&](std::vector<float>& x, const std::vector<float>& grad, const char* name) {
    for (std::size_t i = 0; i < x.size(); i += 1 + x.size() / 11) {
      const float saved = x[i];
      x[i] = saved + eps;
      const double up = c.Loss();
      x[i] = saved - eps;
      const double down = c.Loss();
      x[i] = saved;
      EXPECT_NEAR(grad[i], (up - down) / (2 * eps), 2e-3) << name << "[" << i << "]";
    }
  };
  check(c.qp, dq, "d_query_proj");
  check(c.kp, dk, "d_key_proj");
  check(c.values, dval, "d_values");
  check(c.v, dv, "d_attention_v");
}

TEST(AdditiveReferenceTest, SourceLengthsMaskLikeShorterSources) {
  AdditiveCase c({1, 3, 6, 4, 2, {4}});
  std::vector<float> context, lse;
  c.Forward(context, lse);
  AdditiveCase shorter = c;
  shorter.shape.source_len = 4;
  shorter.shape.source_lengths.clear();
  shorter.kp.resize(4 * 4);
  shorter.values.resize(4 * 2);
  std::vector<float> context4, lse4;
  shorter.Forward(context4, lse4);
  EXPECT_EQ(context, context4);
  EXPECT_EQ(lse, lse4);
  c.shape.source_lengths = {0};  // no source at all: zero context, lse -inf
  c.Forward(context, lse);
  EXPECT_EQ(lse[0], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(context[0], 0.0f);
  c.shape.source_lengths = {6};  // all of source_len: the same as no lengths
  c.Forward(context, lse);
  AdditiveCase all = c;
  all.shape.source_lengths.clear();
  std::vector<float> context_all, lse_all;
  all.Forward(context_all, lse_all);
  EXPECT_EQ(context, context_all);
  EXPECT_EQ(lse, lse_all);
}

// A length the reference cannot honour is an error naming the entry, never clamped, and nothing
// is written (the outputs keep their sentinel).
TEST(AdditiveReferenceTest, BadSourceLengthsAreErrorsNotClamped) {
  AdditiveCase c({2, 3, 6, 4, 2, {4, 2}});
  const float kSentinel = 7.0f;
  const struct {
    std::vector<int> lengths;
    const char* message;
  } kCases[] = {
      {{4, 7}, "source_lengths[1] is 7; it must be in [0, source_len = 6]"},
      {{-1, 2}, "source_lengths[0] is -1; it must be in [0, source_len = 6]"},
      {{4}, "source_lengths has 1 entries; it must be empty or have batch (2)"},
      {{4, 2, 1}, "source_lengths has 3 entries; it must be empty or have batch (2)"},
  };
  for (const auto& bad : kCases) {
    c.shape.source_lengths = bad.lengths;
    EXPECT_EQ(AdditiveShapeError(c.shape), bad.message);
    std::vector<float> context(2 * 3 * 2, kSentinel), lse(2 * 3, kSentinel);
    EXPECT_EQ(AdditiveForward(c.shape, c.qp.data(), c.kp.data(), c.values.data(), c.v.data(),
                              context.data(), lse.data()),
              bad.message);
    EXPECT_EQ(context, std::vector<float>(context.size(), kSentinel));
    EXPECT_EQ(lse, std::vector<float>(lse.size(), kSentinel));
    std::vector<float> dq(c.qp.size(), kSentinel), dk(c.kp.size(), kSentinel),
        dval(c.values.size(), kSentinel), dv(c.v.size(), kSentinel);
    EXPECT_EQ(AdditiveBackward(c.shape, c.qp.data(), c.kp.data(), c.values.data(), c.v.data(),
                               c.d_context.data(), dq.data(), dk.data(), dval.data(), dv.data()),
              bad.message);
    EXPECT_EQ(dq, std::vector<float>(dq.size(), kSentinel));
    EXPECT_EQ(dv, std::vector<float>(dv.size(), kSentinel));
  }
  c.shape.source_lengths = {0, 6};  // both ends of the range are valid
  EXPECT_EQ(AdditiveShapeError(c.shape), "");
  c.shape.source_lengths.clear();
  c.shape.units = 0;
  EXPECT_EQ(AdditiveShapeError(c.shape), "units is 0; it must be at least 1");
}

}  // namespace
}  // namespace spillway::attention::reference
