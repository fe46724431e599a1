// Calls the attention C++ API end to end: causal bf16 SDPA forward and backward on random data,
// then prints the output's checksum and how much workspace the backward needed.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "attention_kernels/reference/half_convert.h"
#include "spillway/attention.hpp"

namespace sa = spillway::attention;

int main() {
  constexpr int kBatch = 2, kHeadsQ = 8, kHeadsKv = 2, kSeq = 1024, kDim = 128;
  const std::size_t nq = std::size_t{kBatch} * kSeq * kHeadsQ * kDim;
  const std::size_t nkv = std::size_t{kBatch} * kSeq * kHeadsKv * kDim;
  std::mt19937 gen(1);
  std::normal_distribution<float> dist;
  auto random_bf16 = [&](std::size_t n) {
    std::vector<uint16_t> v(n);
    for (auto& x : v) x = sa::FloatToBf16Bits(dist(gen));
    return v;
  };
  void *q, *k, *v, *o, *d_o, *dq, *dk, *dv;
  float* lse;
  for (auto [ptr, n] : {std::pair{&q, nq},
                        {&k, nkv},
                        {&v, nkv},
                        {&o, nq},
                        {&d_o, nq},
                        {&dq, nq},
                        {&dk, nkv},
                        {&dv, nkv}}) {
    if (cudaMalloc(ptr, n * 2) != cudaSuccess)
      return std::fprintf(stderr, "cudaMalloc failed\n"), 1;
  }
  cudaMalloc(&lse, std::size_t{kBatch} * kSeq * kHeadsQ * 4);
  for (auto [ptr, n] : {std::pair{q, nq}, {k, nkv}, {v, nkv}, {d_o, nq}}) {
    const auto host = random_bf16(n);
    cudaMemcpy(ptr, host.data(), n * 2, cudaMemcpyHostToDevice);
  }

  spillway_attention_sdpa_forward_args_t fwd{};
  fwd.problem = {SPILLWAY_ATTENTION_BF16,
                 kBatch,
                 kHeadsQ,
                 kHeadsKv,
                 kSeq,
                 kSeq,
                 kDim,
                 0.0f,  // 1/sqrt(kDim)
                 1,     // causal
                 nullptr,
                 nullptr};
  fwd.q = sa::BshdTensor(q, kSeq, kHeadsQ, kDim);
  fwd.k = sa::BshdTensor(k, kSeq, kHeadsKv, kDim);
  fwd.v = sa::BshdTensor(v, kSeq, kHeadsKv, kDim);
  fwd.o = sa::BshdTensor(o, kSeq, kHeadsQ, kDim);
  fwd.lse = lse;
  if (sa::Status s = sa::Launch(fwd, nullptr, 0, nullptr); !s.ok()) {
    std::fprintf(stderr, "forward: %s\n", s.ToString().c_str());
    return 1;
  }

  spillway_attention_sdpa_backward_args_t bwd{};
  bwd.problem = fwd.problem;
  bwd.q = fwd.q;
  bwd.k = fwd.k;
  bwd.v = fwd.v;
  bwd.o = fwd.o;
  bwd.lse = lse;
  bwd.d_o = sa::BshdTensor(d_o, kSeq, kHeadsQ, kDim);
  bwd.dq = sa::BshdTensor(dq, kSeq, kHeadsQ, kDim);
  bwd.dk = sa::BshdTensor(dk, kSeq, kHeadsKv, kDim);
  bwd.dv = sa::BshdTensor(dv, kSeq, kHeadsKv, kDim);
  std::size_t workspace_bytes = 0;
  if (sa::Status s = sa::WorkspaceSize(bwd, &workspace_bytes); !s.ok()) {
    std::fprintf(stderr, "workspace: %s\n", s.ToString().c_str());
    return 1;
  }
  void* workspace = nullptr;
  cudaMalloc(&workspace, workspace_bytes);
  if (sa::Status s = sa::Launch(bwd, workspace, workspace_bytes, nullptr); !s.ok()) {
    std::fprintf(stderr, "backward: %s\n", s.ToString().c_str());
    return 1;
  }
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    std::fprintf(stderr, "kernels: %s\n", cudaGetErrorString(e));
    return 1;
  }
  std::vector<uint16_t> out(nq);
  cudaMemcpy(out.data(), o, nq * 2, cudaMemcpyDeviceToHost);
  double checksum = 0.0;
  for (uint16_t x : out) checksum += sa::Bf16BitsToFloat(x);
  std::printf("causal bf16 attention %dx%dx%dx%d: sum(O) = %.4f, backward workspace %zu bytes\n",
              kBatch, kHeadsQ, kSeq, kDim, checksum, workspace_bytes);
  for (void* p : {q, k, v, o, d_o, dq, dk, dv, workspace}) cudaFree(p);
  cudaFree(lse);
  return 0;
}
