// decide() (src/policies/gmlake/obtain_decision.h): ChunkSource::obtain's policy as one table. Each row is a
// state and the step the policy must take in it; the rows walk the order (free chunk, new chunk, peer, release,
// the oldest idle chunk, new memory) and each condition that moves a state from one step to another.
#include "policies/gmlake/obtain_decision.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gmlake::engine {
namespace {

using R = StreamFence::Readiness;
using A = ObtainAction;

struct Row {
  const char* why;
  ObtainState state;
  ObtainAction action;
  bool for_time = false;
};

// A pool with idle memory past the headroom, moves allowed, no cap, no peer: what most rows start from.
ObtainState busy_pool() {
  ObtainState s;
  s.want_pages = Pages{4};
  s.idle_chunks = 3;
  return s;
}

template <typename F>
ObtainState with(F&& change) {
  ObtainState s = busy_pool();
  change(s);
  return s;
}

TEST(ObtainDecisionTest, EveryRowOfThePolicyTable) {
  const std::vector<Row> rows = {
      {"a free chunk of at least half the run is mapped as it is",
       with([](ObtainState& s) { s.best_free_pages = Pages{2}; s.free_chunks = 1; s.free_pages = Pages{2}; }),
       A::kTakeFree},
      {"a free chunk under half the run, too little free and idle memory left: the oldest idle chunk moves",
       with([](ObtainState& s) { s.best_free_pages = Pages{1}; s.free_chunks = 1; s.free_pages = Pages{1}; }),
       A::kEvict},
      {"within the headroom a new chunk is made rather than an idle one moved",
       with([](ObtainState& s) { s.within_headroom = true; }), A::kCreate, true},
      {"releases in this call made room: a new chunk of the run's size",
       with([](ObtainState& s) { s.room_made = true; }), A::kCreate, false},
      {"the move budget refuses, no cap, the device has room: grow for time",
       with([](ObtainState& s) { s.moves_allowed = false; }), A::kCreate, true},
      {"the move budget refuses, but growing would pass the move headroom: memory first, the move is made",
       with([](ObtainState& s) { s.moves_allowed = false; s.within_move_headroom = false; }), A::kEvict},
      {"the move budget refuses under a cap: memory first, the move is made",
       with([](ObtainState& s) { s.moves_allowed = false; s.has_cap = true; }), A::kEvict},
      {"the move budget refuses on a device found full: memory first",
       with([](ObtainState& s) { s.moves_allowed = false; s.device_found_full = true; }), A::kEvict},
      {"the move budget refuses with nothing to move: new memory, not growth for time",
       with([](ObtainState& s) { s.moves_allowed = false; s.idle_chunks = 0; }), A::kCreateWhatFits},
      {"a create refused in this call is not asked again before a move",
       with([](ObtainState& s) { s.within_headroom = true; s.create_refused = true; }), A::kEvict},
      {"with a peer, over budget, the own device full: the peer serves the run",
       with([](ObtainState& s) {
         s.moves_allowed = false; s.device_found_full = true; s.peer_takes_over = true;
       }), A::kLeaveToPeer},
      {"with a peer, over budget, at the cap: the peer serves the run",
       with([](ObtainState& s) {
         s.moves_allowed = false; s.has_cap = true; s.cap_allows_want = false; s.peer_takes_over = true;
       }), A::kLeaveToPeer},
      {"with a peer, over budget, past the move headroom: the peer serves the run",
       with([](ObtainState& s) {
         s.moves_allowed = false; s.within_move_headroom = false; s.peer_takes_over = true;
       }), A::kLeaveToPeer},
      {"with a peer and moves allowed, the own memory moves",
       with([](ObtainState& s) { s.device_found_full = true; s.peer_takes_over = true; }), A::kEvict},
      {"free chunks that do not suit are released once enough is free",
       with([](ObtainState& s) { s.free_chunks = 2; s.free_pages = Pages{4}; }), A::kReleaseFree},
      {"free chunks are released when nothing idle is left",
       with([](ObtainState& s) { s.free_chunks = 1; s.free_pages = Pages{1}; s.idle_chunks = 0; }), A::kReleaseFree},
      {"free chunks are released when the cap leaves no room",
       with([](ObtainState& s) { s.free_chunks = 1; s.free_pages = Pages{1}; s.cap_allows_want = false; }),
       A::kReleaseFree},
      {"the oldest idle chunk, covered by an unfinished mark, lag growth allowed: grow instead of blocking the host",
       with([](ObtainState& s) { s.oldest_idle = R::kCovered; s.lag_allows = true; }), A::kCreateForLag},
      {"covered, lag growth allowed, lag_grow_covered off: wait for the mark, then move it",
       with([](ObtainState& s) { s.oldest_idle = R::kCovered; s.lag_allows = true; s.lag_grows_covered = false; }),
       A::kWaitAndEvict},
      {"uncovered, lag growth allowed, lag_grow_covered off: grow instead of draining the stream",
       with([](ObtainState& s) { s.oldest_idle = R::kUncovered; s.lag_allows = true; s.lag_grows_covered = false; }),
       A::kCreateForLag},
      {"covered, lag growth spent: wait for the mark, then move it",
       with([](ObtainState& s) { s.oldest_idle = R::kCovered; }), A::kWaitAndEvict},
      {"safe: it moves, whatever lag growth allows",
       with([](ObtainState& s) { s.oldest_idle = R::kSafe; s.lag_allows = true; }), A::kEvict},
      {"the oldest idle chunk, uncovered, lag growth allowed: grow instead of draining the stream",
       with([](ObtainState& s) { s.oldest_idle = R::kUncovered; s.lag_allows = true; }), A::kCreateForLag},
      {"uncovered, lag growth spent: wait",
       with([](ObtainState& s) { s.oldest_idle = R::kUncovered; }), A::kWaitAndEvict},
      {"uncovered, the lag create refused: wait",
       with([](ObtainState& s) { s.oldest_idle = R::kUncovered; s.lag_allows = true; s.lag_refused = true; }),
       A::kWaitAndEvict},
      {"uncovered on the allocating stream, lag growth allowed: grow first (the layout the device runs stays)",
       with([](ObtainState& s) { s.oldest_idle = R::kUncovered; s.lag_allows = true; s.oldest_idle_in_order = true; }),
       A::kCreateForLag},
      {"uncovered on the allocating stream, lag growth spent: it moves in stream order, no wait",
       with([](ObtainState& s) { s.oldest_idle = R::kUncovered; s.oldest_idle_in_order = true; }), A::kEvict},
      {"covered on the allocating stream, lag growth allowed: grow first, as where uncovered",
       with([](ObtainState& s) { s.oldest_idle = R::kCovered; s.lag_allows = true; s.oldest_idle_in_order = true; }),
       A::kCreateForLag},
      {"covered on the allocating stream, lag growth spent: it moves in stream order, no wait",
       with([](ObtainState& s) { s.oldest_idle = R::kCovered; s.oldest_idle_in_order = true; }), A::kEvict},
      {"nothing idle, nothing free: new memory",
       with([](ObtainState& s) { s.idle_chunks = 0; }), A::kCreateWhatFits},
  };
  for (const Row& row : rows) {
    const ObtainStep step = decide(row.state);
    EXPECT_EQ(step.action, row.action) << row.why << ": got " << to_string(step.action);
    if (row.action == A::kCreate) {
      EXPECT_EQ(step.for_time, row.for_time) << row.why;
    }
  }
}

TEST(ObtainDecisionTest, ANewChunkIsGrowthOnlyWithNothingToMoveOrBelowTheAllocatedHighAndNoCap) {
  struct GrowthRow {
    const char* why;
    ObtainState state;
    ObtainAction action;
    bool growth;
  };
  const std::vector<GrowthRow> rows = {
      {"nothing idle, nothing free, no cap: new memory is growth",
       with([](ObtainState& s) { s.idle_chunks = 0; }), A::kCreateWhatFits, true},
      {"within the headroom with nothing to move: growth",
       with([](ObtainState& s) { s.idle_chunks = 0; s.within_headroom = true; }), A::kCreate, true},
      {"within the headroom while a chunk is idle: not growth (memory to move is left)",
       with([](ObtainState& s) { s.within_headroom = true; }), A::kCreate, false},
      {"within the headroom while a chunk is free: not growth",
       with([](ObtainState& s) {
         s.idle_chunks = 0; s.free_chunks = 1; s.free_pages = Pages{1}; s.best_free_pages = Pages{1};
         s.within_headroom = true;
       }), A::kCreate, false},
      {"releases made room: not growth while memory to move is left",
       with([](ObtainState& s) { s.room_made = true; }), A::kCreate, false},
      {"growth for time (the move budget refuses): memory to move is left, not growth",
       with([](ObtainState& s) { s.moves_allowed = false; }), A::kCreate, false},
      {"within the headroom while a chunk is idle, below the highest allocated bytes: growth (the pool re-forms)",
       with([](ObtainState& s) { s.within_headroom = true; s.below_allocated_high = true; }), A::kCreate, true},
      {"releases made room, below the highest allocated bytes: growth",
       with([](ObtainState& s) { s.room_made = true; s.below_allocated_high = true; }), A::kCreate, true},
      {"below the highest allocated bytes under a cap: not growth (memory first)",
       with([](ObtainState& s) {
         s.within_headroom = true; s.below_allocated_high = true; s.has_cap = true;
       }), A::kCreate, false},
      {"under a cap, nothing idle or free: new memory, not growth (memory first)",
       with([](ObtainState& s) { s.idle_chunks = 0; s.has_cap = true; }), A::kCreateWhatFits, false},
      {"under a cap within the headroom: not growth",
       with([](ObtainState& s) { s.idle_chunks = 0; s.has_cap = true; s.within_headroom = true; }), A::kCreate,
       false},
  };
  for (const GrowthRow& row : rows) {
    const ObtainStep step = decide(row.state);
    EXPECT_EQ(step.action, row.action) << row.why << ": got " << to_string(step.action);
    EXPECT_EQ(step.growth, row.growth) << row.why;
  }
  // Steps that make no new chunk of their own are never growth.
  EXPECT_FALSE(decide(with([](ObtainState& s) { s.oldest_idle = R::kUncovered; s.lag_allows = true; })).growth);
  EXPECT_FALSE(decide(busy_pool()).growth);
}

TEST(ObtainDecisionTest, AFreeChunkComesFirstWhateverElseHolds) {
  // Every combination of the flags that steps 2-5 read: a suitable free chunk wins in all of them.
  for (unsigned bits = 0; bits < (1u << 8); ++bits) {
    ObtainState s = busy_pool();
    s.best_free_pages = Pages{3};
    s.free_chunks = 1;
    s.free_pages = Pages{3};
    s.within_headroom = bits & 1;
    s.room_made = bits & 2;
    s.moves_allowed = bits & 4;
    s.has_cap = bits & 8;
    s.device_found_full = bits & 16;
    s.cap_allows_want = bits & 32;
    s.peer_takes_over = bits & 64;
    s.create_refused = bits & 128;
    EXPECT_EQ(decide(s).action, A::kTakeFree) << "flags " << bits;
  }
}

TEST(ObtainDecisionTest, NamesAreDistinct) {
  std::vector<std::string> names;
  for (const A a : {A::kTakeFree, A::kCreate, A::kLeaveToPeer, A::kReleaseFree, A::kEvict, A::kCreateForLag,
                    A::kWaitAndEvict, A::kCreateWhatFits}) {
    const std::string name = to_string(a);
    for (const std::string& other : names) EXPECT_NE(name, other);
    names.push_back(name);
  }
}

}  // namespace
}  // namespace gmlake::engine
