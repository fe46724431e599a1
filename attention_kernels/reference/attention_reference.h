// CPU reference of every attention kernel, accumulating in double: the ground truth the GPU
// tests compare against. Simple loops over dense host arrays, written for clarity, not speed.
#ifndef SPILLWAY_ATTENTION_KERNELS_REFERENCE_ATTENTION_REFERENCE_H_
#define SPILLWAY_ATTENTION_KERNELS_REFERENCE_ATTENTION_REFERENCE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace spillway::attention::reference {

// Shapes of a scaled dot-product attention call. Host layouts are packed token-major:
//   q, o, dq: [tokens_q, heads_q, head_dim]   k, v, dk, dv: [tokens_k, heads_kv, head_dim]
//   lse:      [tokens_q, heads_q]
// where sequence b, position i is token b*seqlen_q + i, or cu_seqlens_q[b] + i when varlen.
struct SdpaShape {
  int batch = 1;
  int heads_q = 1;
  int heads_kv = 1;
  int seqlen_q = 1;  // varlen: the largest length (longer sequences are errors)
  int seqlen_k = 1;
  int head_dim = 64;
  bool causal = false;  // bottom-right: key j visible to query i when j <= i + len_k - len_q
  double scale = 0.0;   // 0: 1/sqrt(head_dim)
  std::vector<int> cu_seqlens_q;  // empty: fixed length; else batch+1 offsets
  std::vector<int> cu_seqlens_k;

  // The accessors below REQUIRE: SdpaShapeError(*this) is empty.
  bool varlen() const { return !cu_seqlens_q.empty(); }
  int LenQ(int b) const;
  int LenK(int b) const;
  int FirstTokenQ(int b) const;
  int FirstTokenK(int b) const;
  int TokensQ() const;
  int TokensK() const;
  double Scale() const;
  bool Visible(int b, int i, int j) const;  // the causal mask (always true when not causal)
};

// An additive logit bias: element (b, h, i, j) at data[b*batch_stride + h*head_stride +
// i*row_stride + j]; zero strides broadcast. data nullptr: no bias.
struct BiasView {
  const float* data = nullptr;
  int64_t batch_stride = 0;
  int64_t head_stride = 0;
  int64_t row_stride = 0;
  double At(int b, int h, int i, int j) const {
    return data == nullptr ? 0.0 : data[b * batch_stride + h * head_stride + i * row_stride + j];
  }
};

// Why the reference cannot compute `shape` (one line naming the input and the value), or "" when
// it can: a size below 1; heads_q not a multiple of heads_kv; cu_seqlens_q and cu_seqlens_k not
// both empty or both of batch+1 entries; or, when varlen, a sequence whose offsets are negative,
// decreasing or past cu_seqlens[batch], or whose length exceeds seqlen_q / seqlen_k. The kernels
// skip such a sequence and report it in the varlen status (an INVALID_SHAPE call); the reference
// refuses the whole call instead, naming the first such sequence. Lengths are never clipped.
std::string SdpaShapeError(const SdpaShape& shape);

// o and lse; lse is -inf (and the output row 0) where a query sees no key.
// Returns SdpaShapeError(shape) and, when it is not empty, writes nothing.
[[nodiscard]] std::string SdpaForward(const SdpaShape& shape, const float* q, const float* k,
                                      const float* v, const BiasView& bias, float* o, float* lse);

// dq, dk, dv (overwritten) and, when dbias is not nullptr, the bias gradient accumulated (+=)
// into dbias with bias's strides, summed over broadcast dimensions. The caller zeroes dbias.
// Returns SdpaShapeError(shape) and, when it is not empty, writes nothing.
[[nodiscard]] std::string SdpaBackward(const SdpaShape& shape, const float* q, const float* k,
                                       const float* v, const BiasView& bias, const float* d_o,
                                       float* dq, float* dk, float* dv, float* dbias);

// Additive (Bahdanau) attention. Layouts:
//   query_proj [batch, target_len, units]     key_proj [batch, source_len, units]
//   values [batch, source_len, value_dim]     context [batch, target_len, value_dim]
//   attention_v [units]                       lse [batch, target_len]
// e[t,s] = sum_u v[u] tanh(query_proj[t,u] + key_proj[s,u]); sources s >= source_lengths[b]
// are masked (all used when source_lengths is empty; a length of 0 leaves a row with no source:
// context 0, lse -inf, no gradient).
struct AdditiveShape {
  int batch = 1;
  int target_len = 1;
  int source_len = 1;
  int units = 1;
  int value_dim = 1;
  std::vector<int> source_lengths;  // empty, or batch entries each in [0, source_len]
  int LenS(int b) const;            // REQUIRES: AdditiveShapeError(*this) is empty
};

// Why the reference cannot compute `shape` (one line naming the input and the value, as the C
// API's messages do), or "" when it can: a size below 1, source_lengths neither empty nor of
// `batch` entries, or an entry outside [0, source_len]. Lengths are never clamped.
std::string AdditiveShapeError(const AdditiveShape& shape);

// Both return AdditiveShapeError(shape) and, when it is not empty, write nothing.
[[nodiscard]] std::string AdditiveForward(const AdditiveShape& shape, const float* query_proj,
                                          const float* key_proj, const float* values,
                                          const float* attention_v, float* context, float* lse);

[[nodiscard]] std::string AdditiveBackward(const AdditiveShape& shape, const float* query_proj,
                                           const float* key_proj, const float* values,
                                           const float* attention_v, const float* d_context,
                                           float* d_query_proj, float* d_key_proj, float* d_values,
                                           float* d_attention_v);

}  // namespace spillway::attention::reference

#endif  // SPILLWAY_ATTENTION_KERNELS_REFERENCE_ATTENTION_REFERENCE_H_
