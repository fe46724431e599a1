// The replay kernels' parameters and the values they write and check, shared by the simgpu host
// kernel library (replay_kernels_host.cc), the CUDA kernels (replay_kernels.cu) and the program
// that launches them (driver_replay_device.cc). One kernel runs one recorded op: for each access
// it gets the pointer (allocation base + offset: the engine's resolver sees it as an interior
// pointer), the byte count and the mode. Every other parameter word has its top bit set, so it
// can never look like a pointer into a live allocation.
//
// Verification (docs/workloads.md, "The replayer"): a byte at offset p of a tensor holds, after
// op s wrote it, byte (p mod 8) of Fill(s, tag, p / 8), where tag numbers the tensor in the run;
// a read-write op XORs that into what was there. Each read adds Check(value, tag, position) of
// what it read into a 64-bit digest (a wrapping sum, so the order in which threads add does not
// matter). A byte that is lost or stale when read changes the digest.
#ifndef SPILLWAY_WORKLOADS_REPLAY_REPLAY_KERNEL_ABI_H_
#define SPILLWAY_WORKLOADS_REPLAY_REPLAY_KERNEL_ABI_H_

#include <cstdint>

#if defined(__CUDACC__)
#define REPLAY_HD __host__ __device__
#else
#define REPLAY_HD
#endif

namespace spillway_replay {

// Access modes, as in the trace (format 1.2): 1 read, 2 write, 3 read-write.
inline constexpr uint32_t kModeRead = 1;
inline constexpr uint32_t kModeWrite = 2;
inline constexpr uint32_t kModeReadWrite = 3;

// The bit set in every parameter word that is not a pointer (a user-space address never has it).
inline constexpr uint64_t kMark = uint64_t{1} << 63;
inline constexpr uint64_t kMaxAccessBytes = (uint64_t{1} << 48) - 1;
inline constexpr uint64_t kMaxTensorOffset = (uint64_t{1} << 40) - 1;
inline constexpr uint64_t kTagMask = (uint64_t{1} << 23) - 1;
// How much of each access the kernels touch, as the log2 of a stride: 0 = every byte
// (touch=all); k = the 8 bytes at every tensor offset that is a multiple of 2^k (touch=page is
// 12: 4 KiB), and the range's ends.
inline constexpr int kTouchAll = 0;
inline constexpr int kTouchPage = 12;
inline constexpr int kMinStrideLog2 = 4;   // 16 bytes: windows never overlap
inline constexpr int kMaxStrideLog2 = 30;  // 1 GiB

// The digest buffer: 8 words of device memory, persistent for the run and in every launch's
// access set. A launch adds into its lane: lane 0 = the recorded ops, lane 1 = the final sweep
// over what is live at the end.
inline constexpr int kDigestWords = 8;
inline constexpr int kLaneOps = 0;
inline constexpr int kLaneFinal = 1;
REPLAY_HD inline int DigestSumWord(int lane) { return 2 * lane; }        // wrapping sum of checks
REPLAY_HD inline int DigestBytesWord(int lane) { return 2 * lane + 1; }  // bytes checked

// One access of an op.
struct ReplaySlot {
  uint64_t pointer;  // base + offset; 0 in an unused slot
  uint64_t extent;   // kMark | mode << 56 | bytes
  uint64_t key;      // kMark | tag << 40 | offset in the tensor (for the values, not the address)
};

// The kernels replay_op4, replay_op16 and replay_op64 take one parameter, this struct with N
// slots.
template <int N>
struct ReplayParams {
  uint64_t digest;    // pointer to the digest buffer (kDigestWords words)
  uint64_t sequence;  // kMark | the launch's number in the run
  uint64_t time_ns;   // kMark | the op's recorded time on the GPU
  uint64_t control;   // kMark | slots used | touch (stride log2, 0 = all) << 8 | lane << 16
  ReplaySlot slots[N];
};
inline constexpr int kSlotVariants[] = {4, 16, 64};
inline constexpr int kMaxSlots = 64;

REPLAY_HD inline uint64_t PackExtent(uint32_t mode, uint64_t bytes) {
  return kMark | (uint64_t{mode} << 56) | bytes;
}
REPLAY_HD inline uint32_t ExtentMode(uint64_t extent) {
  return static_cast<uint32_t>(extent >> 56) & 3u;
}
REPLAY_HD inline uint64_t ExtentBytes(uint64_t extent) { return extent & kMaxAccessBytes; }
REPLAY_HD inline uint64_t PackKey(uint64_t tag, uint64_t offset) {
  return kMark | ((tag & kTagMask) << 40) | offset;
}
REPLAY_HD inline uint64_t KeyTag(uint64_t key) { return (key >> 40) & kTagMask; }
REPLAY_HD inline uint64_t KeyOffset(uint64_t key) { return key & kMaxTensorOffset; }
REPLAY_HD inline uint64_t PackControl(int slots, int touch, int lane) {
  return kMark | static_cast<uint64_t>(slots) | (static_cast<uint64_t>(touch) << 8) |
         (static_cast<uint64_t>(lane) << 16);
}
REPLAY_HD inline int ControlSlots(uint64_t control) { return static_cast<int>(control & 0xff); }
REPLAY_HD inline int ControlTouch(uint64_t control) {
  return static_cast<int>((control >> 8) & 0x3f);
}
REPLAY_HD inline int ControlLane(uint64_t control) {
  return static_cast<int>((control >> 16) & 3u);
}

REPLAY_HD inline uint64_t Mix64(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

// The 8 bytes op `sequence` writes at word `word` (byte offset 8 * word) of tensor `tag`.
REPLAY_HD inline uint64_t Fill(uint64_t sequence, uint64_t tag, uint64_t word) {
  return Mix64(sequence * 0x9E3779B97F4A7C15ull ^ Mix64(tag << 40 ^ word));
}
// What reading the aligned 8 bytes `value` at word `word` of tensor `tag` adds to the digest.
REPLAY_HD inline uint64_t CheckWord(uint64_t value, uint64_t tag, uint64_t word) {
  return Mix64(value ^ Mix64((tag << 40 ^ word) + 0x632BE59BD9B4E019ull));
}
// What reading one byte `value` at byte offset `offset` of tensor `tag` adds (the ends of a
// range that does not start or end on 8 bytes).
REPLAY_HD inline uint64_t CheckByte(uint64_t value, uint64_t tag, uint64_t offset) {
  return Mix64((value + 1) * 0xD6E8FEB86659FD93ull ^ Mix64((tag << 40 ^ offset) + 0x9E37ull));
}

// The pieces of one access the kernel touches, in units: one aligned word, one byte, or (with a
// stride) one window.
//   touch=all: every byte of [offset, offset + bytes): bytes up to the first 8-aligned offset,
//     the aligned words, then the bytes after the last one.
//   a stride (touch=page: 4 KiB): the window of 8 bytes at each tensor offset that is a
//     multiple of the stride (a word, or its bytes inside the range where the range cuts it),
//     then the range's first and last byte where no window holds them (touched, not checked).
// The same split is used by every run of the same trace, so its checks agree across runs.
struct AccessUnits {
  uint64_t begin = 0;  // tensor offsets [begin, end)
  uint64_t end = 0;
  bool touch_all = false;
  int stride_log2 = 0;
  // touch=all
  uint64_t head_end = 0;  // bytes [begin, head_end), words [head_end, tail_begin), bytes after
  uint64_t tail_begin = 0;
  // a stride
  uint64_t first_window = 0;  // windows first_window .. first_window + windows - 1
  uint64_t windows = 0;
  bool touch_first = false;  // the first byte is in no window
  bool touch_last = false;   // the last byte is in no window (and is not the first)

  // `touch`: kTouchAll, or a stride's log2 from kMinStrideLog2 to kMaxStrideLog2.
  REPLAY_HD static AccessUnits Of(uint64_t offset, uint64_t bytes, int touch) {
    AccessUnits u;
    u.begin = offset;
    u.end = offset + bytes;
    u.touch_all = touch == kTouchAll;
    u.stride_log2 = touch;
    if (bytes == 0) return u;
    if (u.touch_all) {
      u.head_end = (offset + 7) & ~uint64_t{7};
      if (u.head_end > u.end) u.head_end = u.end;
      u.tail_begin = u.end & ~uint64_t{7};
      if (u.tail_begin < u.head_end) u.tail_begin = u.head_end;
      return u;
    }
    // Window k covers [k * stride, k * stride + 8).
    const uint64_t stride = uint64_t{1} << touch;
    u.first_window = (offset + stride - 8) >> touch;
    const uint64_t last_window = (u.end - 1) >> touch;
    u.windows = last_window >= u.first_window ? last_window - u.first_window + 1 : 0;
    u.touch_first = (offset & (stride - 1)) >= 8;
    u.touch_last = ((u.end - 1) & (stride - 1)) >= 8 && u.end - 1 != offset;
    return u;
  }
  // The tensor offset where window `w` (counted from first_window) starts.
  REPLAY_HD uint64_t WindowStart(uint64_t w) const { return (first_window + w) << stride_log2; }
  // Units: touch=all: head bytes, words, tail bytes; a stride: windows, then the touches.
  REPLAY_HD uint64_t count() const {
    if (touch_all) return (head_end - begin) + (tail_begin - head_end) / 8 + (end - tail_begin);
    return windows + (touch_first ? 1 : 0) + (touch_last ? 1 : 0);
  }
};

// Applies op `sequence`'s access to its unit `u`: reads (and returns the check of) what a read
// sees, writes what a write leaves. `base` is the address of tensor offset 0 (pointer - offset).
// `checked` gets the bytes the returned check covers.
REPLAY_HD inline uint64_t TouchUnit(unsigned char* base, const AccessUnits& units, uint64_t u,
                                    uint32_t mode, uint64_t sequence, uint64_t tag,
                                    uint64_t* checked) {
  const bool read = (mode & kModeRead) != 0;
  const bool write = (mode & kModeWrite) != 0;
  uint64_t check = 0;
  *checked = 0;
  // One byte at tensor offset p: checked only where `verify`.
  auto touch_byte = [&](uint64_t p, bool verify) {
    volatile unsigned char* at = base + p;
    const uint64_t fill = (Fill(sequence, tag, p / 8) >> (8 * (p % 8))) & 0xff;
    if (read) {
      const unsigned char old = *at;
      if (verify) {
        check += CheckByte(old, tag, p);
        *checked += 1;
      }
      if (write) *at = static_cast<unsigned char>(old ^ fill);
    } else {
      *at = static_cast<unsigned char>(fill);
    }
  };
  auto touch_word = [&](uint64_t p) {
    volatile uint64_t* at = reinterpret_cast<volatile uint64_t*>(base + p);
    const uint64_t fill = Fill(sequence, tag, p / 8);
    if (read) {
      const uint64_t old = *at;
      check += CheckWord(old, tag, p / 8);
      *checked += 8;
      if (write) *at = old ^ fill;
    } else {
      *at = fill;
    }
  };
  if (units.touch_all) {
    const uint64_t head = units.head_end - units.begin;
    const uint64_t words = (units.tail_begin - units.head_end) / 8;
    if (u < head) {
      touch_byte(units.begin + u, true);
    } else if (u < head + words) {
      touch_word(units.head_end + 8 * (u - head));
    } else {
      touch_byte(units.tail_begin + (u - head - words), true);
    }
    return check;
  }
  if (u < units.windows) {
    const uint64_t start = units.WindowStart(u);
    if (start >= units.begin && start + 8 <= units.end) {
      touch_word(start);
    } else {
      for (uint64_t p = start; p < start + 8; ++p) {
        if (p >= units.begin && p < units.end) touch_byte(p, true);
      }
    }
    return check;
  }
  const bool first = units.touch_first && u == units.windows;
  touch_byte(first ? units.begin : units.end - 1, false);
  return check;
}

}  // namespace spillway_replay

#endif  // SPILLWAY_WORKLOADS_REPLAY_REPLAY_KERNEL_ABI_H_
