// PyTorch binding of spillway's attention kernels, compiled at run time by torch_attention.py
// (torch.utils.cpp_extension.load): BSHD tensors in, the C API called on PyTorch's stream.
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>

#include "spillway/attention.hpp"

namespace {

spillway_attention_dtype_t DtypeOf(const torch::Tensor& t) {
  TORCH_CHECK(t.scalar_type() == torch::kHalf || t.scalar_type() == torch::kBFloat16,
              "spillway attention takes float16 or bfloat16");
  return t.scalar_type() == torch::kBFloat16 ? SPILLWAY_ATTENTION_BF16 : SPILLWAY_ATTENTION_FP16;
}

// A [batch, seq, heads, dim] tensor with a contiguous last dimension.
spillway_attention_tensor_t View(const torch::Tensor& t) {
  TORCH_CHECK(t.dim() == 4 && t.stride(3) == 1,
              "expected [batch, seq, heads, dim], dim contiguous");
  return {t.data_ptr(), t.stride(0), t.stride(2), t.stride(1)};
}

spillway_attention_sdpa_problem_t Problem(const torch::Tensor& q, const torch::Tensor& k,
                                          bool causal, double scale) {
  return {DtypeOf(q),
          int32_t(q.size(0)),
          int32_t(q.size(2)),
          int32_t(k.size(2)),
          int32_t(q.size(1)),
          int32_t(k.size(1)),
          int32_t(q.size(3)),
          float(scale),
          causal ? 1 : 0,
          nullptr,
          nullptr};
}

void Check(const spillway::attention::Status& s) { TORCH_CHECK(s.ok(), s.ToString()); }

std::vector<torch::Tensor> Forward(torch::Tensor q, torch::Tensor k, torch::Tensor v, bool causal,
                                   double scale) {
  auto o = torch::empty_like(q);
  auto lse = torch::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(torch::kFloat));
  spillway_attention_sdpa_forward_args_t a{};
  a.problem = Problem(q, k, causal, scale);
  a.q = View(q);
  a.k = View(k);
  a.v = View(v);
  a.o = View(o);
  a.lse = lse.data_ptr<float>();
  Check(spillway::attention::Launch(a, nullptr, 0, at::cuda::getCurrentCUDAStream().stream()));
  return {o, lse};
}

std::vector<torch::Tensor> Backward(torch::Tensor d_o, torch::Tensor q, torch::Tensor k,
                                    torch::Tensor v, torch::Tensor o, torch::Tensor lse,
                                    bool causal, double scale) {
  d_o = d_o.contiguous();
  auto dq = torch::empty_like(q), dk = torch::empty_like(k), dv = torch::empty_like(v);
  spillway_attention_sdpa_backward_args_t a{};
  a.problem = Problem(q, k, causal, scale);
  a.q = View(q);
  a.k = View(k);
  a.v = View(v);
  a.o = View(o);
  a.lse = lse.data_ptr<float>();
  a.d_o = View(d_o);
  a.dq = View(dq);
  a.dk = View(dk);
  a.dv = View(dv);
  a.deterministic = 1;
  std::size_t bytes = 0;
  Check(spillway::attention::WorkspaceSize(a, &bytes));
  auto workspace = torch::empty({int64_t(bytes)}, q.options().dtype(torch::kUInt8));
  Check(spillway::attention::Launch(a, bytes ? workspace.data_ptr() : nullptr, bytes,
                                    at::cuda::getCurrentCUDAStream().stream()));
  return {dq, dk, dv};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &Forward, "SDPA forward: (o, lse)");
  m.def("backward", &Backward, "SDPA backward: (dq, dk, dv)");
}
