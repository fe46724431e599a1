// PyTorch binding of spillway's attention kernels, compiled at run time by torch_attention.py
// (torch.utils.cpp_extension.load): BSHD tensors in (SDPA; [batch, len, width] for additive
// attention), checked (CUDA, one device, dtype, layout, source lengths), the C API called under a
// device guard on that device's current PyTorch stream.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#include <cstdint>
#include <limits>
#include <optional>

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

// `t` has `q`'s dtype, lives on q's device and is `layout` (`dims` dimensions) with the last one
// contiguous. The C API checks the rest (alignment, strides) and names what is wrong.
void CheckLayout(const torch::Tensor& t, const char* name, const torch::Tensor& q,
                 const char* q_name, int64_t dims, const char* layout) {
  CheckOnDeviceOf(t, name, q);
  TORCH_CHECK(t.scalar_type() == q.scalar_type(), name, " is ", t.scalar_type(), " but ", q_name,
              " is ", q.scalar_type());
  TORCH_CHECK(t.dim() == dims && t.stride(dims - 1) == 1, name, " must be ", layout,
              " with the last dimension contiguous (stride(", dims - 1, ") == 1); sizes ",
              t.sizes(), ", strides ", t.strides());
}

// A [batch, seq, heads, dim] tensor of q's dtype on q's device, dim contiguous (16-byte aligned
// data and strides multiples of 8 are the C API's to check).
spillway_attention_tensor_t View(const torch::Tensor& t, const char* name, const torch::Tensor& q) {
  CheckLayout(t, name, q, "q", 4, "[batch, seq, heads, dim]");
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

// ---- additive (Bahdanau) attention ----

// A [batch, len, width] tensor of q's dtype on q's device, width contiguous. `q` is query_proj.
spillway_attention_tensor_t Rows(const torch::Tensor& t, const char* name, const torch::Tensor& q) {
  CheckLayout(t, name, q, "query_proj", 3, "[batch, len, width]");
  return {t.data_ptr(), t.stride(0), 0, t.stride(1)};
}

// A contiguous float32 tensor of `count` elements on q's device.
float* Floats(const torch::Tensor& t, const char* name, int64_t count, const torch::Tensor& q) {
  CheckOnDeviceOf(t, name, q);
  TORCH_CHECK(t.scalar_type() == torch::kFloat, name, " must be float32, it is ", t.scalar_type());
  TORCH_CHECK(t.numel() == count && t.is_contiguous(), name, " must be contiguous with ", count,
              " elements; sizes ", t.sizes(), ", strides ", t.strides());
  return t.data_ptr<float>();
}

// The problem of query_proj [batch, target, units], key_proj [batch, source, units] and values
// [batch, source, value_dim]; `lengths` is the checked device copy of source_lengths or undefined.
spillway_attention_additive_problem_t AdditiveProblem(const torch::Tensor& q,
                                                      const torch::Tensor& key_proj,
                                                      const torch::Tensor& values,
                                                      const torch::Tensor& lengths) {
  TORCH_CHECK(key_proj.size(0) == q.size(0) && key_proj.size(2) == q.size(2), "key_proj ",
              key_proj.sizes(), " must match query_proj ", q.sizes(), " in batch and units");
  TORCH_CHECK(values.size(0) == q.size(0) && values.size(1) == key_proj.size(1), "values ",
              values.sizes(), " must match key_proj ", key_proj.sizes(), " in batch and length");
  return {DtypeOf(q),
          Int32(q.size(0), "batch"),
          Int32(q.size(1), "target length"),
          Int32(key_proj.size(1), "source length"),
          Int32(q.size(2), "units"),
          Int32(values.size(2), "value dim"),
          lengths.defined() ? lengths.data_ptr<int32_t>() : nullptr};
}

// source_lengths (optional): an integer tensor [batch] on any device, each entry in
// [0, source_len] (0: the row sees no source, its context is 0). The C API cannot read device
// lengths before launching (its kernels skip and report a bad sequence afterwards), so the
// binding reads them here (a copy of `batch` integers to the host, which waits for the stream)
// and raises, before any launch, naming the first entry out of range. Returns them as a
// contiguous int32 tensor on q's device, or an undefined tensor when none were given.
torch::Tensor SourceLengths(const std::optional<torch::Tensor>& source_lengths, int64_t batch,
                            int64_t source_len, const torch::Tensor& q) {
  if (!source_lengths.has_value() || !source_lengths->defined()) return {};
  const torch::Tensor& lengths = *source_lengths;
  TORCH_CHECK(!lengths.is_floating_point() && !lengths.is_complex() &&
                  lengths.scalar_type() != torch::kBool,
              "source_lengths must be an integer tensor, it is ", lengths.scalar_type());
  TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == batch, "source_lengths must be [batch] = [",
              batch, "]; sizes ", lengths.sizes());
  const torch::Tensor host = lengths.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t* values = host.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    TORCH_CHECK(values[b] >= 0 && values[b] <= source_len, "source_lengths[", b, "] is ", values[b],
                "; it must be in [0, source_len = ", source_len, "]");
  }
  return host.to(torch::kInt).to(q.device()).contiguous();
}

std::vector<torch::Tensor> AdditiveForward(torch::Tensor query_proj, torch::Tensor key_proj,
                                           torch::Tensor values, torch::Tensor attention_v,
                                           std::optional<torch::Tensor> source_lengths) {
  const torch::Tensor& q = query_proj;
  CheckOnDeviceOf(q, "query_proj", q);
  const c10::cuda::CUDAGuard guard(q.device());
  spillway_attention_additive_forward_args_t a{};
  a.query_proj = Rows(q, "query_proj", q);
  a.key_proj = Rows(key_proj, "key_proj", q);
  a.values = Rows(values, "values", q);
  a.attention_v = Floats(attention_v, "attention_v", q.size(2), q);
  const torch::Tensor lengths = SourceLengths(source_lengths, q.size(0), key_proj.size(1), q);
  a.problem = AdditiveProblem(q, key_proj, values, lengths);
  auto context = torch::empty({q.size(0), q.size(1), values.size(2)}, q.options());
  auto lse = torch::empty({q.size(0), q.size(1)}, q.options().dtype(torch::kFloat));
  a.context = Rows(context, "context", q);
  a.lse = lse.data_ptr<float>();
  Run(a, q);
  return {context, lse};
}

std::vector<torch::Tensor> AdditiveBackward(torch::Tensor d_context, torch::Tensor query_proj,
                                            torch::Tensor key_proj, torch::Tensor values,
                                            torch::Tensor attention_v, torch::Tensor context,
                                            torch::Tensor lse,
                                            std::optional<torch::Tensor> source_lengths) {
  const torch::Tensor& q = query_proj;
  CheckOnDeviceOf(q, "query_proj", q);
  CheckOnDeviceOf(d_context, "d_context", q);
  const c10::cuda::CUDAGuard guard(q.device());
  d_context = d_context.contiguous();
  spillway_attention_additive_backward_args_t a{};
  a.query_proj = Rows(q, "query_proj", q);
  a.key_proj = Rows(key_proj, "key_proj", q);
  a.values = Rows(values, "values", q);
  a.attention_v = Floats(attention_v, "attention_v", q.size(2), q);
  a.context = Rows(context, "context", q);
  a.d_context = Rows(d_context, "d_context", q);
  const torch::Tensor lengths = SourceLengths(source_lengths, q.size(0), key_proj.size(1), q);
  a.problem = AdditiveProblem(q, key_proj, values, lengths);
  const std::vector<int64_t> context_shape = {q.size(0), q.size(1), values.size(2)};
  TORCH_CHECK(context.sizes() == context_shape && d_context.sizes() == context_shape, "context ",
              context.sizes(), " and d_context ", d_context.sizes(), " must be ",
              c10::IntArrayRef(context_shape));
  a.lse = Floats(lse, "lse", q.size(0) * q.size(1), q);
  auto d_query_proj = torch::empty(q.sizes(), q.options());
  auto d_key_proj = torch::empty(key_proj.sizes(), q.options());
  auto d_values = torch::empty(values.sizes(), q.options());
  auto d_attention_v = torch::empty({q.size(2)}, q.options().dtype(torch::kFloat));
  a.d_query_proj = Rows(d_query_proj, "d_query_proj", q);
  a.d_key_proj = Rows(d_key_proj, "d_key_proj", q);
  a.d_values = Rows(d_values, "d_values", q);
  a.d_attention_v = d_attention_v.data_ptr<float>();
  Run(a, q);
  return {d_query_proj, d_key_proj, d_values, d_attention_v};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &Forward, "SDPA forward: (o, lse)");
  m.def("backward", &Backward, "SDPA backward: (dq, dk, dv)");
  m.def("additive_forward", &AdditiveForward,
        "additive attention forward (source_lengths optional, each in [0, source_len]): "
        "(context, lse)",
        pybind11::arg("query_proj"), pybind11::arg("key_proj"), pybind11::arg("values"),
        pybind11::arg("attention_v"), pybind11::arg("source_lengths") = pybind11::none());
  m.def("additive_backward", &AdditiveBackward,
        "additive attention backward: (d_query_proj, d_key_proj, d_values, d_attention_v)",
        pybind11::arg("d_context"), pybind11::arg("query_proj"), pybind11::arg("key_proj"),
        pybind11::arg("values"), pybind11::arg("attention_v"), pybind11::arg("context"),
        pybind11::arg("lse"), pybind11::arg("source_lengths") = pybind11::none());
}
