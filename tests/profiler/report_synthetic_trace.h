// A synthetic training-like TraceModel for the report and export tests: persistent weights
// allocated at start-up, then `steps` identical steps that allocate activations in a forward pass,
// free them in a backward pass, and touch the weights; kernel times, UVM records and resident
// samples included. The expected peak, period and ranking follow from the construction.
#ifndef SPILLWAY_TESTS_PROFILER_REPORT_SYNTHETIC_TRACE_H_
#define SPILLWAY_TESTS_PROFILER_REPORT_SYNTHETIC_TRACE_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "profiler/report/trace_model.h"

namespace spillway::report::testing {

inline constexpr uint64_t kMiB = uint64_t{1} << 20;

struct SyntheticShape {
  int layers = 4;
  int steps = 6;
  int warmup_launches = 3;            // odd launches before the first step
  uint64_t weight_bytes = 64 * kMiB;  // per layer
  uint64_t activation_bytes = 32 * kMiB;
  uint64_t cold_bytes = 512 * kMiB;  // allocated at start, touched once per step (optimizer)
  uint64_t kernel_ns = 5'000'000;    // 5 ms per kernel
};

// Sites: 0 weights, 1 activations, 2 cold buffer, 3 warm-up scratch.
// Functions: fwd_<i>, bwd_<i>, optimizer, init.
inline TraceModel SyntheticTrace(const SyntheticShape& s = {}) {
  TraceModel m;
  m.header.job = "synthetic_train --layers " + std::to_string(s.layers);
  m.header.device = "simgpu (16 GiB)";
  m.header.cuda_version = "12.4";
  m.header.driver_version = "550.00";
  m.header.spillway_version = "0.1.0";
  m.header.dropped_records = 0;
  m.header.start_ns = 1'000'000'000;
  m.modules = {{"", "/nonexistent/libtrain.so"}};
  for (uint64_t site = 0; site < 4; ++site) {
    m.sites.push_back({{{0, 0x1000 + site * 0x40, ""}, {0, 0x9000, ""}}});
  }
  for (int i = 0; i < s.layers; ++i) m.functions.push_back("fwd_" + std::to_string(i));
  for (int i = 0; i < s.layers; ++i) m.functions.push_back("bwd_" + std::to_string(i));
  m.functions.push_back("optimizer");
  m.functions.push_back("init");
  const uint32_t optimizer = 2 * s.layers, init = optimizer + 1;

  uint64_t now = m.header.start_ns;
  uint64_t next_id = 1, address = 0x7f0000000000;
  const auto allocate = [&](uint64_t bytes, uint32_t site, AllocKind kind) {
    m.allocations.push_back({next_id, address, bytes, kind, 0, site, now, kNoTime});
    address += bytes;
    return next_id++;
  };
  const auto launch = [&](uint32_t function, std::vector<Access> accesses) {
    Launch l;
    l.time_ns = now;
    l.stream = 7;
    l.function = function;
    l.accesses = std::move(accesses);
    l.kernel_start_ns = now + 10'000;
    l.kernel_end_ns = now + 10'000 + s.kernel_ns;
    m.launches.push_back(std::move(l));
    now += s.kernel_ns + 50'000;
  };
  std::vector<uint64_t> weights;
  for (int i = 0; i < s.layers; ++i) {
    weights.push_back(allocate(s.weight_bytes, 0, AllocKind::kManaged));
    now += 1000;
  }
  const uint64_t cold = allocate(s.cold_bytes, 2, AllocKind::kManaged);
  const uint64_t scratch = allocate(8 * kMiB, 3, AllocKind::kDevice);
  for (int i = 0; i < s.warmup_launches; ++i) launch(init, {{scratch, 0, 0}});
  m.allocations.back().free_ns = now;
  m.copies.push_back({Copy::Kind::kMemcpy, now, now + 100'000, 7, 16 * kMiB, "HtoD"});
  m.copies.push_back({Copy::Kind::kMemset, now, kNoTime, 7, 8 * kMiB, ""});
  now += 200'000;
  for (int step = 0; step < s.steps; ++step) {
    std::vector<uint64_t> acts;
    for (int i = 0; i < s.layers; ++i) {
      acts.push_back(allocate(s.activation_bytes, 1, AllocKind::kAsync));
      launch(static_cast<uint32_t>(i), {{weights[i], 0, s.weight_bytes}, {acts.back(), 0, 0}});
    }
    for (int i = s.layers - 1; i >= 0; --i) {
      launch(static_cast<uint32_t>(s.layers + i),
             {{weights[i], 0, s.weight_bytes}, {acts[i], 0, s.activation_bytes}});
      m.allocations[acts[i] - 1].free_ns = now;  // ids are 1, 2, ... in allocation order
    }
    launch(optimizer, {{cold, 0, s.cold_bytes}});
    m.resident.push_back({now, s.layers * s.weight_bytes});
    m.uvm.push_back({UvmEvent::Kind::kFault, now, cold, 0, 40});
    m.uvm.push_back({UvmEvent::Kind::kMigrateToDevice, now, cold, s.cold_bytes, 1});
    m.uvm.push_back({UvmEvent::Kind::kMigrateToHost, now, cold, s.cold_bytes / 2, 1});
    m.uvm.push_back({UvmEvent::Kind::kThrashing, now, cold, 0, 2});
    m.uvm.push_back({UvmEvent::Kind::kFault, now, weights[0], 0, 3});
    m.synchronizations++;
  }
  return m;
}

// Launches only (no allocations, one function each): `steps` steps of 12 forward launches, then 12
// backward launches in reverse, each layer's update after its backward or, with `moved`, up to two
// backward launches later by a delay drawn anew every step (as TensorFlow's executor launches the
// ops that are ready at once). 36 launches a step, 1 ms apart.
inline TraceModel ReorderedStepsTrace(bool moved, int steps = 8) {
  TraceModel m;
  for (int l = 0; l < 12; ++l) {
    for (const char* kind : {"fwd_", "bwd_", "upd_"})
      m.functions.push_back(kind + std::to_string(l));
  }
  uint64_t now = 0;
  const auto launch = [&](int layer, int kind) {
    Launch l;
    l.time_ns = now;
    now += 1'000'000;
    l.function = static_cast<uint32_t>(3 * layer + kind);
    m.launches.push_back(l);
  };
  uint32_t draw = 12345;
  for (int s = 0; s < steps; ++s) {
    for (int l = 0; l < 12; ++l) launch(l, 0);
    std::vector<std::vector<int>> updates_after(12);
    for (int i = 0; i < 12; ++i) {
      draw = draw * 1103515245u + 12345u;
      const int delay = moved ? static_cast<int>((draw >> 16) % 3) : 0;
      updates_after[static_cast<size_t>(std::min(i + delay, 11))].push_back(11 - i);
    }
    for (int i = 0; i < 12; ++i) {
      launch(11 - i, 1);
      for (const int u : updates_after[static_cast<size_t>(i)]) launch(u, 2);
    }
  }
  return m;
}

// The highest live total the construction reaches: all weights, the cold buffer, and every
// activation of one step (the scratch buffer is freed before the first step).
inline uint64_t SyntheticPeak(const SyntheticShape& s = {}) {
  return s.layers * s.weight_bytes + s.cold_bytes + s.layers * s.activation_bytes;
}

}  // namespace spillway::report::testing

#endif  // SPILLWAY_TESTS_PROFILER_REPORT_SYNTHETIC_TRACE_H_
