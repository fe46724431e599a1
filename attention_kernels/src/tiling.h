// Tile sizes and shared-memory budgets of the attention kernels, shared by the host-side
// validation (plain C++) and the CUDA kernels so that both agree on what fits on chip.
#ifndef SPILLWAY_ATTENTION_KERNELS_SRC_TILING_H_
#define SPILLWAY_ATTENTION_KERNELS_SRC_TILING_H_

#include <cstddef>

namespace spillway::attention {

// Scaled dot-product attention: 64x64 tiles, 4 warps, each warp owns 16 rows of a tile.
inline constexpr int kSdpaBlockM = 64;
inline constexpr int kSdpaBlockN = 64;
inline constexpr int kSdpaThreads = 128;
// Row pitches (elements) of the shared-memory tiles; the padding breaks bank conflicts and keeps
// every 16-row WMMA fragment 32-byte aligned.
constexpr int SdpaInputPitch(int head_dim) { return head_dim + 8; }  // fp16/bf16 Q, K, V, dO
inline constexpr int kSdpaScorePitch = kSdpaBlockN + 4;              // fp32 S, dP
inline constexpr int kSdpaProbPitch = kSdpaBlockN + 8;               // fp16/bf16 P, dS
constexpr int SdpaAccPitch(int head_dim) { return head_dim + 4; }    // fp32 O accumulator

constexpr std::size_t SdpaInputTileBytes(int head_dim) {
  return std::size_t{kSdpaBlockM} * SdpaInputPitch(head_dim) * 2;
}
inline constexpr std::size_t kSdpaScoreTileBytes = std::size_t{kSdpaBlockM} * kSdpaScorePitch * 4;
inline constexpr std::size_t kSdpaProbTileBytes = std::size_t{kSdpaBlockM} * kSdpaProbPitch * 2;
inline constexpr std::size_t kSdpaRowStatBytes = std::size_t{kSdpaBlockM} * 4;

// Forward: Q, K, V tiles; S (fp32); P; O accumulator (fp32).
constexpr std::size_t SdpaForwardSmemBytes(int head_dim) {
  return 3 * SdpaInputTileBytes(head_dim) + kSdpaScoreTileBytes + kSdpaProbTileBytes +
         std::size_t{kSdpaBlockM} * SdpaAccPitch(head_dim) * 4;
}
// Backward (dK/dV, dQ): Q, dO, K, V tiles; S/P and dP (fp32); P or dS; LSE and D per row.
constexpr std::size_t SdpaBackwardSmemBytes(int head_dim) {
  return 4 * SdpaInputTileBytes(head_dim) + 2 * kSdpaScoreTileBytes + kSdpaProbTileBytes +
         2 * kSdpaRowStatBytes;
}
// dBias: as the backward plus an fp32 accumulator tile.
constexpr std::size_t SdpaBiasGradSmemBytes(int head_dim) {
  return SdpaBackwardSmemBytes(head_dim) + kSdpaScoreTileBytes;
}

// Additive attention: 16 targets x 16 sources per step, 256 threads (one per pair).
inline constexpr int kAdditiveTile = 16;
inline constexpr int kAdditiveThreads = 256;
inline constexpr int kAdditiveMaxUnits = 1024;
inline constexpr int kAdditiveMaxValueDim = 1024;
// Opt-in shared memory per block on sm_80 (sm_90 allows more); the limit every kernel meets.
inline constexpr std::size_t kMaxSmemPerBlock = 166912;

constexpr std::size_t Align16(std::size_t bytes) { return (bytes + 15) / 16 * 16; }
constexpr int AdditiveProjPitch(int units) { return units + 2; }  // fp16/bf16 elements

// Buffers, in order, of the additive kernels (each 16-byte aligned):
//   forward:      pq, pk (T), values (T), v (f32), context acc (f32), p, row stats
//   query bwd:    pq, pk, values, d_context (T), v, d_query acc (f32), p, de, lse, delta
//   key bwd:      pq, pk, values, d_context (T), v, d_key acc, d_values acc (f32), p, de, lse,
//                 delta
constexpr std::size_t AdditiveProjTileBytes(int units) {
  return Align16(std::size_t{kAdditiveTile} * AdditiveProjPitch(units) * 2);
}
constexpr std::size_t AdditiveValueTileBytes(int value_dim) {
  return Align16(std::size_t{kAdditiveTile} * value_dim * 2);
}
constexpr std::size_t AdditivePairBytes() { return std::size_t{kAdditiveTile} * kAdditiveTile * 4; }
constexpr std::size_t AdditiveForwardSmemBytes(int units, int value_dim) {
  return 2 * AdditiveProjTileBytes(units) + AdditiveValueTileBytes(value_dim) +
         Align16(static_cast<std::size_t>(units) * 4) + std::size_t{kAdditiveTile} * value_dim * 4 +
         AdditivePairBytes() + 3 * kAdditiveTile * 4;
}
constexpr std::size_t AdditiveQueryGradSmemBytes(int units, int value_dim) {
  return 2 * AdditiveProjTileBytes(units) + 2 * AdditiveValueTileBytes(value_dim) +
         Align16(static_cast<std::size_t>(units) * 4) + std::size_t{kAdditiveTile} * units * 4 +
         2 * AdditivePairBytes() + 2 * kAdditiveTile * 4;
}
constexpr std::size_t AdditiveKeyGradSmemBytes(int units, int value_dim) {
  return AdditiveQueryGradSmemBytes(units, value_dim) + std::size_t{kAdditiveTile} * value_dim * 4;
}

}  // namespace spillway::attention

#endif  // SPILLWAY_ATTENTION_KERNELS_SRC_TILING_H_
