/* Memory-efficient attention kernels, C API: scaled dot-product attention (tiled, online
 * softmax, O(sequence) memory) and fused additive (Bahdanau) attention, forward and backward.
 * Plain pointers, element strides, a stream and status codes; no call ever launches on bad input.
 */
#ifndef SPILLWAY_ATTENTION_H_
#define SPILLWAY_ATTENTION_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define SPILLWAY_ATTENTION_API
#else
#define SPILLWAY_ATTENTION_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* What a call returns. Every failure also sets a message for the calling thread, read with
 * spillway_attention_last_error_message(). */
typedef enum spillway_attention_status {
  SPILLWAY_ATTENTION_SUCCESS = 0,
  SPILLWAY_ATTENTION_ERROR_NULL_POINTER = 1,         /* a required pointer is NULL */
  SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE = 2,        /* sizes, head counts, strides */
  SPILLWAY_ATTENTION_ERROR_UNSUPPORTED_DTYPE = 3,    /* only fp16 and bf16 */
  SPILLWAY_ATTENTION_ERROR_UNSUPPORTED_HEAD_DIM = 4, /* SDPA: 64 or 128 */
  SPILLWAY_ATTENTION_ERROR_MISALIGNED = 5,           /* pointer or stride alignment */
  SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT = 6,     /* flags, scale, bias layout, an output
                                                        sharing memory with another buffer */
  SPILLWAY_ATTENTION_ERROR_WORKSPACE_TOO_SMALL = 7,  /* see *_workspace_size() */
  SPILLWAY_ATTENTION_ERROR_NOT_BUILT = 8,            /* library built without CUDA kernels */
  SPILLWAY_ATTENTION_ERROR_CUDA = 9,                 /* a CUDA runtime call failed */
  /* Reserved: make every int32 a valid value of the type, so any value can be passed and checked.
   */
  SPILLWAY_ATTENTION_STATUS_RESERVED_MIN_ = -0x7fffffff - 1,
  SPILLWAY_ATTENTION_STATUS_RESERVED_MAX_ = 0x7fffffff
} spillway_attention_status_t;

/* Bits of the varlen error word a variable-length SDPA call, or an additive call with
 * source_lengths, leaves in its workspace (see spillway_attention_sdpa_varlen_status and
 * spillway_attention_additive_lengths_status). A sequence with any of them is not computed at all:
 * the kernels neither read nor write its rows, so its outputs keep whatever they held. */
typedef enum spillway_attention_varlen_error {
  /* cu_seqlens_q[b] < 0, cu_seqlens_q[b+1] < cu_seqlens_q[b] or > cu_seqlens_q[batch] */
  SPILLWAY_ATTENTION_VARLEN_Q_OFFSETS = 1,
  /* cu_seqlens_q[b+1] - cu_seqlens_q[b] > seqlen_q: declare the true maximum */
  SPILLWAY_ATTENTION_VARLEN_Q_TOO_LONG = 2,
  SPILLWAY_ATTENTION_VARLEN_K_OFFSETS = 4,  /* as above, for cu_seqlens_k */
  SPILLWAY_ATTENTION_VARLEN_K_TOO_LONG = 8, /* as above, for seqlen_k */
  /* additive attention: source_lengths[b] < 0 */
  SPILLWAY_ATTENTION_VARLEN_SOURCE_NEGATIVE = 16,
  /* additive attention: source_lengths[b] > source_len */
  SPILLWAY_ATTENTION_VARLEN_SOURCE_TOO_LONG = 32
} spillway_attention_varlen_error_t;

/* The varlen status at the start of a variable-length SDPA call's workspace (or an additive
 * call's with source_lengths) once the call has run on its stream: `errors` is the OR of the bits
 * above over all sequences, `first_bad_sequence` the lowest offending b (-1 when errors is 0). The
 * next call on the workspace overwrites it. */
typedef struct spillway_attention_varlen_status {
  uint32_t errors;
  int32_t first_bad_sequence;
} spillway_attention_varlen_status_t;

typedef enum spillway_attention_dtype {
  SPILLWAY_ATTENTION_FP16 = 0,
  SPILLWAY_ATTENTION_BF16 = 1,
  /* Reserved: every int32 is a value of the type, so validation can reject bad ones safely. */
  SPILLWAY_ATTENTION_DTYPE_RESERVED_MIN_ = -0x7fffffff - 1,
  SPILLWAY_ATTENTION_DTYPE_RESERVED_MAX_ = 0x7fffffff
} spillway_attention_dtype_t;

/* A tensor of rows of `head_dim` (or `units`, `value_dim`) contiguous elements. Element
 * (batch b, head h, position i) starts at data + b*batch_stride + h*head_stride + i*seq_stride,
 * strides in elements. With variable-length batches (cu_seqlens set) the rows of all sequences
 * are packed: sequence b, position i is token cu_seqlens[b] + i, at data + token*seq_stride +
 * h*head_stride, and batch_stride is ignored. Inputs are read through `data`; outputs written. */
typedef struct spillway_attention_tensor {
  void* data;
  int64_t batch_stride;
  int64_t head_stride;
  int64_t seq_stride;
} spillway_attention_tensor_t;

/* An additive bias on the attention logits, same dtype as q: element (b, h, i, j) is at
 * data + b*batch_stride + h*head_stride + i*row_stride + j (i query, j key position within the
 * sequence, h the query head). A zero stride broadcasts over that dimension. data NULL: none. */
typedef struct spillway_attention_bias {
  void* data;
  int64_t batch_stride;
  int64_t head_stride;
  int64_t row_stride;
} spillway_attention_bias_t;

/* Scaled dot-product attention: O = softmax(scale * Q K^T + bias, masked) V per (batch, head). */
typedef struct spillway_attention_sdpa_problem {
  spillway_attention_dtype_t dtype;
  int32_t batch;       /* number of sequences */
  int32_t num_heads_q; /* query heads; a multiple of num_heads_kv (GQA; MQA when kv is 1) */
  int32_t num_heads_kv;
  int32_t seqlen_q;    /* with cu_seqlens: the largest query length in the batch */
  int32_t seqlen_k;    /* with cu_seqlens: the largest key length in the batch */
  int32_t head_dim;    /* 64 or 128 */
  float softmax_scale; /* 0: 1/sqrt(head_dim) */
  int32_t causal;      /* 1: key j is visible to query i when j <= i + (len_k - len_q) */
  /* Device arrays of batch+1 cumulative offsets (int32), both or neither. NULL: every
   * sequence has seqlen_q queries and seqlen_k keys. The host cannot read them, so the kernels
   * check each sequence themselves: 0 <= cu[b] <= cu[b+1] <= cu[batch] and no length above
   * seqlen_q / seqlen_k (declare the true maxima: longer sequences are not clipped). A sequence
   * that breaks this is skipped, never read or written, so no offsets can make a kernel access
   * tokens outside [0, cu_seqlens[batch]) or memory outside the workspace; it is reported in the
   * workspace's varlen status: read it with spillway_attention_sdpa_varlen_status(). */
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
} spillway_attention_sdpa_problem_t;

/* q, o: [.., num_heads_q, .., head_dim]; k, v: [.., num_heads_kv, .., head_dim]. Their data must
 * be 16-byte aligned and their strides multiples of 8 elements. lse: fp32, token-major
 * [tokens_q, num_heads_q] where token = b*seqlen_q + i, or cu_seqlens_q[b] + i when varlen; the
 * natural log of the softmax denominator, -inf for a row that sees no key (its output is 0). */
typedef struct spillway_attention_sdpa_forward_args {
  spillway_attention_sdpa_problem_t problem;
  spillway_attention_tensor_t q, k, v;
  spillway_attention_bias_t bias; /* optional */
  spillway_attention_tensor_t o;  /* output */
  float* lse;                     /* output, needed by the backward pass */
} spillway_attention_sdpa_forward_args_t;

/* The forward's inputs and outputs plus d_o; writes dq, dk, dv (layouts as q, k, v) and, when
 * dbias.data is set, dbias (needs bias; same zero-stride pattern as bias: the gradient is summed
 * over broadcast dimensions). The kernels are deterministic (no atomics) whether or not
 * `deterministic` is set; the flag reserves the right to a faster atomic path when it is 0. It
 * must be 0 or 1: any other value is SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT. */
typedef struct spillway_attention_sdpa_backward_args {
  spillway_attention_sdpa_problem_t problem;
  spillway_attention_tensor_t q, k, v;
  spillway_attention_bias_t bias;
  spillway_attention_tensor_t o;
  const float* lse;
  spillway_attention_tensor_t d_o;
  spillway_attention_tensor_t dq, dk, dv; /* outputs */
  spillway_attention_bias_t dbias;        /* optional output */
  int32_t deterministic;
} spillway_attention_sdpa_backward_args_t;

/* Additive (Bahdanau) attention, fused: for target t and source s,
 *   e[t,s] = sum_u v[u] * tanh(query_proj[t,u] + key_proj[s,u]),
 *   context[t] = sum_s softmax_s(e[t,:])[s] * values[s],
 * without ever storing the [batch, target, source, units] tanh intermediate. The projections
 * (W_q q_t + b, W_k k_s) are the caller's GEMMs. */
typedef struct spillway_attention_additive_problem {
  spillway_attention_dtype_t dtype;
  int32_t batch;
  int32_t target_len;
  int32_t source_len;
  int32_t units;     /* at most 1024 */
  int32_t value_dim; /* at most 1024; see the README for the on-chip limit on units+value_dim */
  /* Optional device array [batch] of source lengths, each in [0, source_len]: sources at or past
   * a sequence's length are masked (0: no source, the row's context is 0 and its lse -inf). NULL:
   * all source_len sources are used. The host cannot read them, so the kernels check each: a
   * sequence whose length is negative or above source_len is not computed (none of its rows is
   * read or written, its outputs keep what they held, it adds nothing to d_attention_v) and is
   * reported in the status block at the start of the workspace (256 bytes, so a forward with
   * source_lengths needs a workspace too): read it with
   * spillway_attention_additive_lengths_status(). Lengths are never clamped. */
  const int32_t* source_lengths;
} spillway_attention_additive_problem_t;

/* query_proj [batch, target_len, units], key_proj [batch, source_len, units], values and context
 * [batch, *, value_dim]: tensors with head_stride unused, element-aligned. attention_v: fp32
 * [units]. lse: fp32 [batch, target_len]. */
typedef struct spillway_attention_additive_forward_args {
  spillway_attention_additive_problem_t problem;
  spillway_attention_tensor_t query_proj, key_proj, values;
  const float* attention_v;
  spillway_attention_tensor_t context; /* output */
  float* lse;                          /* output */
} spillway_attention_additive_forward_args_t;

typedef struct spillway_attention_additive_backward_args {
  spillway_attention_additive_problem_t problem;
  spillway_attention_tensor_t query_proj, key_proj, values;
  const float* attention_v;
  spillway_attention_tensor_t context;
  const float* lse;
  spillway_attention_tensor_t d_context;
  spillway_attention_tensor_t d_query_proj, d_key_proj, d_values; /* outputs */
  float* d_attention_v;                                           /* output, fp32 [units] */
} spillway_attention_additive_backward_args_t;

/* A short constant description of a status, e.g. "misaligned". */
SPILLWAY_ATTENTION_API const char* spillway_attention_status_string(
    spillway_attention_status_t status);

/* The message of the last call on this thread: why it failed, or "" after a success. */
SPILLWAY_ATTENTION_API const char* spillway_attention_last_error_message(void);

/* 1 when the library holds the CUDA kernels, 0 when it was built without nvcc. */
SPILLWAY_ATTENTION_API int spillway_attention_kernels_available(void);

/* Validate args and report in *bytes the device workspace the call needs (may be 0). A
 * variable-length SDPA call's workspace, and an additive call's with source_lengths, starts with
 * 256 bytes for its varlen status (so the forwards need 256 bytes with cu_seqlens /
 * source_lengths set, 0 without); the SDPA backward's then holds D, one fp32 per
 * (batch * seqlen_q) padded query row and head; the additive backward's D per target row and
 * partial sums of d_attention_v. */
SPILLWAY_ATTENTION_API spillway_attention_status_t spillway_attention_sdpa_forward_workspace_size(
    const spillway_attention_sdpa_forward_args_t* args, size_t* bytes);
SPILLWAY_ATTENTION_API spillway_attention_status_t spillway_attention_sdpa_backward_workspace_size(
    const spillway_attention_sdpa_backward_args_t* args, size_t* bytes);
SPILLWAY_ATTENTION_API spillway_attention_status_t
spillway_attention_additive_forward_workspace_size(
    const spillway_attention_additive_forward_args_t* args, size_t* bytes);
SPILLWAY_ATTENTION_API spillway_attention_status_t
spillway_attention_additive_backward_workspace_size(
    const spillway_attention_additive_backward_args_t* args, size_t* bytes);

/* Validate, then enqueue the kernels on `stream` (a cudaStream_t; NULL is the default stream) of
 * the current device. `workspace` is device memory of at least the reported size, 256-byte
 * aligned (NULL when the size is 0). Returns once enqueued; kernel faults surface on the stream as
 * usual. SPILLWAY_ATTENTION_ERROR_CUDA reports this call's own failures only: each launch's error
 * is the one cudaLaunchKernelEx returns for it, and the library never calls cudaGetLastError() or
 * cudaPeekAtLastError(), so an earlier error of the caller's stays for the caller to read (a
 * failed call of ours leaves its error there like any failing runtime call; a sticky error, i.e.
 * a corrupted context, fails every call, ours included). The dynamic shared-memory opt-in
 * (cudaFuncSetAttribute) is made once per kernel and device, not per call; after
 * cudaDeviceReset() the first launch that fails redoes it and retries once. */
SPILLWAY_ATTENTION_API spillway_attention_status_t
spillway_attention_sdpa_forward(const spillway_attention_sdpa_forward_args_t* args, void* workspace,
                                size_t workspace_bytes, void* stream);
SPILLWAY_ATTENTION_API spillway_attention_status_t
spillway_attention_sdpa_backward(const spillway_attention_sdpa_backward_args_t* args,
                                 void* workspace, size_t workspace_bytes, void* stream);
SPILLWAY_ATTENTION_API spillway_attention_status_t
spillway_attention_additive_forward(const spillway_attention_additive_forward_args_t* args,
                                    void* workspace, size_t workspace_bytes, void* stream);
SPILLWAY_ATTENTION_API spillway_attention_status_t
spillway_attention_additive_backward(const spillway_attention_additive_backward_args_t* args,
                                     void* workspace, size_t workspace_bytes, void* stream);

/* Waits for `stream` and reads the varlen status (see spillway_attention_varlen_status_t) that a
 * variable-length SDPA forward or backward call left at the start of `workspace`. SUCCESS when
 * every sequence was valid; SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE, with a message naming the
 * first offending sequence and what was wrong, when some were skipped; `status` (may be NULL)
 * receives the raw word. Only meaningful for calls with cu_seqlens set (others leave no status). */
SPILLWAY_ATTENTION_API spillway_attention_status_t spillway_attention_sdpa_varlen_status(
    const void* workspace, void* stream, spillway_attention_varlen_status_t* status);

/* The same for an additive forward or backward call with source_lengths set: waits for `stream`
 * and reads the status the call left at the start of `workspace`. SUCCESS when every length was
 * in [0, source_len]; SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE, with a message naming the first
 * offending sequence and whether its length was negative or above source_len, when some
 * sequences were skipped. Only meaningful for calls with source_lengths set. */
SPILLWAY_ATTENTION_API spillway_attention_status_t spillway_attention_additive_lengths_status(
    const void* workspace, void* stream, spillway_attention_varlen_status_t* status);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SPILLWAY_ATTENTION_H_ */
