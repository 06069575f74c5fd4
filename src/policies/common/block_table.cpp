#include "block_table.h"

#include <fmt/format.h>

#include <stdexcept>

#include "gmlake/error.h"

namespace gmlake::policy {

const char* to_string(FreeCall call) {
  switch (call) {
    case FreeCall::kDeallocate: return "deallocate";
    case FreeCall::kBeginDeferredFree: return "begin_deferred_free";
    case FreeCall::kEndDeferredFree: return "end_deferred_free";
  }
  return "?";
}

InvalidFreeWords InvalidFreeWords::reference(const char* policy_name) {
  const char* unknown = "not the start of a live block (never allocated, already freed, or an interior pointer)";
  return {fmt::format("gmlake {}", policy_name), unknown, unknown, "its free is already pending",
          "no deferred free was begun"};
}

InvalidFreeWords InvalidFreeWords::engine() {
  // The engine names a pending block as it names an unknown one, and both failures of end_deferred_free alike.
  const char* not_live = "not a live block (never allocated here, already freed, or an interior pointer)";
  const char* not_pending = "no deferred free is pending for this pointer";
  return {"gmlake", not_live, not_pending, not_live, not_pending};
}

const char* InvalidFreeWords::reason(FreeCall call, InvalidFree why) const {
  switch (why) {
    case InvalidFree::kUnknown: return call == FreeCall::kEndDeferredFree ? unknown_at_end : unknown;
    case InvalidFree::kAlreadyPending: return already_pending;
    case InvalidFree::kNotPending: return not_pending;
  }
  return unknown;
}

namespace detail {

void reject_free(Stats& stats, const InvalidFreeWords& words, const void* ptr, FreeCall call, InvalidFree why) {
  ++stats.invalid_frees;
  throw Error(ErrorCode::kInvalidPointer,
              fmt::format("{}: {}({}): {}", words.prefix, to_string(call), ptr, words.reason(call, why)));
}

void table_broken(const InvalidFreeWords& words, const std::string& what) {
  throw std::logic_error(fmt::format("{} block table invariant broken: {}", words.prefix, what));
}

}  // namespace detail
}  // namespace gmlake::policy
