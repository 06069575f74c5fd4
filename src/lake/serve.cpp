// serve_until_stopped (include/gmlake/lake.h): a lender served until it is told to stop, then emptied by recalls.
#include <chrono>
#include <cstdint>

#include "gmlake/lake.h"

namespace gmlake {
namespace {

std::uint64_t steady_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

}  // namespace

std::uint64_t serve_until_stopped(LakeLender& lender, const volatile std::sig_atomic_t& stop, std::uint64_t recall_ms) {
  constexpr int kPollMs = 100;  // how soon a stop is seen: poll(2) restarts after a signal (LakeLender::poll)
  while (stop == 0) lender.poll(kPollMs, steady_ns());
  lender.stop_lending();
  const std::uint64_t deadline_ns = steady_ns() + recall_ms * 1'000'000;
  lender.recall_all(deadline_ns);
  // Until every loan is back, or the deadline passed: poll then cuts the late borrowers off (their loans
  // stranded, no longer lent_bytes()).
  while (lender.lent_bytes() != 0) lender.poll(kPollMs, steady_ns());
  return lender.stranded_bytes();
}

}  // namespace gmlake
