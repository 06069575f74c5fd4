// libFuzzer target: the restricted pickle reader and the snapshot model (parse_snapshot_pickle) on arbitrary
// bytes, then the replay of what it read through one policy on the sim backend. The only outcomes allowed are
// a Trace or Error(kTrace); anything else (a crash, a sanitizer report, another exception, a timeout, running
// out of memory) is a finding. Seeds: fuzz/corpus/pickle (docs/reliability.md).
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_replay.h"
#include "gmlake/error.h"
#include "gmlake/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gmlake::Trace trace;
  try {
    trace = gmlake::parse_snapshot_pickle(std::span<const std::uint8_t>(data, size), "fuzz");
  } catch (const gmlake::Error& e) {
    gmlake::fuzz::require(e.code() == gmlake::ErrorCode::kTrace, e.what());
    return 0;
  }
  gmlake::fuzz::replay_small_trace(trace, size);
  return 0;
}
