// Access-set resolution: collect candidate words, then look them all up under one registry lock.
#include "policy/engine/access_set.h"

#include <cstring>

namespace spillway::policy {
namespace {

// Values of the cuda.h launch-parameter markers (CU_LAUNCH_PARAM_*_AS_INT).
constexpr uintptr_t kParamEnd = 0x00;
constexpr uintptr_t kParamBufferPointer = 0x01;
constexpr uintptr_t kParamBufferSize = 0x02;
constexpr size_t kMaxWords = 512;  // 4 KiB of parameters: the CUDA limit before 12.1's 32 KiB

// Appends every 8-byte word of `bytes[0, size)` whose absolute offset `start + i` is 8-aligned.
void CollectWords(const unsigned char* bytes, uint64_t start, uint64_t size, uint64_t* words,
                  size_t* count, size_t capacity) {
  uint64_t first = (start + 7) & ~uint64_t{7};
  for (uint64_t at = first; at + 8 <= start + size && *count < capacity; at += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + (at - start), sizeof(word));
    if (word != 0) words[(*count)++] = word;
  }
}

void HandBack(const uint64_t* words, size_t count, std::vector<uint64_t>* out) {
  if (out != nullptr) out->assign(words, words + count);
}

}  // namespace

void ResolveFromKernelParams(const AllocationRegistry& registry,
                             const std::vector<ParamInfo>& layout, void* const* kernel_params,
                             AccessSet* out, std::vector<uint64_t>* words_out) {
  if (words_out != nullptr) words_out->clear();
  if (kernel_params == nullptr) return;
  uint64_t words[kMaxWords];
  words[0] = 0;  // GCC 12 -O3 cannot see that only [0, count) is read: not all uninitialized
  size_t count = 0;
  for (size_t i = 0; i < layout.size(); ++i) {
    if (kernel_params[i] == nullptr) continue;
    CollectWords(static_cast<const unsigned char*>(kernel_params[i]), layout[i].offset,
                 layout[i].size, words, &count, kMaxWords);
  }
  registry.FindAll(words, count, out);
  HandBack(words, count, words_out);
}

void ResolveFromBuffer(const AllocationRegistry& registry, const void* buffer, size_t size,
                       AccessSet* out, std::vector<uint64_t>* words_out) {
  if (words_out != nullptr) words_out->clear();
  if (buffer == nullptr) return;
  uint64_t words[kMaxWords];
  words[0] = 0;  // GCC 12 -O3 cannot see that only [0, count) is read: not all uninitialized
  size_t count = 0;
  // The buffer is laid out from offset 0, so alignment is relative to its start.
  CollectWords(static_cast<const unsigned char*>(buffer), 0, size, words, &count, kMaxWords);
  registry.FindAll(words, count, out);
  HandBack(words, count, words_out);
}

bool ResolveFromExtra(const AllocationRegistry& registry, void* const* extra, AccessSet* out,
                      std::vector<uint64_t>* words) {
  if (words != nullptr) words->clear();
  if (extra == nullptr) return false;
  const void* buffer = nullptr;
  const size_t* size = nullptr;
  for (size_t i = 0; i < 64; i += 2) {
    const uintptr_t key = reinterpret_cast<uintptr_t>(extra[i]);
    if (key == kParamEnd) break;
    if (key == kParamBufferPointer) {
      buffer = extra[i + 1];
    } else if (key == kParamBufferSize) {
      size = static_cast<const size_t*>(extra[i + 1]);
    }
  }
  if (buffer == nullptr || size == nullptr) return false;
  ResolveFromBuffer(registry, buffer, *size, out, words);
  return true;
}

}  // namespace spillway::policy
