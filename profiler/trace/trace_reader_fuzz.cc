// Fuzz target for TraceReader, the parser of trace files (docs/trace-format.md). Invariants: it
// never crashes or allocates without bound; every error names the file, and a truncated or
// corrupt trace's error gives the byte offset; an accepted trace, encoded again record by record,
// reads back as the same sequence of record kinds. Built with libFuzzer when the compiler is clang
// (-DSPILLWAY_FUZZ=ON); replayed over seeds and mutations by tests/profiler/trace_reader_fuzz_test.
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "profiler/trace/trace_reader.h"
#include "profiler/trace/trace_wire.h"

namespace {

using spillway::trace::EndRecord;
using spillway::trace::HeaderRecord;
using spillway::trace::Record;
using spillway::trace::TraceReader;

// Reads every record; returns the kinds read (variant indices) or nothing on an error.
bool ReadAll(const std::string& bytes, std::vector<size_t>* kinds, std::string* reencoded) {
  auto reader = TraceReader::FromBytes("fuzz.trace", bytes);
  if (!reader.ok()) {
    if (!absl::StartsWith(reader.status().message(), "fuzz.trace: ")) __builtin_trap();
    return false;
  }
  if (reencoded != nullptr) {
    char preamble[spillway::trace::wire::kPreambleBytes];
    spillway::trace::wire::EncodePreamble(preamble);
    reencoded->assign(preamble, sizeof(preamble));
  }
  auto append = [&](const auto& r) {
    if (reencoded == nullptr) return;
    const size_t payload = spillway::trace::wire::PayloadBytes(r);
    const size_t at = reencoded->size();
    reencoded->resize(at + spillway::trace::wire::kFrameBytes + payload);
    spillway::trace::wire::EncodeRecord(r, payload, reencoded->data() + at);
  };
  append((*reader)->header());
  kinds->push_back(0);
  Record record;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) {
      const auto message = more.status().message();
      if (!absl::StartsWith(message, "fuzz.trace: ") || !absl::StrContains(message, " at byte ")) {
        __builtin_trap();
      }
      return false;
    }
    if (!*more) break;
    std::visit(append, record);
    kinds->push_back(record.index());
  }
  EndRecord end = (*reader)->end();
  end.records_written = kinds->size();
  append(end);
  kinds->push_back(Record(EndRecord{}).index());
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::vector<size_t> kinds, again;
  std::string reencoded;
  if (!ReadAll(bytes, &kinds, &reencoded)) return 0;
  // Unknown kinds of a newer minor are skipped and so not re-encoded; the rest must survive.
  if (!ReadAll(reencoded, &again, nullptr) || again != kinds) __builtin_trap();
  return 0;
}
