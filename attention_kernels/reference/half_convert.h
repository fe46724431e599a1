// Host-side fp16 and bf16 conversion (round to nearest even), so tests and examples can build
// kernel inputs and read outputs without CUDA headers; bit-exact with __float2half_rn and
// __float2bfloat16_rn for finite values.
#ifndef SPILLWAY_ATTENTION_KERNELS_REFERENCE_HALF_CONVERT_H_
#define SPILLWAY_ATTENTION_KERNELS_REFERENCE_HALF_CONVERT_H_

#include <cmath>
#include <cstdint>
#include <cstring>

namespace spillway::attention {

inline uint32_t FloatBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return x;
}

inline float BitsFloat(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

inline uint16_t FloatToHalfBits(float f) {
  const uint32_t x = FloatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (abs < 0x38800000u) {  // below 2^-14: a subnormal half, in units of 2^-24
    const float scaled = BitsFloat(abs) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  uint32_t h = ((((abs >> 23) - 127u + 15u)) << 10) | ((abs & 0x7fffffu) >> 13);
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

inline float HalfBitsToFloat(uint16_t h) {
  const uint32_t sign = (uint32_t{h} & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float value = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -value : value;
  }
  if (exponent == 31) return BitsFloat(sign | 0x7f800000u | (mantissa << 13));
  return BitsFloat(sign | ((exponent - 15u + 127u) << 23) | (mantissa << 13));
}

inline uint16_t FloatToBf16Bits(float f) {
  const uint32_t x = FloatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float Bf16BitsToFloat(uint16_t b) { return BitsFloat(uint32_t{b} << 16); }

}  // namespace spillway::attention

#endif  // SPILLWAY_ATTENTION_KERNELS_REFERENCE_HALF_CONVERT_H_
