// CPU reference attention in double precision: forward by an explicit softmax per row, backward
// from the probabilities recomputed exactly (dS = P * (dP - rowsum(P * dP))).
#include "attention_kernels/reference/attention_reference.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace spillway::attention::reference {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The probabilities of one query row over its sequence's keys (0 where masked) and the row's
// log-sum-exp; returns false (all zero, lse -inf) when the row sees no key.
struct RowSoftmax {
  std::vector<double> p;
  double lse = kNegInf;
};

}  // namespace

int SdpaShape::LenQ(int b) const {
  return varlen() ? cu_seqlens_q[b + 1] - cu_seqlens_q[b] : seqlen_q;
}
int SdpaShape::LenK(int b) const {
  return varlen() ? cu_seqlens_k[b + 1] - cu_seqlens_k[b] : seqlen_k;
}
int SdpaShape::FirstTokenQ(int b) const { return varlen() ? cu_seqlens_q[b] : b * seqlen_q; }
int SdpaShape::FirstTokenK(int b) const { return varlen() ? cu_seqlens_k[b] : b * seqlen_k; }
int SdpaShape::TokensQ() const { return varlen() ? cu_seqlens_q[batch] : batch * seqlen_q; }
int SdpaShape::TokensK() const { return varlen() ? cu_seqlens_k[batch] : batch * seqlen_k; }
double SdpaShape::Scale() const { return scale != 0.0 ? scale : 1.0 / std::sqrt(double(head_dim)); }
bool SdpaShape::Visible(int b, int i, int j) const { return !causal || j <= i + LenK(b) - LenQ(b); }

namespace {

// Why the first sequence whose offsets or length in `cu` break the kernels' per-sequence rules
// (VarlenSequenceErrors, src/workspace.h) cannot be computed, or "" when none does.
std::string VarlenOffsetsError(const std::vector<int>& cu, const char* which, int batch,
                               const char* max_name, int max_len) {
  const std::string name = std::string("cu_seqlens_") + which;
  for (int b = 0; b < batch; ++b) {
    const int start = cu[b];
    const int end = cu[b + 1];
    if (start < 0 || end < start || end > cu[batch]) {
      return name + " at sequence " + std::to_string(b) + " is negative, decreasing or past " +
             name + "[batch] ([" + std::to_string(b) + "] = " + std::to_string(start) + ", [" +
             std::to_string(b + 1) + "] = " + std::to_string(end) +
             ", [batch] = " + std::to_string(cu[batch]) + ")";
    }
    if (end - start > max_len) {
      return name + ": sequence " + std::to_string(b) + " has " + std::to_string(end - start) +
             " tokens, more than " + max_name + " = " + std::to_string(max_len) +
             " (declare the true maximum; the kernels skip such a sequence)";
    }
  }
  return {};
}

}  // namespace

std::string SdpaShapeError(const SdpaShape& s) {
  const struct {
    const char* name;
    int value;
  } sizes[] = {{"batch", s.batch},       {"heads_q", s.heads_q},   {"heads_kv", s.heads_kv},
               {"seqlen_q", s.seqlen_q}, {"seqlen_k", s.seqlen_k}, {"head_dim", s.head_dim}};
  for (const auto& size : sizes) {
    if (size.value < 1) {
      return std::string(size.name) + " is " + std::to_string(size.value) +
             "; it must be at least 1";
    }
  }
  if (s.heads_q % s.heads_kv != 0) {
    return "heads_q (" + std::to_string(s.heads_q) + ") must be a multiple of heads_kv (" +
           std::to_string(s.heads_kv) + ")";
  }
  if (s.cu_seqlens_q.empty() && s.cu_seqlens_k.empty()) return {};
  const std::size_t entries = std::size_t(s.batch) + 1;
  if (s.cu_seqlens_q.size() != entries || s.cu_seqlens_k.size() != entries) {
    return "cu_seqlens_q has " + std::to_string(s.cu_seqlens_q.size()) + " and cu_seqlens_k " +
           std::to_string(s.cu_seqlens_k.size()) +
           " entries; both must be empty or have batch+1 (" + std::to_string(entries) + ")";
  }
  if (std::string e = VarlenOffsetsError(s.cu_seqlens_q, "q", s.batch, "seqlen_q", s.seqlen_q);
      !e.empty()) {
    return e;
  }
  return VarlenOffsetsError(s.cu_seqlens_k, "k", s.batch, "seqlen_k", s.seqlen_k);
}

namespace {

// Indexing of the packed token-major host arrays.
struct SdpaIndex {
  const SdpaShape& s;
  std::size_t Q(int b, int h, int i) const {
    return (std::size_t(s.FirstTokenQ(b) + i) * s.heads_q + h) * s.head_dim;
  }
  std::size_t K(int b, int hk, int j) const {
    return (std::size_t(s.FirstTokenK(b) + j) * s.heads_kv + hk) * s.head_dim;
  }
  std::size_t Lse(int b, int h, int i) const {
    return std::size_t(s.FirstTokenQ(b) + i) * s.heads_q + h;
  }
  int KvHead(int h) const { return h / (s.heads_q / s.heads_kv); }
};

RowSoftmax Probabilities(const SdpaShape& s, const float* q, const float* k, const BiasView& bias,
                         int b, int h, int i) {
  const SdpaIndex ix{s};
  const int len_k = s.LenK(b);
  RowSoftmax row;
  row.p.assign(len_k, 0.0);
  std::vector<double> logits(len_k, kNegInf);
  double max_logit = kNegInf;
  for (int j = 0; j < len_k; ++j) {
    if (!s.Visible(b, i, j)) continue;
    double dot = 0.0;
    const float* qi = q + ix.Q(b, h, i);
    const float* kj = k + ix.K(b, ix.KvHead(h), j);
    for (int d = 0; d < s.head_dim; ++d) dot += double(qi[d]) * double(kj[d]);
    logits[j] = dot * s.Scale() + bias.At(b, h, i, j);
    max_logit = std::max(max_logit, logits[j]);
  }
  if (max_logit == kNegInf) return row;
  double sum = 0.0;
  for (int j = 0; j < len_k; ++j) {
    row.p[j] = logits[j] == kNegInf ? 0.0 : std::exp(logits[j] - max_logit);
    sum += row.p[j];
  }
  for (double& p : row.p) p /= sum;
  row.lse = max_logit + std::log(sum);
  return row;
}

}  // namespace

std::string SdpaForward(const SdpaShape& s, const float* q, const float* k, const float* v,
                        const BiasView& bias, float* o, float* lse) {
  if (std::string error = SdpaShapeError(s); !error.empty()) return error;
  const SdpaIndex ix{s};
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads_q; ++h) {
      for (int i = 0; i < s.LenQ(b); ++i) {
        const RowSoftmax row = Probabilities(s, q, k, bias, b, h, i);
        std::vector<double> out(s.head_dim, 0.0);
        for (int j = 0; j < s.LenK(b); ++j) {
          if (row.p[j] == 0.0) continue;
          const float* vj = v + ix.K(b, ix.KvHead(h), j);
          for (int d = 0; d < s.head_dim; ++d) out[d] += row.p[j] * double(vj[d]);
        }
        for (int d = 0; d < s.head_dim; ++d) o[ix.Q(b, h, i) + d] = float(out[d]);
        lse[ix.Lse(b, h, i)] = float(row.lse);
      }
    }
  }
  return {};
}

std::string SdpaBackward(const SdpaShape& s, const float* q, const float* k, const float* v,
                         const BiasView& bias, const float* d_o, float* dq, float* dk, float* dv,
                         float* dbias) {
  if (std::string error = SdpaShapeError(s); !error.empty()) return error;
  const SdpaIndex ix{s};
  const int dim = s.head_dim;
  std::fill(dq, dq + std::size_t(s.TokensQ()) * s.heads_q * dim, 0.0f);
  std::vector<double> dk_acc(std::size_t(s.TokensK()) * s.heads_kv * dim, 0.0);
  std::vector<double> dv_acc(dk_acc.size(), 0.0);
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads_q; ++h) {
      const int hk = ix.KvHead(h);
      for (int i = 0; i < s.LenQ(b); ++i) {
        const RowSoftmax row = Probabilities(s, q, k, bias, b, h, i);
        const float* doi = d_o + ix.Q(b, h, i);
        const float* qi = q + ix.Q(b, h, i);
        // dP[j] = dO_i . V_j, and the row's sum of P * dP.
        std::vector<double> dp(s.LenK(b), 0.0);
        double p_dot_dp = 0.0;
        for (int j = 0; j < s.LenK(b); ++j) {
          if (row.p[j] == 0.0) continue;
          const float* vj = v + ix.K(b, hk, j);
          for (int d = 0; d < dim; ++d) dp[j] += double(doi[d]) * double(vj[d]);
          p_dot_dp += row.p[j] * dp[j];
        }
        std::vector<double> dq_row(dim, 0.0);
        for (int j = 0; j < s.LenK(b); ++j) {
          if (row.p[j] == 0.0) continue;
          const double ds = row.p[j] * (dp[j] - p_dot_dp);
          const float* kj = k + ix.K(b, hk, j);
          const std::size_t kv_off = ix.K(b, hk, j);
          for (int d = 0; d < dim; ++d) {
            dv_acc[kv_off + d] += row.p[j] * double(doi[d]);
            dk_acc[kv_off + d] += ds * s.Scale() * double(qi[d]);
            dq_row[d] += ds * s.Scale() * double(kj[d]);
          }
          if (dbias != nullptr) {
            dbias[b * bias.batch_stride + h * bias.head_stride + i * bias.row_stride + j] +=
                float(ds);
          }
        }
        for (int d = 0; d < dim; ++d) dq[ix.Q(b, h, i) + d] = float(dq_row[d]);
      }
    }
  }
  for (std::size_t n = 0; n < dk_acc.size(); ++n) {
    dk[n] = float(dk_acc[n]);
    dv[n] = float(dv_acc[n]);
  }
  return {};
}

int AdditiveShape::LenS(int b) const {
  return source_lengths.empty() ? source_len : source_lengths[b];
}

std::string AdditiveShapeError(const AdditiveShape& sh) {
  const struct {
    const char* name;
    int value;
  } sizes[] = {{"batch", sh.batch},
               {"target_len", sh.target_len},
               {"source_len", sh.source_len},
               {"units", sh.units},
               {"value_dim", sh.value_dim}};
  for (const auto& size : sizes) {
    if (size.value < 1) {
      return std::string(size.name) + " is " + std::to_string(size.value) +
             "; it must be at least 1";
    }
  }
  if (sh.source_lengths.empty()) return {};
  if (sh.source_lengths.size() != static_cast<std::size_t>(sh.batch)) {
    return "source_lengths has " + std::to_string(sh.source_lengths.size()) +
           " entries; it must be empty or have batch (" + std::to_string(sh.batch) + ")";
  }
  for (int b = 0; b < sh.batch; ++b) {
    const int length = sh.source_lengths[b];
    if (length < 0 || length > sh.source_len) {
      return "source_lengths[" + std::to_string(b) + "] is " + std::to_string(length) +
             "; it must be in [0, source_len = " + std::to_string(sh.source_len) + "]";
    }
  }
  return {};
}

namespace {

// Energies e[s] of one target row, softmax probabilities and log-sum-exp (-inf when the
// sequence has no source).
RowSoftmax AdditiveRow(const AdditiveShape& sh, const float* query_proj, const float* key_proj,
                       const float* attention_v, int b, int t) {
  RowSoftmax row;
  const int len_s = sh.LenS(b);
  row.p.assign(sh.source_len, 0.0);
  if (len_s <= 0) return row;
  const float* qt = query_proj + (std::size_t(b) * sh.target_len + t) * sh.units;
  std::vector<double> e(len_s, 0.0);
  double max_e = kNegInf;
  for (int s = 0; s < len_s; ++s) {
    const float* ks = key_proj + (std::size_t(b) * sh.source_len + s) * sh.units;
    for (int u = 0; u < sh.units; ++u) e[s] += attention_v[u] * std::tanh(double(qt[u]) + ks[u]);
    max_e = std::max(max_e, e[s]);
  }
  double sum = 0.0;
  for (int s = 0; s < len_s; ++s) sum += (row.p[s] = std::exp(e[s] - max_e));
  for (int s = 0; s < len_s; ++s) row.p[s] /= sum;
  row.lse = max_e + std::log(sum);
  return row;
}

}  // namespace

std::string AdditiveForward(const AdditiveShape& sh, const float* query_proj, const float* key_proj,
                            const float* values, const float* attention_v, float* context,
                            float* lse) {
  if (std::string error = AdditiveShapeError(sh); !error.empty()) return error;
  for (int b = 0; b < sh.batch; ++b) {
    for (int t = 0; t < sh.target_len; ++t) {
      const RowSoftmax row = AdditiveRow(sh, query_proj, key_proj, attention_v, b, t);
      std::vector<double> c(sh.value_dim, 0.0);
      for (int s = 0; s < sh.LenS(b); ++s) {
        const float* vs = values + (std::size_t(b) * sh.source_len + s) * sh.value_dim;
        for (int d = 0; d < sh.value_dim; ++d) c[d] += row.p[s] * vs[d];
      }
      float* ct = context + (std::size_t(b) * sh.target_len + t) * sh.value_dim;
      for (int d = 0; d < sh.value_dim; ++d) ct[d] = float(c[d]);
      lse[std::size_t(b) * sh.target_len + t] = float(row.lse);
    }
  }
  return {};
}

std::string AdditiveBackward(const AdditiveShape& sh, const float* query_proj,
                             const float* key_proj, const float* values, const float* attention_v,
                             const float* d_context, float* d_query_proj, float* d_key_proj,
                             float* d_values, float* d_attention_v) {
  if (std::string error = AdditiveShapeError(sh); !error.empty()) return error;
  const std::size_t q_elems = std::size_t(sh.batch) * sh.target_len * sh.units;
  const std::size_t k_elems = std::size_t(sh.batch) * sh.source_len * sh.units;
  const std::size_t val_elems = std::size_t(sh.batch) * sh.source_len * sh.value_dim;
  std::vector<double> dq(q_elems, 0.0), dk(k_elems, 0.0), dval(val_elems, 0.0);
  std::vector<double> dvec(sh.units, 0.0);
  for (int b = 0; b < sh.batch; ++b) {
    for (int t = 0; t < sh.target_len; ++t) {
      const RowSoftmax row = AdditiveRow(sh, query_proj, key_proj, attention_v, b, t);
      const int len_s = sh.LenS(b);
      const float* dct = d_context + (std::size_t(b) * sh.target_len + t) * sh.value_dim;
      const std::size_t q_off = (std::size_t(b) * sh.target_len + t) * sh.units;
      // dalpha[s] = dc_t . values_s; de = p * (dalpha - sum_s p * dalpha).
      std::vector<double> dalpha(len_s > 0 ? len_s : 0, 0.0);
      double p_dot = 0.0;
      for (int s = 0; s < len_s; ++s) {
        const std::size_t v_off = (std::size_t(b) * sh.source_len + s) * sh.value_dim;
        for (int d = 0; d < sh.value_dim; ++d) {
          dalpha[s] += double(dct[d]) * values[v_off + d];
          dval[v_off + d] += row.p[s] * dct[d];
        }
        p_dot += row.p[s] * dalpha[s];
      }
      for (int s = 0; s < len_s; ++s) {
        const double de = row.p[s] * (dalpha[s] - p_dot);
        const std::size_t k_off = (std::size_t(b) * sh.source_len + s) * sh.units;
        for (int u = 0; u < sh.units; ++u) {
          const double th = std::tanh(double(query_proj[q_off + u]) + key_proj[k_off + u]);
          const double g = de * attention_v[u] * (1.0 - th * th);
          dq[q_off + u] += g;
          dk[k_off + u] += g;
          dvec[u] += de * th;
        }
      }
    }
  }
  for (std::size_t n = 0; n < q_elems; ++n) d_query_proj[n] = float(dq[n]);
  for (std::size_t n = 0; n < k_elems; ++n) d_key_proj[n] = float(dk[n]);
  for (std::size_t n = 0; n < val_elems; ++n) d_values[n] = float(dval[n]);
  for (int u = 0; u < sh.units; ++u) d_attention_v[u] = float(dvec[u]);
  return {};
}

}  // namespace spillway::attention::reference
