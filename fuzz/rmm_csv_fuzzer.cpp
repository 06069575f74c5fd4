// libFuzzer target: the RMM logging_resource_adaptor CSV reader (parse_rmm_csv) on arbitrary text, then the
// replay of what it read through one policy on the sim backend. The only outcomes allowed are a Trace or
// Error(kTrace); anything else is a finding. Seeds: fuzz/corpus/rmm_csv (docs/reliability.md).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_replay.h"
#include "gmlake/error.h"
#include "gmlake/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gmlake::Trace trace;
  try {
    trace = gmlake::parse_rmm_csv(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const gmlake::Error& e) {
    gmlake::fuzz::require(e.code() == gmlake::ErrorCode::kTrace, e.what());
    return 0;
  }
  gmlake::fuzz::replay_small_trace(trace, size);
  return 0;
}
