// CPU tests of the attention C API's validation: every rule gives its status and a message that
// names the culprit, workspace sizes are as documented, and no rejected call reaches a launch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "attention_kernels/src/tiling.h"
#include "spillway/attention.h"
#include "spillway/attention.hpp"
#include "tests/attention_kernels/recording_launch.h"

namespace spillway::attention {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Stand-in device addresses, never dereferenced (the launchers are recording fakes): each 256
// bytes of `offset` is a 64 MiB slot of its own, so the fixtures' buffers do not overlap, and the
// rest of `offset` keeps its alignment.
void* At(std::size_t offset) {
  constexpr uintptr_t kBase = uintptr_t{1} << 40, kSlot = uintptr_t{64} << 20;
  return reinterpret_cast<void*>(kBase + (offset / 256) * kSlot + offset % 256);
}

spillway_attention_sdpa_problem_t SdpaProblem() {
  spillway_attention_sdpa_problem_t p{};
  p.dtype = SPILLWAY_ATTENTION_BF16;
  p.batch = 2;
  p.num_heads_q = 8;
  p.num_heads_kv = 2;
  p.seqlen_q = 100;
  p.seqlen_k = 300;
  p.head_dim = 128;
  return p;
}

spillway_attention_sdpa_forward_args_t ForwardArgs() {
  spillway_attention_sdpa_forward_args_t a{};
  a.problem = SdpaProblem();
  a.q = BshdTensor(At(0), 100, 8, 128);
  a.k = BshdTensor(At(256), 300, 2, 128);
  a.v = BshdTensor(At(512), 300, 2, 128);
  a.o = BshdTensor(At(768), 100, 8, 128);
  a.lse = reinterpret_cast<float*>(At(1024));
  return a;
}

spillway_attention_sdpa_backward_args_t BackwardArgs() {
  const spillway_attention_sdpa_forward_args_t f = ForwardArgs();
  spillway_attention_sdpa_backward_args_t a{};
  a.problem = f.problem;
  a.q = f.q;
  a.k = f.k;
  a.v = f.v;
  a.o = f.o;
  a.lse = f.lse;
  a.d_o = BshdTensor(At(1280), 100, 8, 128);
  a.dq = BshdTensor(At(1536), 100, 8, 128);
  a.dk = BshdTensor(At(1792), 300, 2, 128);
  a.dv = BshdTensor(At(2048), 300, 2, 128);
  return a;
}

spillway_attention_tensor_t Rows(std::size_t offset, int64_t seqlen, int64_t width) {
  return {At(offset), seqlen * width, 0, width};
}

spillway_attention_additive_forward_args_t AdditiveForwardArgs() {
  spillway_attention_additive_forward_args_t a{};
  a.problem = {SPILLWAY_ATTENTION_FP16, 3, 40, 50, 256, 512, nullptr};
  a.query_proj = Rows(0, 40, 256);
  a.key_proj = Rows(256, 50, 256);
  a.values = Rows(512, 50, 512);
  a.attention_v = reinterpret_cast<const float*>(At(768));
  a.context = Rows(1024, 40, 512);
  a.lse = reinterpret_cast<float*>(At(1280));
  return a;
}

spillway_attention_additive_backward_args_t AdditiveBackwardArgs() {
  const spillway_attention_additive_forward_args_t f = AdditiveForwardArgs();
  spillway_attention_additive_backward_args_t a{};
  a.problem = f.problem;
  a.query_proj = f.query_proj;
  a.key_proj = f.key_proj;
  a.values = f.values;
  a.attention_v = f.attention_v;
  a.context = f.context;
  a.lse = f.lse;
  a.d_context = Rows(1536, 40, 512);
  a.d_query_proj = Rows(1792, 40, 256);
  a.d_key_proj = Rows(2048, 50, 256);
  a.d_values = Rows(2304, 50, 512);
  a.d_attention_v = reinterpret_cast<float*>(At(2560));
  return a;
}

class ValidateTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::ResetLaunchCount(); }

  // Runs a forward call expected to fail and checks status, message and that nothing launched.
  void ExpectForwardFails(const spillway_attention_sdpa_forward_args_t& a,
                          spillway_attention_status_t want, const std::string& message_part) {
    EXPECT_EQ(spillway_attention_sdpa_forward(&a, nullptr, 0, nullptr), want);
    EXPECT_PRED2(Contains, spillway_attention_last_error_message(), message_part);
    std::size_t bytes = 0;
    EXPECT_EQ(spillway_attention_sdpa_forward_workspace_size(&a, &bytes), want);
    EXPECT_EQ(testing::LaunchCount(), 0);
  }
};

TEST_F(ValidateTest, ValidForwardLaunchesOnceAndClearsTheMessage) {
  const spillway_attention_sdpa_forward_args_t a = ForwardArgs();
  std::size_t bytes = 99;
  ASSERT_EQ(spillway_attention_sdpa_forward_workspace_size(&a, &bytes), SPILLWAY_ATTENTION_SUCCESS)
      << spillway_attention_last_error_message();
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(spillway_attention_sdpa_forward(&a, nullptr, 0, nullptr), SPILLWAY_ATTENTION_SUCCESS);
  EXPECT_EQ(testing::LaunchCount(), 1);
  EXPECT_STREQ(spillway_attention_last_error_message(), "");
}

TEST_F(ValidateTest, ForwardRejectsEachBrokenRule) {
  auto a = ForwardArgs();
  a.q.data = nullptr;
  ExpectForwardFails(a, SPILLWAY_ATTENTION_ERROR_NULL_POINTER, "q.data is NULL");
  a = ForwardArgs();
  a.lse = nullptr;
  ExpectForwardFails(a, SPILLWAY_ATTENTION_ERROR_NULL_POINTER, "lse is NULL");
  a = ForwardArgs();
  a.k.data = At(258);
  ExpectForwardFails(a, SPILLWAY_ATTENTION_ERROR_MISALIGNED, "k.data is not 16-byte aligned");
  a = ForwardArgs();
  a.v.seq_stride = 2 * 128 + 4;
  ExpectForwardFails(a, SPILLWAY_ATTENTION_ERROR_MISALIGNED, "v strides must be multiples of 8");
  a = ForwardArgs();
  a.problem.head_dim = 96;
  ExpectForwardFails(a, SPILLWAY_ATTENTION_ERROR_UNSUPPORTED_HEAD_DIM, "head_dim 96");
  a = ForwardArgs();
  a.problem.dtype = static_cast<spillway_attention_dtype_t>(7);
  ExpectForwardFails(a, SPILLWAY_ATTENTION_ERROR_UNSUPPORTED_DTYPE, "dtype 7");
  a = ForwardArgs();
  a.problem.num_heads_kv = 3;
  ExpectForwardFails(a, SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE, "multiple of num_heads_kv (3)");
  a = ForwardArgs();
  a.problem.seqlen_k = 0;
  ExpectForwardFails(a, SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE, "seqlen_k is 0");
  a = ForwardArgs();
  a.problem.batch = 70000;
  ExpectForwardFails(a, SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE, "batch is 70000");
  a = ForwardArgs();
  a.problem.causal = 2;
  ExpectForwardFails(a, SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT, "causal is 2");
  a = ForwardArgs();
  a.problem.softmax_scale = NAN;
  ExpectForwardFails(a, SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT, "softmax_scale");
  a = ForwardArgs();
  a.problem.cu_seqlens_q = reinterpret_cast<const int32_t*>(At(0));
  ExpectForwardFails(a, SPILLWAY_ATTENTION_ERROR_NULL_POINTER, "both be set");
  a = ForwardArgs();
  a.o.head_stride = 0;
  ExpectForwardFails(a, SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE, "o is an output");
  a = ForwardArgs();
  a.q.batch_stride = -8;
  ExpectForwardFails(a, SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE, "q has a negative stride");
  a = ForwardArgs();
  a.bias = {At(1), 0, 0, 300};
  ExpectForwardFails(a, SPILLWAY_ATTENTION_ERROR_MISALIGNED, "bias.data is not 2-byte aligned");
  EXPECT_EQ(spillway_attention_sdpa_forward(nullptr, nullptr, 0, nullptr),
            SPILLWAY_ATTENTION_ERROR_NULL_POINTER);
  EXPECT_EQ(testing::LaunchCount(), 0);
}

TEST_F(ValidateTest, ForwardAcceptsBroadcastInputsVarlenAndBhsd) {
  auto a = ForwardArgs();
  a.k.head_stride = 0;  // one K head read by every KV head: an input may broadcast
  a.bias = {At(2), 0, 0, 300};
  EXPECT_EQ(spillway_attention_sdpa_forward(&a, nullptr, 0, nullptr), SPILLWAY_ATTENTION_SUCCESS)
      << spillway_attention_last_error_message();
  a = ForwardArgs();
  a.problem.cu_seqlens_q = reinterpret_cast<const int32_t*>(At(0));
  a.problem.cu_seqlens_k = reinterpret_cast<const int32_t*>(At(64));
  a.q.batch_stride = 3;  // ignored when varlen
  // A varlen forward needs the 256-byte status block.
  EXPECT_EQ(spillway_attention_sdpa_forward(&a, nullptr, 0, nullptr),
            SPILLWAY_ATTENTION_ERROR_WORKSPACE_TOO_SMALL);
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(), "needs 256");
  EXPECT_EQ(spillway_attention_sdpa_forward(&a, At(256), 256, nullptr), SPILLWAY_ATTENTION_SUCCESS)
      << spillway_attention_last_error_message();
  a = ForwardArgs();
  a.q = BhsdTensor(At(0), 100, 8, 128);
  a.o = BhsdTensor(At(768), 100, 8, 128);
  EXPECT_EQ(spillway_attention_sdpa_forward(&a, nullptr, 0, nullptr), SPILLWAY_ATTENTION_SUCCESS);
  EXPECT_EQ(testing::LaunchCount(), 3);
}

TEST_F(ValidateTest, BackwardWorkspaceIsOneFloatPerQueryRowAndHead) {
  auto a = BackwardArgs();
  std::size_t bytes = 0;
  ASSERT_EQ(spillway_attention_sdpa_backward_workspace_size(&a, &bytes), SPILLWAY_ATTENTION_SUCCESS)
      << spillway_attention_last_error_message();
  EXPECT_EQ(bytes, 2u * 100 * 8 * 4);  // 6400, already a multiple of 256
  a.problem.seqlen_q = 3;
  a.problem.batch = 1;
  a.problem.num_heads_q = 2;
  a.problem.num_heads_kv = 1;
  ASSERT_EQ(spillway_attention_sdpa_backward_workspace_size(&a, &bytes),
            SPILLWAY_ATTENTION_SUCCESS);
  EXPECT_EQ(bytes, 256u);  // 24 bytes, rounded up to the alignment
}

TEST_F(ValidateTest, VarlenWorkspacesStartWithTheStatusBlock) {
  auto f = ForwardArgs();
  auto b = BackwardArgs();
  for (auto* p : {&f.problem, &b.problem}) {
    p->cu_seqlens_q = reinterpret_cast<const int32_t*>(At(0));
    p->cu_seqlens_k = reinterpret_cast<const int32_t*>(At(64));
  }
  std::size_t bytes = 0;
  ASSERT_EQ(spillway_attention_sdpa_forward_workspace_size(&f, &bytes), SPILLWAY_ATTENTION_SUCCESS)
      << spillway_attention_last_error_message();
  EXPECT_EQ(bytes, 256u);
  ASSERT_EQ(spillway_attention_sdpa_backward_workspace_size(&b, &bytes),
            SPILLWAY_ATTENTION_SUCCESS);
  EXPECT_EQ(bytes, 256u + 2 * 100 * 8 * 4);  // status block, then D per padded row and head
  EXPECT_EQ(spillway_attention_sdpa_backward(&b, At(0), 6400, nullptr),
            SPILLWAY_ATTENTION_ERROR_WORKSPACE_TOO_SMALL);
  EXPECT_EQ(testing::LaunchCount(), 0);
}

// The status reader goes through the launch seam's device-to-host copy (host memory here).
TEST_F(ValidateTest, VarlenStatusReadsTheWordAtTheStartOfTheWorkspace) {
  alignas(256) spillway_attention_varlen_status_t word[64] = {};
  word[0] = {SPILLWAY_ATTENTION_VARLEN_Q_TOO_LONG, 2};
  spillway_attention_varlen_status_t read{};
  EXPECT_EQ(spillway_attention_sdpa_varlen_status(word, nullptr, &read),
            SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE);
  EXPECT_EQ(read.errors, uint32_t{SPILLWAY_ATTENTION_VARLEN_Q_TOO_LONG});
  EXPECT_EQ(read.first_bad_sequence, 2);
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(),
               "a query length exceeds seqlen_q (first at sequence 2)");
  word[0] = {0, -1};
  EXPECT_EQ(spillway_attention_sdpa_varlen_status(word, nullptr, nullptr),
            SPILLWAY_ATTENTION_SUCCESS);
  EXPECT_STREQ(spillway_attention_last_error_message(), "");
  EXPECT_EQ(spillway_attention_sdpa_varlen_status(nullptr, nullptr, &read),
            SPILLWAY_ATTENTION_ERROR_NULL_POINTER);
  word[0] = {SPILLWAY_ATTENTION_VARLEN_K_OFFSETS, 0};
  const Status status = VarlenStatus(word, nullptr);  // the C++ wrapper
  EXPECT_EQ(status.code(), SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE);
  EXPECT_PRED2(Contains, status.message(), "cu_seqlens_k is negative");
}

TEST_F(ValidateTest, BackwardChecksWorkspaceAndBiasGradient) {
  auto a = BackwardArgs();
  EXPECT_EQ(spillway_attention_sdpa_backward(&a, At(0), 6399, nullptr),
            SPILLWAY_ATTENTION_ERROR_WORKSPACE_TOO_SMALL);
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(), "needs 6400");
  EXPECT_EQ(spillway_attention_sdpa_backward(&a, nullptr, 6400, nullptr),
            SPILLWAY_ATTENTION_ERROR_NULL_POINTER);
  EXPECT_EQ(spillway_attention_sdpa_backward(&a, At(16), 6400, nullptr),
            SPILLWAY_ATTENTION_ERROR_MISALIGNED);
  a.dbias = {At(0), 0, 300 * 100, 300};
  EXPECT_EQ(spillway_attention_sdpa_backward(&a, At(0), 6400, nullptr),
            SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT);
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(), "bias is NULL");
  a.bias = {At(0), 0, 0, 300};
  EXPECT_EQ(spillway_attention_sdpa_backward(&a, At(0), 6400, nullptr),
            SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT);
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(), "same dimensions");
  a.dq.data = nullptr;
  EXPECT_EQ(spillway_attention_sdpa_backward(&a, At(0), 6400, nullptr),
            SPILLWAY_ATTENTION_ERROR_NULL_POINTER);
  EXPECT_EQ(testing::LaunchCount(), 0);
  a = BackwardArgs();
  a.bias = {At(0), 0, 300 * 100, 300};
  a.dbias = {At(2816), 0, 300 * 100, 300};
  EXPECT_EQ(spillway_attention_sdpa_backward(&a, At(0), 6400, nullptr), SPILLWAY_ATTENTION_SUCCESS)
      << spillway_attention_last_error_message();
  EXPECT_EQ(testing::LaunchCount(), 1);
}

// The shapes the CPU reference refuses (SdpaShapeError) are refused here too, before any launch:
// more kv heads than query heads (a zero group size) and a query head count not a multiple.
TEST_F(ValidateTest, HeadCountsTheReferenceRefusesAreRejectedBeforeLaunch) {
  for (const int32_t heads_kv : {16, 3, 0}) {
    auto f = ForwardArgs();
    f.problem.num_heads_kv = heads_kv;
    const std::string want = heads_kv == 0
                                 ? "num_heads_kv is 0"
                                 : "multiple of num_heads_kv (" + std::to_string(heads_kv) + ")";
    ExpectForwardFails(f, SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE, want);
    auto b = BackwardArgs();
    b.problem.num_heads_kv = heads_kv;
    EXPECT_EQ(spillway_attention_sdpa_backward(&b, At(0), 1 << 20, nullptr),
              SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE);
    EXPECT_PRED2(Contains, spillway_attention_last_error_message(), want);
  }
  EXPECT_EQ(testing::LaunchCount(), 0);
}

TEST_F(ValidateTest, BackwardDeterministicMustBeZeroOrOne) {
  for (const int32_t bad : {2, -1, 0x7fffffff}) {
    auto a = BackwardArgs();
    a.deterministic = bad;
    EXPECT_EQ(spillway_attention_sdpa_backward(&a, At(0), 6400, nullptr),
              SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(std::string(spillway_attention_last_error_message()),
              "deterministic is " + std::to_string(bad) + "; it must be 0 or 1");
    std::size_t bytes = 0;
    EXPECT_EQ(spillway_attention_sdpa_backward_workspace_size(&a, &bytes),
              SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT);
  }
  EXPECT_EQ(testing::LaunchCount(), 0);
  for (const int32_t good : {0, 1}) {
    auto a = BackwardArgs();
    a.deterministic = good;
    EXPECT_EQ(spillway_attention_sdpa_backward(&a, At(0), 6400, nullptr),
              SPILLWAY_ATTENTION_SUCCESS)
        << spillway_attention_last_error_message();
  }
  EXPECT_EQ(testing::LaunchCount(), 2);
}

// One of q, k, v (or dq, dk, dv) packed with the others in a [batch, seq, total_heads, 128]
// buffer at `offset`, from head `first_head` on.
spillway_attention_tensor_t Packed(std::size_t offset, int64_t first_head, int64_t total_heads,
                                   int64_t seqlen) {
  return {static_cast<char*>(At(offset)) + first_head * 128 * 2, seqlen * total_heads * 128, 128,
          total_heads * 128};
}

// An output sharing memory with another buffer of the call is refused before any launch; tensors
// packed row by row into one buffer (q, k, v in [batch, seq, 3 heads groups, dim], and dq, dk,
// dv likewise) are apart, and accepted.
TEST_F(ValidateTest, OutputsThatOverlapAnotherBufferAreRefused) {
  auto f = ForwardArgs();
  f.o = f.q;  // in place
  ExpectForwardFails(f, SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT, "o overlaps q");
  f = ForwardArgs();
  f.lse = reinterpret_cast<float*>(static_cast<char*>(f.o.data) + 1024);
  ExpectForwardFails(f, SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT, "o overlaps lse");

  // Packed: 8 query heads, then 2 key and 2 value heads, per token; gradients the same.
  auto b = BackwardArgs();
  b.problem.seqlen_k = b.problem.seqlen_q = 100;
  b.q = Packed(0, 0, 12, 100);
  b.k = Packed(0, 8, 12, 100);
  b.v = Packed(0, 10, 12, 100);
  b.dq = Packed(2816, 0, 12, 100);
  b.dk = Packed(2816, 8, 12, 100);
  b.dv = Packed(2816, 10, 12, 100);
  std::size_t bytes = 0;
  ASSERT_EQ(spillway_attention_sdpa_backward_workspace_size(&b, &bytes), SPILLWAY_ATTENTION_SUCCESS)
      << spillway_attention_last_error_message();
  EXPECT_EQ(spillway_attention_sdpa_backward(&b, At(3072), bytes, nullptr),
            SPILLWAY_ATTENTION_SUCCESS)
      << spillway_attention_last_error_message();
  EXPECT_EQ(testing::LaunchCount(), 1);
  // dk one head early: its first head is dq's last.
  auto shifted = b;
  shifted.dk = Packed(2816, 7, 12, 100);
  EXPECT_EQ(spillway_attention_sdpa_backward(&shifted, At(3072), bytes, nullptr),
            SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT);
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(), "dq overlaps dk");
  // A gradient written over its own input.
  shifted = b;
  shifted.dv = shifted.v;
  EXPECT_EQ(spillway_attention_sdpa_backward(&shifted, At(3072), bytes, nullptr),
            SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT);
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(), "dv overlaps v");
  // dbias over the bias it is the gradient of.
  shifted = BackwardArgs();
  shifted.bias = {At(2816), 0, 300 * 100, 300};
  shifted.dbias = {static_cast<char*>(At(2816)) + 600, 0, 300 * 100, 300};
  EXPECT_EQ(spillway_attention_sdpa_backward(&shifted, At(3072), 6400, nullptr),
            SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT);
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(), "dbias overlaps bias");

  auto af = AdditiveForwardArgs();
  af.context = Rows(512, 50, 512);  // the values' buffer
  EXPECT_EQ(spillway_attention_additive_forward(&af, nullptr, 0, nullptr),
            SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT);
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(), "context overlaps values");
  auto ab = AdditiveBackwardArgs();
  ab.d_attention_v = const_cast<float*>(ab.attention_v);
  ASSERT_EQ(spillway_attention_additive_backward_workspace_size(&ab, &bytes),
            SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT);
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(),
               "d_attention_v overlaps attention_v");
  EXPECT_EQ(testing::LaunchCount(), 1);
  // Varlen: only the first token's row is sure to exist, so buffers right after one another are
  // apart however long the largest sequence is; an in-place call is still refused.
  f = ForwardArgs();
  f.problem.cu_seqlens_q = reinterpret_cast<const int32_t*>(At(3328));
  f.problem.cu_seqlens_k = reinterpret_cast<const int32_t*>(At(3392));
  f.o.data = static_cast<char*>(f.q.data) + 8 * 128 * 2;  // right after q's first token
  f.lse = reinterpret_cast<float*>(static_cast<char*>(f.o.data) + 8 * 128 * 2);
  EXPECT_EQ(spillway_attention_sdpa_forward(&f, At(3584), 256, nullptr), SPILLWAY_ATTENTION_SUCCESS)
      << spillway_attention_last_error_message();
  f.o.data = f.q.data;
  EXPECT_EQ(spillway_attention_sdpa_forward(&f, At(3584), 256, nullptr),
            SPILLWAY_ATTENTION_ERROR_INVALID_ARGUMENT);
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(), "o overlaps q");
  EXPECT_EQ(testing::LaunchCount(), 2);
}

TEST_F(ValidateTest, AdditiveChecksSizesAndOnChipBudget) {
  auto a = AdditiveForwardArgs();
  EXPECT_EQ(spillway_attention_additive_forward(&a, nullptr, 0, nullptr),
            SPILLWAY_ATTENTION_SUCCESS)
      << spillway_attention_last_error_message();
  a.problem.units = 0;
  EXPECT_EQ(spillway_attention_additive_forward(&a, nullptr, 0, nullptr),
            SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE);
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(), "units is 0");
  a = AdditiveForwardArgs();
  a.problem.units = 1024;
  a.problem.value_dim = 1024;
  EXPECT_EQ(spillway_attention_additive_forward(&a, nullptr, 0, nullptr),
            SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE);
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(), "shared memory");
  a = AdditiveForwardArgs();
  a.problem.dtype = static_cast<spillway_attention_dtype_t>(-1);
  EXPECT_EQ(spillway_attention_additive_forward(&a, nullptr, 0, nullptr),
            SPILLWAY_ATTENTION_ERROR_UNSUPPORTED_DTYPE);
  a = AdditiveForwardArgs();
  a.context.seq_stride = 0;
  EXPECT_EQ(spillway_attention_additive_forward(&a, nullptr, 0, nullptr),
            SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE);
  a = AdditiveForwardArgs();
  a.attention_v = nullptr;
  EXPECT_EQ(spillway_attention_additive_forward(&a, nullptr, 0, nullptr),
            SPILLWAY_ATTENTION_ERROR_NULL_POINTER);
  EXPECT_EQ(testing::LaunchCount(), 1);
  // The largest supported pair of sizes fits the sm_80 shared-memory budget.
  EXPECT_LE(AdditiveKeyGradSmemBytes(512, 512), kMaxSmemPerBlock);
}

TEST_F(ValidateTest, AdditiveBackwardWorkspaceHoldsDeltaAndPartialVGradients) {
  auto a = AdditiveBackwardArgs();
  std::size_t bytes = 0;
  ASSERT_EQ(spillway_attention_additive_backward_workspace_size(&a, &bytes),
            SPILLWAY_ATTENTION_SUCCESS)
      << spillway_attention_last_error_message();
  // delta: 3*40 floats = 480 -> 512; partials: 3 batches * 3 target tiles * 256 units * 4 bytes.
  EXPECT_EQ(bytes, 512u + 3u * 3 * 256 * 4);
  EXPECT_EQ(spillway_attention_additive_backward(&a, At(0), bytes - 1, nullptr),
            SPILLWAY_ATTENTION_ERROR_WORKSPACE_TOO_SMALL);
  a.d_key_proj.data = nullptr;
  EXPECT_EQ(spillway_attention_additive_backward(&a, At(0), bytes, nullptr),
            SPILLWAY_ATTENTION_ERROR_NULL_POINTER);
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(), "d_key_proj");
  EXPECT_EQ(testing::LaunchCount(), 0);
}

// Source lengths live on the device: the host checks their alignment, and a call with them
// needs the status block in which the kernels report lengths outside [0, source_len].
TEST_F(ValidateTest, AdditiveWithSourceLengthsNeedsTheStatusBlock) {
  alignas(256) static const int32_t lengths[3] = {50, 0, 7};
  auto f = AdditiveForwardArgs();
  auto b = AdditiveBackwardArgs();
  f.problem.source_lengths = b.problem.source_lengths = lengths;
  std::size_t bytes = 0;
  ASSERT_EQ(spillway_attention_additive_forward_workspace_size(&f, &bytes),
            SPILLWAY_ATTENTION_SUCCESS)
      << spillway_attention_last_error_message();
  EXPECT_EQ(bytes, 256u);
  EXPECT_EQ(spillway_attention_additive_forward(&f, nullptr, 0, nullptr),
            SPILLWAY_ATTENTION_ERROR_WORKSPACE_TOO_SMALL);
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(), "needs 256 workspace bytes");
  ASSERT_EQ(spillway_attention_additive_backward_workspace_size(&b, &bytes),
            SPILLWAY_ATTENTION_SUCCESS);
  EXPECT_EQ(bytes, 256u + 512u + 3u * 3 * 256 * 4);  // status, D, partial d_v
  EXPECT_EQ(spillway_attention_additive_backward(&b, At(0), bytes - 256, nullptr),
            SPILLWAY_ATTENTION_ERROR_WORKSPACE_TOO_SMALL);
  f.problem.source_lengths = reinterpret_cast<const int32_t*>(At(2));
  EXPECT_EQ(spillway_attention_additive_forward(&f, At(0), 256, nullptr),
            SPILLWAY_ATTENTION_ERROR_MISALIGNED);
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(),
               "source_lengths is not 4-byte aligned");
  EXPECT_EQ(testing::LaunchCount(), 0);
  f.problem.source_lengths = lengths;
  EXPECT_EQ(spillway_attention_additive_forward(&f, At(0), 256, nullptr),
            SPILLWAY_ATTENTION_SUCCESS)
      << spillway_attention_last_error_message();
  EXPECT_EQ(testing::LaunchCount(), 1);
}

// The additive status reader: each error names the first bad sequence and the allowed range.
TEST_F(ValidateTest, AdditiveLengthsStatusReadsTheWordAtTheStartOfTheWorkspace) {
  alignas(256) spillway_attention_varlen_status_t word[64] = {};
  word[0] = {SPILLWAY_ATTENTION_VARLEN_SOURCE_TOO_LONG, 1};
  spillway_attention_varlen_status_t read{};
  EXPECT_EQ(spillway_attention_additive_lengths_status(word, nullptr, &read),
            SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE);
  EXPECT_EQ(read.errors, uint32_t{SPILLWAY_ATTENTION_VARLEN_SOURCE_TOO_LONG});
  EXPECT_EQ(read.first_bad_sequence, 1);
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(),
               "a source length exceeds source_len (first at sequence 1)");
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(), "[0, source_len]");
  word[0] = {SPILLWAY_ATTENTION_VARLEN_SOURCE_NEGATIVE, 0};
  EXPECT_EQ(spillway_attention_additive_lengths_status(word, nullptr, nullptr),
            SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE);
  EXPECT_PRED2(Contains, spillway_attention_last_error_message(),
               "a source length is negative (first at sequence 0)");
  word[0] = {0, -1};
  EXPECT_EQ(spillway_attention_additive_lengths_status(word, nullptr, &read),
            SPILLWAY_ATTENTION_SUCCESS);
  EXPECT_STREQ(spillway_attention_last_error_message(), "");
  EXPECT_EQ(spillway_attention_additive_lengths_status(nullptr, nullptr, &read),
            SPILLWAY_ATTENTION_ERROR_NULL_POINTER);
  word[0] = {SPILLWAY_ATTENTION_VARLEN_SOURCE_TOO_LONG, 2};
  const Status status = AdditiveLengthsStatus(word, nullptr);  // the C++ wrapper
  EXPECT_EQ(status.code(), SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE);
  EXPECT_PRED2(Contains, status.message(), "first at sequence 2");
}

TEST(StatusTest, EveryStatusHasAString) {
  for (int s = SPILLWAY_ATTENTION_SUCCESS; s <= SPILLWAY_ATTENTION_ERROR_CUDA; ++s) {
    EXPECT_STRNE(spillway_attention_status_string(static_cast<spillway_attention_status_t>(s)),
                 "unknown status");
  }
  EXPECT_STREQ(spillway_attention_status_string(static_cast<spillway_attention_status_t>(42)),
               "unknown status");
  EXPECT_STREQ(spillway_attention_status_string(SPILLWAY_ATTENTION_ERROR_MISALIGNED), "misaligned");
}

TEST(StatusTest, CppWrapperCarriesTheMessage) {
  auto a = ForwardArgs();
  a.problem.head_dim = 80;
  const Status status = Launch(a, nullptr, 0, nullptr);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), SPILLWAY_ATTENTION_ERROR_UNSUPPORTED_HEAD_DIM);
  EXPECT_EQ(status.ToString(), "unsupported head dim: head_dim 80 is not supported (64 or 128)");
  std::size_t bytes = 1;
  EXPECT_TRUE(WorkspaceSize(ForwardArgs(), &bytes).ok());
}

}  // namespace
}  // namespace spillway::attention
