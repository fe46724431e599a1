// Overlap of an attention call's buffers (see overlap.h).
#include "attention_kernels/src/overlap.h"

#include <cstdint>
#include <string>

namespace spillway::attention {
namespace {

// True when both repeat every row pitch and their parts of a row do not meet (cyclically).
bool RowsApart(const BufferSpan& a, const BufferSpan& b) {
  if (a.row_pitch == 0 || a.row_pitch != b.row_pitch) return false;
  const uint64_t pitch = a.row_pitch;
  // b's start relative to a's, in [0, pitch): b must start after a's bytes and end before a's
  // next row starts.
  const uint64_t offset = (b.row_start + pitch - a.row_start) % pitch;
  return offset >= a.row_bytes && offset + b.row_bytes <= pitch;
}

bool Overlap(const BufferSpan& a, const BufferSpan& b) {
  if (a.begin == 0 || b.begin == 0 || a.begin == a.end || b.begin == b.end) return false;
  if (a.end <= b.begin || b.end <= a.begin) return false;
  return !RowsApart(a, b);
}

std::string Hex(uintptr_t v) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  do {
    out.insert(out.begin(), kDigits[v % 16]);
    v /= 16;
  } while (v != 0);
  return "0x" + out;
}

}  // namespace

BufferSpan TensorSpan(const char* name, bool output, const spillway_attention_tensor_t& t,
                      int64_t batch, int64_t heads, int64_t rows, int64_t width,
                      int64_t element_bytes, bool varlen) {
  BufferSpan s;
  s.name = name;
  s.output = output;
  s.begin = reinterpret_cast<uintptr_t>(t.data);
  const int64_t row_span = (heads - 1) * t.head_stride + width;  // elements of one row
  // Varlen: the token count is on the device, so only the first row is sure to be there (a bound
  // from the largest lengths could reach into a neighbouring allocation).
  const int64_t last =
      varlen ? row_span : (batch - 1) * t.batch_stride + (rows - 1) * t.seq_stride + row_span;
  s.end = s.begin + static_cast<uintptr_t>(last * element_bytes);
  // Rows repeat every seq_stride when each row fits in it and sequences start on a row boundary.
  const bool rows_repeat = t.seq_stride > 0 && row_span <= t.seq_stride &&
                           (varlen || batch == 1 || t.batch_stride % t.seq_stride == 0);
  if (rows_repeat) {
    s.row_pitch = static_cast<uint64_t>(t.seq_stride * element_bytes);
    s.row_start = s.begin % s.row_pitch;
    s.row_bytes = static_cast<uint64_t>(row_span * element_bytes);
  }
  return s;
}

BufferSpan BiasSpan(const char* name, bool output, const spillway_attention_bias_t& b,
                    int64_t batch, int64_t heads, int64_t rows, int64_t columns) {
  BufferSpan s;
  s.name = name;
  s.output = output;
  s.begin = reinterpret_cast<uintptr_t>(b.data);
  const int64_t last = (batch - 1) * b.batch_stride + (heads - 1) * b.head_stride +
                       (rows - 1) * b.row_stride + columns;
  s.end = s.begin + static_cast<uintptr_t>(last * 2);
  return s;
}

BufferSpan BytesSpan(const char* name, bool output, const void* data, uint64_t bytes) {
  BufferSpan s;
  s.name = name;
  s.output = output;
  s.begin = reinterpret_cast<uintptr_t>(data);
  s.end = s.begin + bytes;
  return s;
}

std::string FirstOverlap(std::initializer_list<BufferSpan> spans) {
  for (const BufferSpan* a = spans.begin(); a != spans.end(); ++a) {
    if (!a->output) continue;
    for (const BufferSpan* b = spans.begin(); b != spans.end(); ++b) {
      if (a == b || (b->output && b < a) || !Overlap(*a, *b)) continue;
      return std::string(a->name) + " overlaps " + b->name + " (bytes " + Hex(a->begin) + ".." +
             Hex(a->end) + " and " + Hex(b->begin) + ".." + Hex(b->end) +
             "): an output may not share memory with another buffer of the call";
    }
  }
  return "";
}

}  // namespace spillway::attention
