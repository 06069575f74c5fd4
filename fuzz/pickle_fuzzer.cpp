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
  return gmlake::fuzz::fuzz_snapshot_pickle(data, size);
}
