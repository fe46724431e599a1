// PyTorch binding of spillway's attention kernels, compiled at run time by torch_attention.py
// (torch.utils.cpp_extension.load): BSHD tensors in, checked (CUDA, one device, dtype, layout),
// the C API called under a device guard on that device's current PyTorch stream.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#include <cstdint>
#include <limits>

#include "spillway/attention.hpp"

namespace {

spillway_attention_dtype_t DtypeOf(const torch::Tensor& q) {
  TORCH_CHECK(q.scalar_type() == torch::kHalf || q.scalar_type() == torch::kBFloat16,
              "spillway attention takes float16 or bfloat16, q is ", q.scalar_type());
  return q.scalar_type() == torch::kBFloat16 ? SPILLWAY_ATTENTION_BF16 : SPILLWAY_ATTENTION_FP16;
}

// Every tensor must live on q's GPU: the kernels would otherwise fault on a foreign address and
// take the whole CUDA context down.
void CheckOnDeviceOf(const torch::Tensor& t, const char* name, const torch::Tensor& q) {
  TORCH_CHECK(t.defined(), name, " is undefined");
  TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor, it is on ", t.device());
  TORCH_CHECK(t.device() == q.device(), name, " is on ", t.device(), " but q is on ", q.device());
}

// A [batch, seq, heads, dim] tensor of q's dtype on q's device, dim contiguous. The C API checks
// the rest (16-byte aligned data, strides multiples of 8) and names what is wrong.
spillway_attention_tensor_t View(const torch::Tensor& t, const char* name, const torch::Tensor& q) {
  CheckOnDeviceOf(t, name, q);
  TORCH_CHECK(t.scalar_type() == q.scalar_type(), name, " is ", t.scalar_type(), " but q is ",
              q.scalar_type());
  TORCH_CHECK(t.dim() == 4 && t.stride(3) == 1, name,
              " must be [batch, seq, heads, dim] with dim contiguous (stride(3) == 1); sizes ",
              t.sizes(), ", strides ", t.strides());
  return {t.data_ptr(), t.stride(0), t.stride(2), t.stride(1)};
}

int32_t Int32(int64_t value, const char* what) {
  TORCH_CHECK(value <= std::numeric_limits<int32_t>::max(), what, " ", value, " is too large");
  return static_cast<int32_t>(value);
}

// REQUIRES: q, k, v checked by View. k and v must agree, and with q on batch and head dim.
spillway_attention_sdpa_problem_t Problem(const torch::Tensor& q, const torch::Tensor& k,
                                          const torch::Tensor& v, bool causal, double scale) {
  TORCH_CHECK(k.sizes() == v.sizes(), "k ", k.sizes(), " and v ", v.sizes(), " differ in shape");
  TORCH_CHECK(k.size(0) == q.size(0) && k.size(3) == q.size(3), "k ", k.sizes(), " must match q ",
              q.sizes(), " in batch (dim 0) and head dim (dim 3)");
  return {DtypeOf(q),
          Int32(q.size(0), "batch"),
          Int32(q.size(2), "query heads"),
          Int32(k.size(2), "key/value heads"),
          Int32(q.size(1), "query length"),
          Int32(k.size(1), "key length"),
          Int32(q.size(3), "head dim"),
          float(scale),
          causal ? 1 : 0,
          nullptr,
          nullptr};
}

// lse: float32 [batch, seq_q, heads_q], contiguous (token-major, as the C API writes it).
float* LseView(const torch::Tensor& lse, const torch::Tensor& q) {
  CheckOnDeviceOf(lse, "lse", q);
  TORCH_CHECK(lse.scalar_type() == torch::kFloat, "lse must be float32, it is ", lse.scalar_type());
  TORCH_CHECK(lse.dim() == 3 && lse.size(0) == q.size(0) && lse.size(1) == q.size(1) &&
                  lse.size(2) == q.size(2) && lse.is_contiguous(),
              "lse must be a contiguous [batch, seq_q, heads_q] = [", q.size(0), ", ", q.size(1),
              ", ", q.size(2), "] tensor; sizes ", lse.sizes(), ", strides ", lse.strides());
  return lse.data_ptr<float>();
}

void Check(const spillway::attention::Status& s) { TORCH_CHECK(s.ok(), s.ToString()); }

// Sizes, allocates (on q's device) and launches a call on that device's current stream.
// REQUIRES: a CUDAGuard for q's device is active.
template <typename Args>
void Run(const Args& a, const torch::Tensor& q) {
  std::size_t bytes = 0;
  Check(spillway::attention::WorkspaceSize(a, &bytes));
  torch::Tensor workspace;
  if (bytes > 0) workspace = torch::empty({int64_t(bytes)}, q.options().dtype(torch::kUInt8));
  Check(spillway::attention::Launch(a, bytes > 0 ? workspace.data_ptr() : nullptr, bytes,
                                    at::cuda::getCurrentCUDAStream(q.device().index()).stream()));
}

std::vector<torch::Tensor> Forward(torch::Tensor q, torch::Tensor k, torch::Tensor v, bool causal,
                                   double scale) {
  CheckOnDeviceOf(q, "q", q);
  const c10::cuda::CUDAGuard guard(q.device());
  spillway_attention_sdpa_forward_args_t a{};
  a.q = View(q, "q", q);
  a.k = View(k, "k", q);
  a.v = View(v, "v", q);
  a.problem = Problem(q, k, v, causal, scale);
  auto o = torch::empty(q.sizes(), q.options());  // contiguous BSHD whatever q's strides
  auto lse = torch::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(torch::kFloat));
  a.o = View(o, "o", q);
  a.lse = lse.data_ptr<float>();
  Run(a, q);
  return {o, lse};
}

std::vector<torch::Tensor> Backward(torch::Tensor d_o, torch::Tensor q, torch::Tensor k,
                                    torch::Tensor v, torch::Tensor o, torch::Tensor lse,
                                    bool causal, double scale) {
  CheckOnDeviceOf(q, "q", q);
  CheckOnDeviceOf(d_o, "d_o", q);
  const c10::cuda::CUDAGuard guard(q.device());
  d_o = d_o.contiguous();
  spillway_attention_sdpa_backward_args_t a{};
  a.q = View(q, "q", q);
  a.k = View(k, "k", q);
  a.v = View(v, "v", q);
  a.o = View(o, "o", q);
  a.d_o = View(d_o, "d_o", q);
  a.problem = Problem(q, k, v, causal, scale);
  TORCH_CHECK(o.sizes() == q.sizes() && d_o.sizes() == q.sizes(), "o ", o.sizes(), " and d_o ",
              d_o.sizes(), " must have q's shape ", q.sizes());
  a.lse = LseView(lse, q);
  auto dq = torch::empty(q.sizes(), q.options());
  auto dk = torch::empty(k.sizes(), k.options());
  auto dv = torch::empty(v.sizes(), v.options());
  a.dq = View(dq, "dq", q);
  a.dk = View(dk, "dk", q);
  a.dv = View(dv, "dv", q);
  a.deterministic = 1;
  Run(a, q);
  return {dq, dk, dv};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &Forward, "SDPA forward: (o, lse)");
  m.def("backward", &Backward, "SDPA backward: (dq, dk, dv)");
}
