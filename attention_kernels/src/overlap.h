// Whether an output of an attention call shares memory with another buffer of the call: each
// buffer's byte extent, and for strided tensors the rows they occupy, so that tensors packed into
// one buffer row by row (q, k and v in a [tokens, 3, heads, dim] buffer; dq, dk and dv likewise)
// count as apart. Plain C++, no CUDA; validate.cc runs it on every call.
#ifndef SPILLWAY_ATTENTION_KERNELS_SRC_OVERLAP_H_
#define SPILLWAY_ATTENTION_KERNELS_SRC_OVERLAP_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "spillway/attention.h"

namespace spillway::attention {

// The bytes a buffer may touch: [begin, end). A tensor whose rows repeat every `row_pitch` bytes
// also says where in each row its bytes lie: from `row_start` (its address modulo the pitch) for
// `row_bytes`, wrapping around; row_pitch 0 when that does not describe it.
struct BufferSpan {
  const char* name = "";
  bool output = false;
  uintptr_t begin = 0;
  uintptr_t end = 0;
  uint64_t row_pitch = 0;
  uint64_t row_start = 0;
  uint64_t row_bytes = 0;
};

// A tensor of `rows` rows per sequence (`batch` sequences), `heads` heads of `width` elements of
// `element_bytes`; with `varlen` (rows of all sequences packed along seq_stride, their number on
// the device), only its first row. REQUIRES: the strides are not negative.
BufferSpan TensorSpan(const char* name, bool output, const spillway_attention_tensor_t& t,
                      int64_t batch, int64_t heads, int64_t rows, int64_t width,
                      int64_t element_bytes, bool varlen);
// A bias of [batch, heads, rows, columns] 2-byte elements (zero strides broadcast).
BufferSpan BiasSpan(const char* name, bool output, const spillway_attention_bias_t& b,
                    int64_t batch, int64_t heads, int64_t rows, int64_t columns);
// `bytes` contiguous bytes from `data`.
BufferSpan BytesSpan(const char* name, bool output, const void* data, uint64_t bytes);

// Empty when no output shares a byte with another buffer; else "<output> overlaps <other>: ...".
// Buffers with a null address are skipped.
std::string FirstOverlap(std::initializer_list<BufferSpan> spans);

}  // namespace spillway::attention

#endif  // SPILLWAY_ATTENTION_KERNELS_SRC_OVERLAP_H_
