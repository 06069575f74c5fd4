// The decision of ChunkSource::obtain: which step it takes next for a run of unmapped pages, as a pure function
// of what it sees (ObtainState), so that the policy reads as one table and is tested as one (obtain_decision_test).
// ChunkSource::obtain (chunk_source.cpp) is the executor: it fills an ObtainState, takes the step decide() names,
// and asks again until a step yields a chunk or fails.
//
// The order is the policy (docs/design.md, "Stitching"), first that applies:
//   1. kTakeFree      a free chunk that backs at least half of what is wanted: one more map, no new memory;
//   2. kCreate        a new chunk of the wanted size, when it stays within the headroom, or releases in this call
//                     made room for it, or the move budget refuses a move while memory does not limit (no cap,
//                     the device not found full, within move_headroom_permille) and there is idle or free memory
//                     a move would take;
//   2b. kLeaveToPeer  a pool whose peers may lend, the move budget refusing, the own device unable to grow (found
//                     full, at the cap, or past the move headroom): the peer serves the run;
//   3. kReleaseFree   free chunks that do not suit the run, released once enough memory is free, or nothing idle
//                     is left, or the cap leaves no room (their memory comes back at the run's size, step 2);
//   4. the chunk idle the longest: kEvict when no queued work can touch it; else kCreateForLag while the device
//                     lags (no mark covers it, or one does that has not finished and lag_grow_covered is on) and
//                     lag growth is allowed; else kEvict when only the allocating
//                     stream's queued work can touch it and its old mapping stays as a standby one (in stream
//                     order, as PyTorch reuses a block on its own stream: the block's work runs after that work);
//                     else kWaitAndEvict;
//   5. kCreateWhatFits nothing idle, nothing free: new memory, as much as the cap and the device allow.
// A kCreate or kCreateWhatFits with no cap is growth (ObtainStep::growth) when nothing is idle or free (the pool
// grows past its size) or when the pool re-forms below the highest allocated bytes it has seen
// (below_allocated_high): the chunk may then be larger than the block's share (ChunkSource: growth chunks).
// A create the device refuses is not asked for again in the same call until a move changed what there is
// (create_refused, lag_refused).
// Thread safety: pure.
#pragma once

#include <cstdint>

#include "pages.h"
#include "stream_fence.h"

namespace gmlake::engine {

struct ObtainState {
  Pages want_pages{1};                // size of the chunk sought (1 near the cap)
  Pages best_free_pages;              // the largest free chunk of at most the run's pages (0: none)
  std::uint64_t free_chunks = 0;      // chunks mapped nowhere
  Pages free_pages;                   // their pages
  std::uint64_t idle_chunks = 0;      // mapped chunks no block uses
  bool within_headroom = false;       // want_pages more stay within the headroom (and the cap)
  bool within_move_headroom = true;   // want_pages more stay within move_headroom_permille (and the cap)
  bool room_made = false;             // releases in this call made room for want_pages (and the cap allows)
  bool moves_allowed = true;          // the move budgets allow a move now (MoveBudget)
  bool has_cap = false;               // cap_bytes is set
  bool device_found_full = false;     // a create found the device full since the last empty_cache
  bool cap_allows_want = true;        // want_pages more stay within the cap (or there is none)
  bool peer_takes_over = false;       // peers may lend (ChunkSource::OverBudget::kPeer)
  bool create_refused = false;        // a kCreate failed in this call since the last move
  StreamFence::Readiness oldest_idle = StreamFence::Readiness::kSafe;  // of the chunk idle the longest
  // Not safe, but only the allocating stream's queued work may touch it, and evicting it to a standby mapping
  // unmaps nothing that queued work may touch: it moves in stream order, with no wait.
  bool oldest_idle_in_order = false;
  bool lag_allows = false;            // lag growth may create want_pages more (lag_grow_pages, the cap)
  bool lag_grows_covered = true;      // lag growth also where an unfinished mark covers it (lag_grow_covered)
  bool lag_refused = false;           // a kCreateForLag failed in this call
  // want_pages more stay within the highest allocated bytes the pool has seen: it re-forms to a size the job has
  // held before (after empty_cache, or a model rebuilt), so what it creates now the job will use again.
  bool below_allocated_high = false;
};

enum class ObtainAction : std::uint8_t {
  kTakeFree,
  kCreate,
  kLeaveToPeer,
  kReleaseFree,
  kEvict,
  kCreateForLag,
  kWaitAndEvict,
  kCreateWhatFits,
};

struct ObtainStep {
  ObtainAction action;
  // For kCreate: true when it grows for time (the move budget refused): a refusal then marks the device full.
  bool for_time = false;
  // For kCreate and kCreateWhatFits: no cap is set and the pool grows past its size (nothing idle or free is left
  // to move) or re-forms below its highest allocated bytes, so the chunk may take the growth size
  // (Config::growth_chunk_bytes) rather than the block's share.
  bool growth = false;
};

// Step 1 applies: a free chunk backs at least half of what is wanted (kTakeFree comes before anything else).
inline bool takes_free(const ObtainState& s) {
  return s.best_free_pages != Pages{0} && s.best_free_pages * 2 >= s.want_pages;
}

// The next step for `s` (above). Never fails: kCreateWhatFits when nothing else applies.
ObtainStep decide(const ObtainState& s);

// "take_free", "create", ...: for tests and messages.
const char* to_string(ObtainAction action);

}  // namespace gmlake::engine
