#include "obtain_decision.h"

namespace gmlake::engine {

ObtainStep decide(const ObtainState& s) {
  if (takes_free(s)) return {ObtainAction::kTakeFree};
  const bool something_to_move = s.idle_chunks != 0 || s.free_chunks != 0;
  const bool growth = (!something_to_move || s.below_allocated_high) && !s.has_cap;
  const bool grow_for_time =
      !s.moves_allowed && !s.has_cap && !s.device_found_full && s.within_move_headroom && something_to_move;
  if (!s.create_refused && (s.within_headroom || s.room_made || grow_for_time)) {
    return {ObtainAction::kCreate, grow_for_time || s.within_headroom, growth};
  }
  if (s.peer_takes_over && !s.moves_allowed &&
      (s.device_found_full || !s.cap_allows_want || !s.within_move_headroom) && something_to_move) {
    return {ObtainAction::kLeaveToPeer};
  }
  if (s.free_chunks != 0 && (s.idle_chunks == 0 || s.free_pages >= s.want_pages || !s.cap_allows_want)) {
    return {ObtainAction::kReleaseFree};
  }
  if (s.idle_chunks != 0) {
    if (s.oldest_idle == StreamFence::Readiness::kSafe) return {ObtainAction::kEvict};
    if ((s.oldest_idle == StreamFence::Readiness::kUncovered || s.lag_grows_covered) && s.lag_allows &&
        !s.lag_refused) {
      return {ObtainAction::kCreateForLag};
    }
    if (s.oldest_idle_in_order) return {ObtainAction::kEvict};
    return {ObtainAction::kWaitAndEvict};
  }
  return {ObtainAction::kCreateWhatFits, false, growth};
}

const char* to_string(ObtainAction action) {
  switch (action) {
    case ObtainAction::kTakeFree: return "take_free";
    case ObtainAction::kCreate: return "create";
    case ObtainAction::kLeaveToPeer: return "leave_to_peer";
    case ObtainAction::kReleaseFree: return "release_free";
    case ObtainAction::kEvict: return "evict";
    case ObtainAction::kCreateForLag: return "create_for_lag";
    case ObtainAction::kWaitAndEvict: return "wait_and_evict";
    case ObtainAction::kCreateWhatFits: return "create_what_fits";
  }
  return "?";
}

}  // namespace gmlake::engine
