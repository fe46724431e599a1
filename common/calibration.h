// A calibration: the cost model's figures as measured on one GPU machine (the link, demand
// faults, what each driver call blocks its thread for), in the JSON file that the GPU check's
// `core` stage writes (docs/calibration.md). simgpu loads one from SIMGPU_CALIBRATION, and
// `spillway simulate` and `spillway plan` from --calibration, so that the simulator, the planner
// and simgpu price moves as that machine does. Every section is optional: what a file leaves out
// keeps common/cost_model.h's default.
#ifndef SPILLWAY_COMMON_CALIBRATION_H_
#define SPILLWAY_COMMON_CALIBRATION_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/cost_model.h"

namespace spillway {

// The format version this code reads and writes (the file's "spillway_calibration" key).
inline constexpr int kCalibrationVersion = 1;

struct Calibration {
  std::string device;      // what it was measured on ("NVIDIA H100 PCIe"); "" when not said
  int driver_version = 0;  // cuDriverGetVersion's; 0 when not said
  std::string source;      // how it was measured (the command, the date)
  CostModel cost;          // the figures; the defaults where the file is silent
  // The granules the machine was seen to use (a 2 MiB block; the piece a small managed range
  // takes). Informational: the residency model's are kChunkBytes and kPieceBytes
  // (GranuleWarning).
  uint64_t chunk_bytes = kChunkBytes;
  uint64_t piece_bytes = kPieceBytes;

  bool operator==(const Calibration&) const = default;
};

// Parses `text`, named `name` in errors. Refused, with one line naming the input and the field:
// text that is not JSON, another format version, an unknown key (a misspelt figure would
// otherwise be silently ignored), a figure of the wrong type or out of its range.
absl::StatusOr<Calibration> ParseCalibration(std::string_view text, std::string_view name);

// Reads and parses the file at `path`.
absl::StatusOr<Calibration> ReadCalibration(const std::string& path);

// The file's text (every figure written, so that it reads back equal).
std::string FormatCalibration(const Calibration& c);

// One line when the calibration's granules differ from the residency model's, else "".
std::string GranuleWarning(const Calibration& c);

}  // namespace spillway

#endif  // SPILLWAY_COMMON_CALIBRATION_H_
