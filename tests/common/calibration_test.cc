// Calibration files: what a file sets reads back exactly, what it leaves out keeps the default,
// and every kind of bad input is refused with one line naming the file and the field.
#include "common/calibration.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace spillway {
namespace {

Calibration Measured() {
  Calibration c;
  c.device = "NVIDIA H100 PCIe";
  c.driver_version = 13000;
  c.source = "scripts/gpu_check.sh --stage core";
  c.cost.h2d_bytes_per_s = 51.25e9;
  c.cost.d2h_bytes_per_s = 53.5e9;
  c.cost.d2d_bytes_per_s = 1.9e12;
  c.cost.copy_engines = 1;
  c.cost.fault_batch_seconds = 27.5e-6;
  c.cost.fault_batch_bytes = 1 << 20;
  c.piece_bytes = 64 << 10;
  c.cost.calls.launch = {2.25e-6, 0};
  c.cost.calls.prefetch_to_device = {11e-6, 1.0 / 3e12};
  c.cost.calls.prefetch_to_host = {13e-6, 0};
  c.cost.calls.discard = {4e-6, 1e-15};
  c.cost.calls.advise = {1.5e-6, 0};
  c.cost.calls.alloc_managed = {40e-6, 2e-13};
  c.cost.calls.pool_alloc = {3e-6, 0};
  c.cost.calls.mem_get_info = {0.7e-6, 0};
  return c;
}

TEST(Calibration, ReadsBackWhatItWrote) {
  const Calibration c = Measured();
  absl::StatusOr<Calibration> back = ParseCalibration(FormatCalibration(c), "x.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, c);
  EXPECT_NE(back->cost, CostModel());
}

TEST(Calibration, WhatTheFileLeavesOutKeepsTheDefault) {
  absl::StatusOr<Calibration> c = ParseCalibration(
      R"({"spillway_calibration": 1, "link": {"h2d_bytes_per_s": 4e10},
          "calls": {"launch": {"seconds": 3e-6}}})",
      "partial.json");
  ASSERT_TRUE(c.ok()) << c.status();
  CostModel expected;
  expected.h2d_bytes_per_s = 4e10;
  expected.calls.launch.seconds = 3e-6;
  EXPECT_EQ(c->cost, expected);
  EXPECT_EQ(c->device, "");
  EXPECT_EQ(GranuleWarning(*c), "");
}

TEST(Calibration, ACallCostsItsFixedPartAndItsBytes) {
  const CallCost cost{10e-6, 1e-12};
  EXPECT_DOUBLE_EQ(cost.Of(0), 10e-6);
  EXPECT_DOUBLE_EQ(cost.Of(2 << 20), 10e-6 + (2 << 20) * 1e-12);
}

TEST(Calibration, ADifferentGranuleIsNamedNotHidden) {
  const std::string warning = GranuleWarning(Measured());
  EXPECT_NE(warning.find("65536-byte pieces"), std::string::npos) << warning;
}

// The error for `text`, which must be refused.
std::string Refusal(const std::string& text) {
  absl::StatusOr<Calibration> c = ParseCalibration(text, "cal.json");
  EXPECT_FALSE(c.ok()) << text;
  return c.ok() ? "" : std::string(c.status().message());
}

TEST(Calibration, RefusesBadInputNamingTheFileAndTheField) {
  struct Case {
    std::string text, expected;
  };
  const Case cases[] = {
      {R"({"spillway_calibration": 1, "link": {"h2d_bytes_per_s": 4e10})", "not JSON"},
      {R"([1, 2])", "is not an object"},
      {R"({"link": {}})", "spillway_calibration: missing"},
      {R"({"spillway_calibration": 2})", "format version 2 is not readable"},
      {R"({"spillway_calibration": "1"})", "format version \"1\""},
      {R"({"spillway_calibration": 1, "links": {}})", "links: unknown key"},
      {R"({"spillway_calibration": 1, "link": {"h2d_gbps": 45}})", "link.h2d_gbps: unknown key"},
      {R"({"spillway_calibration": 1, "link": {"h2d_bytes_per_s": -4e10}})",
       "link.h2d_bytes_per_s: -40000000000.0 is not a number from 1000 to 1e+13"},
      {R"({"spillway_calibration": 1, "link": {"d2h_bytes_per_s": "53e9"}})",
       "link.d2h_bytes_per_s: \"53e9\" is not a number"},
      {R"({"spillway_calibration": 1, "link": {"copy_engines": 3}})",
       "link.copy_engines: 3 is not a whole number from 1 to 2"},
      {R"({"spillway_calibration": 1, "link": {"copy_engines": 1.5}})",
       "link.copy_engines: 1.5 is not a whole number"},
      {R"({"spillway_calibration": 1, "faults": {"batch_bytes": 0}})",
       "faults.batch_bytes: 0 is not a whole number from 4096"},
      {R"({"spillway_calibration": 1, "faults": {"batch_seconds": 1e400}})", "not JSON"},
      {R"({"spillway_calibration": 1, "calls": {"launch": 2e-6}})",
       "calls.launch: 2e-06 is not an object"},
      {R"({"spillway_calibration": 1, "calls": {"prefetch": {"seconds": 1e-5}}})",
       "calls.prefetch: unknown key"},
      {R"({"spillway_calibration": 1, "calls": {"discard": {"seconds": -1e-6}}})",
       "calls.discard.seconds: -1e-06 is not a number from 0 to 1 (seconds)"},
      {R"({"spillway_calibration": 1, "calls": {"advise": {"seconds_per_byte": 1}}})",
       "calls.advise.seconds_per_byte: 1 is not a number from 0 to 1e-06"},
      {R"({"spillway_calibration": 1, "device": 7})", "device: 7 is not a string"},
      {R"({"spillway_calibration": 1, "driver_version": 12.5})", "driver_version: 12.5"},
  };
  for (const Case& c : cases) {
    const std::string error = Refusal(c.text);
    EXPECT_EQ(error.rfind("calibration cal.json: ", 0), 0u) << error;
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.text << "\n -> " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

TEST(Calibration, AFileThatCannotBeReadIsNamed) {
  absl::StatusOr<Calibration> c = ReadCalibration(::testing::TempDir() + "/no-such-calibration");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("no-such-calibration: cannot be read"), std::string::npos);
  const std::string path = ::testing::TempDir() + "/calibration_test.json";
  std::ofstream(path) << FormatCalibration(Measured());
  absl::StatusOr<Calibration> back = ReadCalibration(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, Measured());
}

}  // namespace
}  // namespace spillway
