// Host-side validation of attention calls: the first rule a call breaks gives its status and a
// message naming the argument and the value; nothing here touches the GPU.
#include "attention_kernels/src/validate.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "attention_kernels/src/overlap.h"
#include "attention_kernels/src/tiling.h"

namespace spillway::attention {
namespace {

constexpr int64_t kMaxGridYZ = 65535;
constexpr int64_t kMaxSeqLen = int64_t{1} << 30;

Check Fail(spillway_attention_status_t status, std::string message) {
  return {status, std::move(message)};
}

std::string Num(int64_t v) { return std::to_string(v); }

bool AlignedTo(const void* p, uintptr_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

Check CheckDtype(spillway_attention_dtype_t dtype) {
  if (dtype != SPILLWAY_ATTENTION_FP16 && dtype != SPILLWAY_ATTENTION_BF16) {
    return Fail(SPILLWAY_ATTENTION_ERROR_UNSUPPORTED_DTYPE,
                "dtype " + Num(static_cast<int64_t>(dtype)) +
                    " is not supported (SPILLWAY_ATTENTION_FP16 = 0, SPILLWAY_ATTENTION_BF16 = 1)");
  }
  return {};
}

Check CheckRange(const char* name, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    return Fail(SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE, std::string(name) + " is " + Num(value) +
                                                            "; it must be in [" + Num(lo) + ", " +
                                                            Num(hi) + "]");
  }
  return {};
}

// What a tensor must satisfy. `vector_aligned`: 16-byte data and strides of 8 elements (the SDPA
// kernels move rows in 16-byte pieces). `output`: strides may not alias distinct elements.
struct TensorRule {
  const char* name;
  bool vector_aligned;
  bool output;
  bool uses_heads;
};

struct TensorExtent {
  int64_t batch;
  int64_t heads;
  int64_t seqlen;
  bool varlen;
};

Check CheckTensor(const spillway_attention_tensor_t& t, const TensorRule& rule,
                  const TensorExtent& extent) {
  const std::string name = rule.name;
  if (t.data == nullptr) {
    return Fail(SPILLWAY_ATTENTION_ERROR_NULL_POINTER, name + ".data is NULL");
  }
  if (t.batch_stride < 0 || t.head_stride < 0 || t.seq_stride < 0) {
    return Fail(SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE,
                name + " has a negative stride (batch " + Num(t.batch_stride) + ", head " +
                    Num(t.head_stride) + ", seq " + Num(t.seq_stride) + ")");
  }
  if (rule.vector_aligned) {
    if (!AlignedTo(t.data, 16)) {
      return Fail(SPILLWAY_ATTENTION_ERROR_MISALIGNED, name + ".data is not 16-byte aligned");
    }
    const bool strides_ok = t.seq_stride % 8 == 0 && (!rule.uses_heads || t.head_stride % 8 == 0) &&
                            (extent.varlen || t.batch_stride % 8 == 0);
    if (!strides_ok) {
      return Fail(SPILLWAY_ATTENTION_ERROR_MISALIGNED,
                  name + " strides must be multiples of 8 elements (batch " + Num(t.batch_stride) +
                      ", head " + Num(t.head_stride) + ", seq " + Num(t.seq_stride) + ")");
    }
  } else if (!AlignedTo(t.data, 2)) {
    return Fail(SPILLWAY_ATTENTION_ERROR_MISALIGNED, name + ".data is not 2-byte aligned");
  }
  if (rule.output) {
    const bool aliases = (extent.seqlen > 1 && t.seq_stride == 0) ||
                         (rule.uses_heads && extent.heads > 1 && t.head_stride == 0) ||
                         (!extent.varlen && extent.batch > 1 && t.batch_stride == 0);
    if (aliases) {
      return Fail(SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE,
                  name + " is an output and a zero stride would make its rows overlap");
    }
  }
  return {};
}

// INVALID_ARGUMENT when an output shares memory with another buffer (overlap.h).
Check CheckNoOverlap(std::initializer_list<BufferSpan> spans) {
  std::string overlap = FirstOverlap(spans);
  if (overlap.empty()) return {};
  return Fail(SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT, std::move(overlap));
}

Check CheckFloats(const char* name, const void* p) {
  if (p == nullptr) {
    return Fail(SPILLWAY_ATTENTION_ERROR_NULL_POINTER, std::string(name) + " is NULL");
  }
  if (!AlignedTo(p, 4)) {
    return Fail(SPILLWAY_ATTENTION_ERROR_MISALIGNED, std::string(name) + " is not 4-byte aligned");
  }
  return {};
}

Check CheckSdpaProblem(const spillway_attention_sdpa_problem_t& p) {
  if (Check c = CheckDtype(p.dtype); !c.ok()) return c;
  if (p.head_dim != 64 && p.head_dim != 128) {
    return Fail(SPILLWAY_ATTENTION_ERROR_UNSUPPORTED_HEAD_DIM,
                "head_dim " + Num(p.head_dim) + " is not supported (64 or 128)");
  }
  for (Check c : {CheckRange("batch", p.batch, 1, kMaxGridYZ),
                  CheckRange("num_heads_q", p.num_heads_q, 1, kMaxGridYZ),
                  CheckRange("num_heads_kv", p.num_heads_kv, 1, kMaxGridYZ),
                  CheckRange("seqlen_q", p.seqlen_q, 1, kMaxSeqLen),
                  CheckRange("seqlen_k", p.seqlen_k, 1, kMaxSeqLen)}) {
    if (!c.ok()) return c;
  }
  if (p.num_heads_q % p.num_heads_kv != 0) {
    return Fail(SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE,
                "num_heads_q (" + Num(p.num_heads_q) + ") must be a multiple of num_heads_kv (" +
                    Num(p.num_heads_kv) + ")");
  }
  if (!std::isfinite(p.softmax_scale)) {
    return Fail(SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT, "softmax_scale is not finite");
  }
  if (p.causal != 0 && p.causal != 1) {
    return Fail(SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT,
                "causal is " + Num(p.causal) + "; it must be 0 or 1");
  }
  if ((p.cu_seqlens_q == nullptr) != (p.cu_seqlens_k == nullptr)) {
    return Fail(SPILLWAY_ATTENTION_ERROR_NULL_POINTER,
                "cu_seqlens_q and cu_seqlens_k must both be set (varlen) or both be NULL");
  }
  if (p.cu_seqlens_q != nullptr &&
      (!AlignedTo(p.cu_seqlens_q, 4) || !AlignedTo(p.cu_seqlens_k, 4))) {
    return Fail(SPILLWAY_ATTENTION_ERROR_MISALIGNED, "cu_seqlens must be 4-byte aligned");
  }
  return {};
}

struct SdpaTensors {
  TensorExtent q;
  TensorExtent kv;
};

SdpaTensors Extents(const spillway_attention_sdpa_problem_t& p) {
  const bool varlen = p.cu_seqlens_q != nullptr;
  return {{p.batch, p.num_heads_q, p.seqlen_q, varlen},
          {p.batch, p.num_heads_kv, p.seqlen_k, varlen}};
}

// The spans of an SDPA call's q-shaped and kv-shaped tensors, its bias and its lse.
BufferSpan QSpan(const char* name, bool output, const spillway_attention_tensor_t& t,
                 const spillway_attention_sdpa_problem_t& p) {
  return TensorSpan(name, output, t, p.batch, p.num_heads_q, p.seqlen_q, p.head_dim, 2,
                    p.cu_seqlens_q != nullptr);
}
BufferSpan KvSpan(const char* name, bool output, const spillway_attention_tensor_t& t,
                  const spillway_attention_sdpa_problem_t& p) {
  return TensorSpan(name, output, t, p.batch, p.num_heads_kv, p.seqlen_k, p.head_dim, 2,
                    p.cu_seqlens_q != nullptr);
}
BufferSpan SdpaBiasSpan(const char* name, bool output, const spillway_attention_bias_t& b,
                        const spillway_attention_sdpa_problem_t& p) {
  return BiasSpan(name, output, b, p.batch, p.num_heads_q, p.seqlen_q, p.seqlen_k);
}
// Varlen: the first token's row only (the token count is on the device).
BufferSpan LseSpan(const char* name, bool output, const float* lse,
                   const spillway_attention_sdpa_problem_t& p) {
  const uint64_t tokens = p.cu_seqlens_q != nullptr
                              ? 1
                              : static_cast<uint64_t>(p.batch) * static_cast<uint64_t>(p.seqlen_q);
  return BytesSpan(name, output, lse, uint64_t{4} * tokens * static_cast<uint64_t>(p.num_heads_q));
}

// Bias slices the dBias kernel gives a grid row each: one per non-broadcast (batch, head).
int64_t BiasSlices(const spillway_attention_sdpa_problem_t& p, const spillway_attention_bias_t& b) {
  return (b.batch_stride == 0 ? 1 : int64_t{p.batch}) *
         (b.head_stride == 0 ? 1 : int64_t{p.num_heads_q});
}

Check CheckBias(const char* name, const spillway_attention_bias_t& b) {
  if (b.batch_stride < 0 || b.head_stride < 0 || b.row_stride < 0) {
    return Fail(SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE,
                std::string(name) + " has a negative stride (batch " + Num(b.batch_stride) +
                    ", head " + Num(b.head_stride) + ", row " + Num(b.row_stride) + ")");
  }
  if (!AlignedTo(b.data, 2)) {
    return Fail(SPILLWAY_ATTENTION_ERROR_MISALIGNED,
                std::string(name) + ".data is not 2-byte aligned");
  }
  return {};
}

Check CheckSdpaCommon(const spillway_attention_sdpa_problem_t& p,
                      const spillway_attention_tensor_t& q, const spillway_attention_tensor_t& k,
                      const spillway_attention_tensor_t& v, const spillway_attention_bias_t& bias,
                      const spillway_attention_tensor_t& o, const void* lse) {
  if (Check c = CheckSdpaProblem(p); !c.ok()) return c;
  const SdpaTensors e = Extents(p);
  for (Check c : {CheckTensor(q, {"q", true, false, true}, e.q),
                  CheckTensor(k, {"k", true, false, true}, e.kv),
                  CheckTensor(v, {"v", true, false, true}, e.kv),
                  CheckTensor(o, {"o", true, true, true}, e.q), CheckFloats("lse", lse)}) {
    if (!c.ok()) return c;
  }
  if (bias.data != nullptr) {
    if (Check c = CheckBias("bias", bias); !c.ok()) return c;
  }
  return {};
}

Check CheckAdditiveProblem(const spillway_attention_additive_problem_t& p) {
  if (Check c = CheckDtype(p.dtype); !c.ok()) return c;
  for (Check c : {CheckRange("batch", p.batch, 1, kMaxGridYZ),
                  CheckRange("target_len", p.target_len, 1, kMaxSeqLen),
                  CheckRange("source_len", p.source_len, 1, kMaxSeqLen),
                  CheckRange("units", p.units, 1, kAdditiveMaxUnits),
                  CheckRange("value_dim", p.value_dim, 1, kAdditiveMaxValueDim)}) {
    if (!c.ok()) return c;
  }
  const std::size_t smem = AdditiveKeyGradSmemBytes(p.units, p.value_dim);
  if (smem > kMaxSmemPerBlock) {
    return Fail(SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE,
                "units " + Num(p.units) + " with value_dim " + Num(p.value_dim) + " needs " +
                    Num(static_cast<int64_t>(smem)) + " bytes of shared memory per block; " +
                    Num(static_cast<int64_t>(kMaxSmemPerBlock)) + " is the limit");
  }
  if (p.source_lengths != nullptr && !AlignedTo(p.source_lengths, 4)) {
    return Fail(SPILLWAY_ATTENTION_ERROR_MISALIGNED, "source_lengths is not 4-byte aligned");
  }
  return {};
}

struct AdditiveExtents {
  TensorExtent target;
  TensorExtent source;
};

AdditiveExtents Extents(const spillway_attention_additive_problem_t& p) {
  return {{p.batch, 1, p.target_len, false}, {p.batch, 1, p.source_len, false}};
}

Check CheckAdditiveInputs(const spillway_attention_additive_problem_t& p,
                          const spillway_attention_tensor_t& query_proj,
                          const spillway_attention_tensor_t& key_proj,
                          const spillway_attention_tensor_t& values, const float* attention_v) {
  if (Check c = CheckAdditiveProblem(p); !c.ok()) return c;
  const AdditiveExtents e = Extents(p);
  for (Check c : {CheckTensor(query_proj, {"query_proj", false, false, false}, e.target),
                  CheckTensor(key_proj, {"key_proj", false, false, false}, e.source),
                  CheckTensor(values, {"values", false, false, false}, e.source),
                  CheckFloats("attention_v", attention_v)}) {
    if (!c.ok()) return c;
  }
  return {};
}

}  // namespace

Check ValidateSdpaForward(const spillway_attention_sdpa_forward_args_t& a) {
  const spillway_attention_sdpa_problem_t& p = a.problem;
  if (Check c = CheckSdpaCommon(p, a.q, a.k, a.v, a.bias, a.o, a.lse); !c.ok()) return c;
  return CheckNoOverlap({QSpan("o", true, a.o, p), LseSpan("lse", true, a.lse, p),
                         QSpan("q", false, a.q, p), KvSpan("k", false, a.k, p),
                         KvSpan("v", false, a.v, p), SdpaBiasSpan("bias", false, a.bias, p)});
}

namespace {

Check CheckBackwardOverlap(const spillway_attention_sdpa_backward_args_t& a) {
  const spillway_attention_sdpa_problem_t& p = a.problem;
  return CheckNoOverlap({QSpan("dq", true, a.dq, p), KvSpan("dk", true, a.dk, p),
                         KvSpan("dv", true, a.dv, p), SdpaBiasSpan("dbias", true, a.dbias, p),
                         QSpan("q", false, a.q, p), KvSpan("k", false, a.k, p),
                         KvSpan("v", false, a.v, p), SdpaBiasSpan("bias", false, a.bias, p),
                         QSpan("o", false, a.o, p), LseSpan("lse", false, a.lse, p),
                         QSpan("d_o", false, a.d_o, p)});
}

}  // namespace

Check ValidateSdpaBackward(const spillway_attention_sdpa_backward_args_t& a) {
  const spillway_attention_sdpa_problem_t& p = a.problem;
  if (Check c = CheckSdpaCommon(p, a.q, a.k, a.v, a.bias, a.o, a.lse); !c.ok()) return c;
  if (a.deterministic != 0 && a.deterministic != 1) {
    return Fail(SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT,
                "deterministic is " + Num(a.deterministic) + "; it must be 0 or 1");
  }
  const SdpaTensors e = Extents(p);
  for (Check c : {CheckTensor(a.d_o, {"d_o", true, false, true}, e.q),
                  CheckTensor(a.dq, {"dq", true, true, true}, e.q),
                  CheckTensor(a.dk, {"dk", true, true, true}, e.kv),
                  CheckTensor(a.dv, {"dv", true, true, true}, e.kv)}) {
    if (!c.ok()) return c;
  }
  if (a.dbias.data == nullptr) return CheckBackwardOverlap(a);
  if (a.bias.data == nullptr) {
    return Fail(SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT, "dbias is set but bias is NULL");
  }
  if (Check c = CheckBias("dbias", a.dbias); !c.ok()) return c;
  const bool same_pattern = (a.dbias.batch_stride == 0) == (a.bias.batch_stride == 0) &&
                            (a.dbias.head_stride == 0) == (a.bias.head_stride == 0) &&
                            (a.dbias.row_stride == 0) == (a.bias.row_stride == 0);
  if (!same_pattern) {
    return Fail(SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT,
                "dbias must broadcast (zero strides) over the same dimensions as bias");
  }
  if (a.bias.row_stride != 0 &&
      (int64_t{p.seqlen_q} + kSdpaBlockM - 1) / kSdpaBlockM > kMaxGridYZ) {
    return Fail(SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE,
                "dbias over " + Num(p.seqlen_q) + " query rows needs more than 65535 row tiles");
  }
  if (BiasSlices(p, a.dbias) > kMaxGridYZ) {
    return Fail(SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE,
                "dbias has " + Num(BiasSlices(p, a.dbias)) +
                    " (batch, head) slices; at most 65535 are supported");
  }
  return CheckBackwardOverlap(a);
}

namespace {

// The spans of an additive call's [batch, target|source, width] tensors and fp32 vectors.
BufferSpan RowsSpan(const char* name, bool output, const spillway_attention_tensor_t& t,
                    int64_t batch, int64_t rows, int64_t width) {
  return TensorSpan(name, output, t, batch, 1, rows, width, 2, false);
}
BufferSpan FloatsSpan(const char* name, bool output, const float* data, int64_t count) {
  return BytesSpan(name, output, data, uint64_t{4} * static_cast<uint64_t>(count));
}

}  // namespace

Check ValidateAdditiveForward(const spillway_attention_additive_forward_args_t& a) {
  const spillway_attention_additive_problem_t& p = a.problem;
  if (Check c = CheckAdditiveInputs(p, a.query_proj, a.key_proj, a.values, a.attention_v);
      !c.ok()) {
    return c;
  }
  if (Check c = CheckTensor(a.context, {"context", false, true, false}, Extents(p).target);
      !c.ok()) {
    return c;
  }
  if (Check c = CheckFloats("lse", a.lse); !c.ok()) return c;
  return CheckNoOverlap(
      {RowsSpan("context", true, a.context, p.batch, p.target_len, p.value_dim),
       FloatsSpan("lse", true, a.lse, int64_t{p.batch} * p.target_len),
       RowsSpan("query_proj", false, a.query_proj, p.batch, p.target_len, p.units),
       RowsSpan("key_proj", false, a.key_proj, p.batch, p.source_len, p.units),
       RowsSpan("values", false, a.values, p.batch, p.source_len, p.value_dim),
       FloatsSpan("attention_v", false, a.attention_v, p.units)});
}

Check ValidateAdditiveBackward(const spillway_attention_additive_backward_args_t& a) {
  const spillway_attention_additive_problem_t& p = a.problem;
  if (Check c = CheckAdditiveInputs(p, a.query_proj, a.key_proj, a.values, a.attention_v);
      !c.ok()) {
    return c;
  }
  const AdditiveExtents e = Extents(p);
  for (Check c : {CheckTensor(a.context, {"context", false, false, false}, e.target),
                  CheckFloats("lse", a.lse),
                  CheckTensor(a.d_context, {"d_context", false, false, false}, e.target),
                  CheckTensor(a.d_query_proj, {"d_query_proj", false, true, false}, e.target),
                  CheckTensor(a.d_key_proj, {"d_key_proj", false, true, false}, e.source),
                  CheckTensor(a.d_values, {"d_values", false, true, false}, e.source),
                  CheckFloats("d_attention_v", a.d_attention_v)}) {
    if (!c.ok()) return c;
  }
  return CheckNoOverlap(
      {RowsSpan("d_query_proj", true, a.d_query_proj, p.batch, p.target_len, p.units),
       RowsSpan("d_key_proj", true, a.d_key_proj, p.batch, p.source_len, p.units),
       RowsSpan("d_values", true, a.d_values, p.batch, p.source_len, p.value_dim),
       FloatsSpan("d_attention_v", true, a.d_attention_v, p.units),
       RowsSpan("query_proj", false, a.query_proj, p.batch, p.target_len, p.units),
       RowsSpan("key_proj", false, a.key_proj, p.batch, p.source_len, p.units),
       RowsSpan("values", false, a.values, p.batch, p.source_len, p.value_dim),
       FloatsSpan("attention_v", false, a.attention_v, p.units),
       RowsSpan("context", false, a.context, p.batch, p.target_len, p.value_dim),
       FloatsSpan("lse", false, a.lse, int64_t{p.batch} * p.target_len),
       RowsSpan("d_context", false, a.d_context, p.batch, p.target_len, p.value_dim)});
}

float ResolvedSoftmaxScale(const spillway_attention_sdpa_problem_t& p) {
  return p.softmax_scale != 0.0f
             ? p.softmax_scale
             : static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.head_dim)));
}

std::size_t AdditiveDeltaBytes(const spillway_attention_additive_problem_t& p) {
  return AlignWorkspace(std::size_t{4} * static_cast<std::size_t>(p.batch) *
                        static_cast<std::size_t>(p.target_len));
}

std::size_t AdditiveForwardWorkspaceBytes(const spillway_attention_additive_problem_t& p) {
  return AdditiveStatusBytes(p);
}

std::size_t AdditiveBackwardWorkspaceBytes(const spillway_attention_additive_problem_t& p) {
  const std::size_t tiles =
      (static_cast<std::size_t>(p.target_len) + kAdditiveTile - 1) / kAdditiveTile;
  return AdditiveStatusBytes(p) + AdditiveDeltaBytes(p) +
         AlignWorkspace(std::size_t{4} * static_cast<std::size_t>(p.batch) * tiles *
                        static_cast<std::size_t>(p.units));
}

Check ValidateWorkspace(std::size_t needed, const void* workspace, std::size_t bytes) {
  if (needed == 0) return {};
  if (bytes < needed) {
    return Fail(SPILLWAY_ATTENTION_ERROR_WORKSPACE_TOO_SMALL,
                "the call needs " + Num(static_cast<int64_t>(needed)) + " workspace bytes; " +
                    Num(static_cast<int64_t>(bytes)) + " were given");
  }
  if (workspace == nullptr) {
    return Fail(SPILLWAY_ATTENTION_ERROR_NULL_POINTER, "workspace is NULL");
  }
  if (!AlignedTo(workspace, kWorkspaceAlignment)) {
    return Fail(SPILLWAY_ATTENTION_ERROR_MISALIGNED, "workspace is not 256-byte aligned");
  }
  return {};
}

namespace {

struct ErrorBit {
  uint32_t bit;
  const char* what;
};

// "<subject>: <what of each bit set>; ... (first at sequence b)<advice>", INVALID_SHAPE.
template <std::size_t N>
Check DescribeStatus(const spillway_attention_varlen_status_t& status, const char* subject,
                     const ErrorBit (&bits)[N], const char* advice) {
  if (status.errors == 0) return {};
  std::string message = subject;
  const char* separator = ": ";
  uint32_t known = 0;
  for (const ErrorBit& e : bits) {
    known |= e.bit;
    if ((status.errors & e.bit) == 0) continue;
    message += separator;
    message += e.what;
    separator = "; ";
  }
  if ((status.errors & ~known) != 0) {
    message += separator;
    message += "unknown error bits " + Num(status.errors & ~known) + " (not a status block?)";
  }
  message += " (first at sequence " + Num(status.first_bad_sequence) + ")";
  message += advice;
  return Fail(SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE, std::move(message));
}

}  // namespace

Check DescribeVarlenStatus(const spillway_attention_varlen_status_t& status) {
  const ErrorBit kErrors[] = {
      {SPILLWAY_ATTENTION_VARLEN_Q_OFFSETS,
       "cu_seqlens_q is negative, decreasing or past cu_seqlens_q[batch]"},
      {SPILLWAY_ATTENTION_VARLEN_Q_TOO_LONG, "a query length exceeds seqlen_q"},
      {SPILLWAY_ATTENTION_VARLEN_K_OFFSETS,
       "cu_seqlens_k is negative, decreasing or past cu_seqlens_k[batch]"},
      {SPILLWAY_ATTENTION_VARLEN_K_TOO_LONG, "a key length exceeds seqlen_k"},
  };
  return DescribeStatus(status, "varlen", kErrors,
                        "; those sequences were not computed: declare the true maximum lengths or "
                        "fix the offsets");
}

Check DescribeSourceLengthsStatus(const spillway_attention_varlen_status_t& status) {
  const ErrorBit kErrors[] = {
      {SPILLWAY_ATTENTION_VARLEN_SOURCE_NEGATIVE, "a source length is negative"},
      {SPILLWAY_ATTENTION_VARLEN_SOURCE_TOO_LONG, "a source length exceeds source_len"},
  };
  return DescribeStatus(status, "source_lengths", kErrors,
                        "; those sequences were not computed: each source_lengths[b] must be in "
                        "[0, source_len]");
}

}  // namespace spillway::attention
