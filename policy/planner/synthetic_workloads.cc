// The synthetic transformer and CNN training steps (see synthetic_workloads.h).
#include "policy/planner/synthetic_workloads.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace spillway::policy {
namespace {

// Builds a workload event by event; kernels get their compute time from FLOPs and bytes.
class StepBuilder {
 public:
  StepBuilder(std::string name, const SyntheticDevice& device) : device_(device) {
    w_.name = std::move(name);
  }

  uint64_t Persistent(const std::string& name, uint64_t bytes, const std::string& site) {
    return Add(name, bytes, site, true);
  }
  uint64_t Alloc(const std::string& name, uint64_t bytes, const std::string& site) {
    const uint64_t id = Add(name, bytes, site, false);
    StepEvent e;
    e.kind = StepEvent::Kind::kAlloc;
    e.alloc_id = id;
    w_.step.push_back(std::move(e));
    return id;
  }
  void Free(uint64_t id) {
    StepEvent e;
    e.kind = StepEvent::Kind::kFree;
    e.alloc_id = id;
    w_.step.push_back(std::move(e));
  }
  // A kernel touching all of each listed allocation.
  void Kernel(const std::string& kernel, double flops, std::initializer_list<uint64_t> ids) {
    StepEvent e;
    e.launch.kernel = kernel;
    uint64_t bytes = 0;
    for (uint64_t id : ids) {
      const uint64_t size = w_.allocation(id).bytes;
      bytes += size;
      e.launch.accesses.push_back(ChunkRange{id, 0, ChunksOf(size)});
    }
    e.launch.compute_seconds = std::max(flops / device_.flops_per_s,
                                        static_cast<double>(bytes) / device_.memory_bytes_per_s);
    w_.step.push_back(std::move(e));
  }
  uint64_t Bytes(uint64_t id) const { return w_.allocation(id).bytes; }
  // Numbered as policy files and the engine number allocations (NumberCanonically).
  Workload Take(std::string description) {
    w_.description = std::move(description);
    return NumberCanonically(std::move(w_));
  }

 private:
  uint64_t Add(const std::string& name, uint64_t bytes, const std::string& site, bool persistent) {
    WorkloadAllocation a;
    a.id = w_.allocations.size() + 1;
    a.bytes = bytes;
    a.name = name;
    a.call_site = site;
    a.modules = {persistent ? "libtorch_cuda.so" : "libc10_cuda.so", "libtorch_python.so"};
    a.persistent = persistent;
    w_.allocations.push_back(std::move(a));
    return w_.allocations.back().id;
  }

  SyntheticDevice device_;
  Workload w_;
};

// A parameter with its gradient and optimizer state (Adam: two moments; SGD momentum: one).
struct Param {
  uint64_t weight, grad, m, v;
};

Param MakeParam(StepBuilder& b, const std::string& name, uint64_t elements, bool adam) {
  const uint64_t bytes = elements * 4;
  Param p;
  p.weight = b.Persistent(name + ".weight", bytes, "nn.Module.__init__");
  p.grad = b.Persistent(name + ".grad", bytes, "autograd.accumulate_grad");
  p.m = b.Persistent(name + ".exp_avg", bytes, "optim.step");
  p.v = adam ? b.Persistent(name + ".exp_avg_sq", bytes, "optim.step") : 0;
  return p;
}

void OptimizerStep(StepBuilder& b, const std::vector<std::pair<Param, uint64_t>>& params) {
  for (const auto& [p, elements] : params) {
    const double flops = 10.0 * static_cast<double>(elements);
    if (p.v != 0) {
      b.Kernel("adam_update", flops, {p.weight, p.grad, p.m, p.v});
    } else {
      b.Kernel("sgd_momentum_update", flops, {p.weight, p.grad, p.m});
    }
  }
}

}  // namespace

Workload MakeTransformerStep(const TransformerShape& s, const SyntheticDevice& device) {
  StepBuilder b(absl::StrCat("transformer-", s.layers, "x", s.hidden), device);
  const uint64_t h = s.hidden;
  const uint64_t tokens = uint64_t(s.batch) * s.seq;
  const uint64_t act = tokens * h * 2;  // one fp16 activation of the residual stream
  const double mm = 2.0 * static_cast<double>(tokens) * static_cast<double>(h);  // flops per h
  std::vector<std::pair<Param, uint64_t>> params;
  const Param embed = MakeParam(b, "wte", uint64_t(s.vocab) * h, true);
  params.push_back({embed, uint64_t(s.vocab) * h});
  struct Layer {
    Param qkv, proj, fc1, fc2;
  };
  std::vector<Layer> layers;
  for (int l = 0; l < s.layers; ++l) {
    const std::string n = absl::StrCat("h.", l);
    Layer layer{MakeParam(b, n + ".attn.c_attn", 3 * h * h, true),
                MakeParam(b, n + ".attn.c_proj", h * h, true),
                MakeParam(b, n + ".mlp.c_fc", 4 * h * h, true),
                MakeParam(b, n + ".mlp.c_proj", 4 * h * h, true)};
    params.push_back({layer.qkv, 3 * h * h});
    params.push_back({layer.proj, h * h});
    params.push_back({layer.fc1, 4 * h * h});
    params.push_back({layer.fc2, 4 * h * h});
    layers.push_back(layer);
  }
  // Forward: saved activations per layer.
  struct Saved {
    uint64_t ln1, qkv, attn, ln2, fc1, gelu;
  };
  std::vector<Saved> saved;
  uint64_t x = b.Alloc("embeddings.out", act, "Embedding.forward");
  b.Kernel("embedding_lookup", 0, {embed.weight, x});
  std::vector<uint64_t> residual = {x};
  for (int l = 0; l < s.layers; ++l) {
    const Layer& L = layers[l];
    const std::string n = absl::StrCat("h.", l);
    Saved sv;
    sv.ln1 = b.Alloc(n + ".ln_1.out", act, "LayerNorm.forward");
    b.Kernel("layer_norm_fwd", 0, {x, sv.ln1});
    sv.qkv = b.Alloc(n + ".attn.qkv", 3 * act, "Linear.forward");
    b.Kernel("gemm_qkv_fwd", 3 * mm * h, {sv.ln1, L.qkv.weight, sv.qkv});
    sv.attn = b.Alloc(n + ".attn.out", act, "scaled_dot_product_attention");
    b.Kernel("flash_attention_fwd", 4.0 * tokens * s.seq * h / 2, {sv.qkv, sv.attn});
    const uint64_t x2 = b.Alloc(n + ".attn.residual", act, "Linear.forward");
    b.Kernel("gemm_proj_fwd", mm * h, {sv.attn, L.proj.weight, x, x2});
    sv.ln2 = b.Alloc(n + ".ln_2.out", act, "LayerNorm.forward");
    b.Kernel("layer_norm_fwd", 0, {x2, sv.ln2});
    sv.fc1 = b.Alloc(n + ".mlp.c_fc.out", 4 * act, "Linear.forward");
    b.Kernel("gemm_fc1_fwd", 4 * mm * h, {sv.ln2, L.fc1.weight, sv.fc1});
    sv.gelu = b.Alloc(n + ".mlp.gelu.out", 4 * act, "GELU.forward");
    b.Kernel("gelu_fwd", 0, {sv.fc1, sv.gelu});
    const uint64_t x3 = b.Alloc(n + ".mlp.residual", act, "Linear.forward");
    b.Kernel("gemm_fc2_fwd", 4 * mm * h, {sv.gelu, L.fc2.weight, x2, x3});
    residual.push_back(x2);
    residual.push_back(x3);
    saved.push_back(sv);
    x = x3;
  }
  // Head: logits in fp16 (tied embedding), loss, and the logits' gradient in place.
  const uint64_t logits =
      b.Alloc("lm_head.logits", tokens * uint64_t(s.vocab) * 2, "Linear.forward");
  b.Kernel("gemm_lm_head_fwd", mm * s.vocab, {x, embed.weight, logits});
  b.Kernel("cross_entropy_fwd_bwd", 0, {logits});
  uint64_t dx = b.Alloc("grad.lm_head", act, "autograd.engine");
  b.Kernel("gemm_lm_head_bwd_data", mm * s.vocab, {logits, embed.weight, dx});
  b.Kernel("gemm_lm_head_bwd_weight", mm * s.vocab, {logits, x, embed.grad});
  b.Free(logits);
  // Backward, layer by layer in reverse; saved activations die after their last use.
  for (int l = s.layers - 1; l >= 0; --l) {
    const Layer& L = layers[l];
    const Saved& sv = saved[l];
    const std::string n = absl::StrCat("h.", l, ".grad");
    const uint64_t dgelu = b.Alloc(n + ".gelu", 4 * act, "autograd.engine");
    b.Kernel("gemm_fc2_bwd_data", 4 * mm * h, {dx, L.fc2.weight, dgelu});
    b.Kernel("gemm_fc2_bwd_weight", 4 * mm * h, {dx, sv.gelu, L.fc2.grad});
    b.Free(sv.gelu);
    b.Kernel("gelu_bwd", 0, {dgelu, sv.fc1});
    b.Free(sv.fc1);
    const uint64_t dln2 = b.Alloc(n + ".ln_2", act, "autograd.engine");
    b.Kernel("gemm_fc1_bwd_data", 4 * mm * h, {dgelu, L.fc1.weight, dln2});
    b.Kernel("gemm_fc1_bwd_weight", 4 * mm * h, {dgelu, sv.ln2, L.fc1.grad});
    b.Free(dgelu);
    b.Kernel("layer_norm_bwd", 0, {dln2, sv.ln2, dx});
    b.Free(sv.ln2);
    b.Free(dln2);
    const uint64_t dattn = b.Alloc(n + ".attn", act, "autograd.engine");
    b.Kernel("gemm_proj_bwd_data", mm * h, {dx, L.proj.weight, dattn});
    b.Kernel("gemm_proj_bwd_weight", mm * h, {dx, sv.attn, L.proj.grad});
    b.Free(sv.attn);
    const uint64_t dqkv = b.Alloc(n + ".qkv", 3 * act, "autograd.engine");
    b.Kernel("flash_attention_bwd", 2.5 * 4.0 * tokens * s.seq * h / 2, {dattn, sv.qkv, dqkv});
    b.Free(dattn);
    b.Free(sv.qkv);
    const uint64_t dln1 = b.Alloc(n + ".ln_1", act, "autograd.engine");
    b.Kernel("gemm_qkv_bwd_data", 3 * mm * h, {dqkv, L.qkv.weight, dln1});
    b.Kernel("gemm_qkv_bwd_weight", 3 * mm * h, {dqkv, sv.ln1, L.qkv.grad});
    b.Free(dqkv);
    b.Kernel("layer_norm_bwd", 0, {dln1, sv.ln1, dx});
    b.Free(sv.ln1);
    b.Free(dln1);
  }
  b.Kernel("embedding_bwd", 0, {dx, embed.grad});
  b.Free(dx);
  for (uint64_t r : residual) b.Free(r);
  OptimizerStep(b, params);
  return b.Take(absl::StrCat("GPT-2-like transformer: ", s.layers, " layers, hidden ", s.hidden,
                             ", batch ", s.batch, " x ", s.seq, " tokens, vocab ", s.vocab,
                             "; fp32 weights + Adam, fp16 activations; ", device.flops_per_s / 1e12,
                             " TFLOP/s"));
}

Workload MakeCnnStep(const CnnShape& s, const SyntheticDevice& device) {
  StepBuilder b(absl::StrCat("cnn-resnet-b", s.batch), device);
  std::vector<std::pair<Param, uint64_t>> params;
  auto conv_param = [&](const std::string& name, uint64_t cin, uint64_t cout, uint64_t k) {
    const Param p = MakeParam(b, name, cin * cout * k * k, false);
    params.push_back({p, cin * cout * k * k});
    return p;
  };
  const uint64_t n = s.batch;
  auto fmap = [&](uint64_t c, uint64_t hw) { return n * c * hw * hw * 2; };  // fp16 NCHW
  auto conv_flops = [&](uint64_t cin, uint64_t cout, uint64_t k, uint64_t hw) {
    return 2.0 * static_cast<double>(n * cin * cout * k * k * hw * hw);
  };
  struct Conv {
    Param p;
    uint64_t cin, cout, k, hw;
    uint64_t in, out;  // saved input feature map and this conv's (bn+relu'd) output
  };
  std::vector<Conv> convs;
  const uint64_t input = b.Alloc("input.images", n * 3 * s.image * s.image * 2, "DataLoader");
  b.Kernel("h2d_images", 0, {input});
  uint64_t hw = s.image / 2;
  Conv stem{conv_param("conv1", 3, s.width, 7), 3, uint64_t(s.width), 7, hw, input, 0};
  stem.out = b.Alloc("conv1.out", fmap(s.width, hw), "Conv2d.forward");
  b.Kernel("conv_bn_relu_fwd", conv_flops(3, s.width, 7, hw), {input, stem.p.weight, stem.out});
  convs.push_back(stem);
  hw /= 2;
  const uint64_t pooled = b.Alloc("maxpool.out", fmap(s.width, hw), "MaxPool2d.forward");
  b.Kernel("maxpool_fwd", 0, {stem.out, pooled});
  uint64_t x = pooled;
  uint64_t cin = s.width;
  std::vector<uint64_t> block_outputs;
  for (size_t stage = 0; stage < s.blocks.size(); ++stage) {
    const uint64_t mid = uint64_t(s.width) << stage;
    const uint64_t cout = mid * 4;
    for (int blk = 0; blk < s.blocks[stage]; ++blk) {
      if (stage > 0 && blk == 0) hw /= 2;
      const std::string nm = absl::StrCat("layer", stage + 1, ".", blk);
      const uint64_t spec[3][3] = {{cin, mid, 1}, {mid, mid, 3}, {mid, cout, 1}};
      uint64_t in = x;
      for (int c = 0; c < 3; ++c) {
        Conv conv{conv_param(absl::StrCat(nm, ".conv", c + 1), spec[c][0], spec[c][1], spec[c][2]),
                  spec[c][0],
                  spec[c][1],
                  spec[c][2],
                  hw,
                  in,
                  0};
        conv.out = b.Alloc(absl::StrCat(nm, ".conv", c + 1, ".out"), fmap(spec[c][1], hw),
                           "Conv2d.forward");
        if (c == 2) {
          b.Kernel("conv_bn_add_relu_fwd", conv_flops(spec[c][0], spec[c][1], spec[c][2], hw),
                   {in, conv.p.weight, x, conv.out});
        } else {
          b.Kernel("conv_bn_relu_fwd", conv_flops(spec[c][0], spec[c][1], spec[c][2], hw),
                   {in, conv.p.weight, conv.out});
        }
        convs.push_back(conv);
        in = conv.out;
      }
      x = in;
      cin = cout;
    }
  }
  const Param fc = MakeParam(b, "fc", cin * 1000, false);
  params.push_back({fc, cin * 1000});
  const uint64_t logits = b.Alloc("fc.logits", n * 1000 * 4, "Linear.forward");
  b.Kernel("avgpool_fc_fwd", 2.0 * n * cin * 1000, {x, fc.weight, logits});
  b.Kernel("cross_entropy_fwd_bwd", 0, {logits});
  uint64_t dx = b.Alloc("grad.fc", fmap(cin, hw), "autograd.engine");
  b.Kernel("avgpool_fc_bwd", 4.0 * n * cin * 1000, {logits, fc.weight, x, fc.grad, dx});
  b.Free(logits);
  for (size_t i = convs.size(); i-- > 0;) {
    const Conv& c = convs[i];
    const double f = conv_flops(c.cin, c.cout, c.k, c.hw);
    // The input gradient has the input's shape (the stem's input needs none).
    const uint64_t din =
        i == 0 ? 0 : b.Alloc(absl::StrCat("grad.", i), b.Bytes(c.in), "autograd.engine");
    b.Kernel("conv_bwd_weight", f, {dx, c.in, c.p.grad});
    if (din != 0) b.Kernel("conv_bn_relu_bwd_data", f, {dx, c.out, c.p.weight, din});
    b.Free(c.out);
    b.Free(dx);
    dx = din;
  }
  b.Free(pooled);
  b.Free(input);
  OptimizerStep(b, params);
  return b.Take(absl::StrCat("ResNet-like CNN: ", s.blocks.size(), " stages (",
                             absl::StrJoin(s.blocks, "/"), " bottleneck blocks), batch ", s.batch,
                             " at ", s.image,
                             " px; fp32 weights + SGD momentum, fp16 activations; ",
                             device.flops_per_s / 1e12, " TFLOP/s"));
}

absl::StatusOr<Workload> MakeSyntheticWorkload(std::string_view name) {
  if (name == "transformer") return MakeTransformerStep(TransformerShape{});
  if (name == "transformer-small") {
    TransformerShape s;
    s.layers = 6;
    s.batch = 4;
    return MakeTransformerStep(s);
  }
  if (name == "cnn") return MakeCnnStep(CnnShape{});
  if (name == "cnn-small") {
    CnnShape s;
    s.batch = 16;
    s.image = 112;
    return MakeCnnStep(s);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown synthetic workload '", std::string(name),
                   "' (known: ", absl::StrJoin(SyntheticWorkloadNames(), ", "), ")"));
}

std::vector<std::string> SyntheticWorkloadNames() {
  return {"transformer", "transformer-small", "cnn", "cnn-small"};
}

}  // namespace spillway::policy
