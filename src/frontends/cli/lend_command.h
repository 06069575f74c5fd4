// `gmlake lend`: a lender process for the lake (include/gmlake/lake.h), as a user starts one beside a training job.
//
//   gmlake lend --socket ADDR --budget BYTES [--device N] [--backend cuda|host] [--allow-uid UID]... [--recall-ms MS]
//
// Lends chunks of device N's memory (--backend cuda, the default where the CUDA backend is built; host: the CPU
// backend, device 0 only, for tests and trials) at ADDR (an absolute path, created mode 0600, or @name) to
// borrowers of this uid or an --allow-uid one, at most BYTES at once (a multiple of 2 MiB; 0: as much as the
// device gives). Logs every event (ready, borrowers, loans, returns, recalls, refusals) on stderr, one line each,
// "gmlake lend: ...". On SIGTERM or SIGINT: no new loans, every loan recalled with --recall-ms to come back, then
// exit 0 when all came back, 1 when some borrower kept a loan past it (cut off). Bad arguments: one line on
// stderr, exit 2.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gmlake::cli {

struct LendOptions {
  std::string socket;                    // LakeAddress
  std::string budget;                    // byte count with an optional suffix (K, M, G, T)
  int device = 0;
  std::string backend;                   // "cuda" or "host"
  std::vector<std::uint32_t> allow_uids;
  std::uint64_t recall_ms = 10'000;
};

// Runs the lender until SIGTERM / SIGINT; returns the exit status (0 clean stop, 1 loans not returned). Prints
// and exits with status 2 for bad options (die()), throws what the library throws otherwise.
int run_lend(const LendOptions& options);

}  // namespace gmlake::cli
