// ArenaSet (src/policies/gmlake/arena_set.h) on its own, on the sim backend (and a FaultBackend over it for
// address space that runs out): which arena a (stream, pool) gets, and how empty per-stream arenas go back. Every
// test checks the set's invariants after each step; the last one breaks them on purpose.
#include "policies/gmlake/arena_set.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "backends/fault/fault_backend.h"
#include "expect_error.h"
#include "gmlake/clock.h"
#include "gmlake/error.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"

namespace gmlake::engine {
namespace {

constexpr std::uint64_t kArenaBytes = 64 * kGiB;

TEST(ArenaSetTest, SharedArenasAreOnePerPoolWhateverTheStream) {
  SimBackend sim;
  int unmaps = 0;
  {
    ArenaSet set(sim, kArenaBytes, /*per_stream=*/false, [&](Arena&) { return ++unmaps, true; }, [] {});
    Arena& large = set.get(false, 1);
    set.check_invariants();
    Arena& small = set.get(true, 2);
    set.check_invariants();
    EXPECT_NE(&large, &small);
    EXPECT_TRUE(small.small);
    EXPECT_FALSE(large.small);
    EXPECT_EQ(&set.get(false, 7), &large);
    set.check_invariants();
    EXPECT_EQ(&set.get(true, 1), &small);
    set.check_invariants();
    EXPECT_EQ(large.stream, 0u) << "a shared arena belongs to no stream";
    EXPECT_EQ(set.size(), 2u);
    EXPECT_EQ(sim.live_reservations(), 2u);
    EXPECT_EQ(set.retire_empty(true), 0u) << "shared arenas never go back";
    set.check_invariants();
  }
  EXPECT_EQ(sim.live_reservations(), 0u) << "the set frees its address space";
  EXPECT_EQ(unmaps, 0);
}

TEST(ArenaSetTest, EmptyPerStreamArenasGoBackAndTheirIdsAreReused) {
  SimBackend sim;
  int waits = 0;
  bool may_unmap = false;
  ArenaSet set(sim, kArenaBytes, /*per_stream=*/true, [&](Arena&) { return may_unmap; }, [&] { ++waits; });
  Arena& a = set.get(false, 1);
  set.check_invariants();
  Arena& b = set.get(false, 2);
  set.check_invariants();
  EXPECT_NE(&a, &b);
  EXPECT_EQ(b.stream, 2u);
  a.blocks = 1;  // stream 1 has a block placed; stream 2 has none
  set.check_invariants();
  EXPECT_EQ(set.empty_stream_arenas(), 1u);
  EXPECT_EQ(set.retire_empty(false), 0u) << "the Unmapper said queued work may touch its chunks";
  set.check_invariants();
  may_unmap = true;
  EXPECT_EQ(set.retire_empty(true), 1u);
  set.check_invariants();
  EXPECT_EQ(waits, 1);
  EXPECT_EQ(sim.live_reservations(), 1u);
  const std::uint32_t retired_id = b.id;
  EXPECT_TRUE(set[retired_id].retired);
  // Stream 2 comes back: a new arena under the id that went back.
  Arena& again = set.get(false, 2);
  set.check_invariants();
  EXPECT_EQ(again.id, retired_id);
  EXPECT_FALSE(again.retired);
  EXPECT_EQ(sim.live_reservations(), 2u);
  EXPECT_EQ(&set.get(false, 1), &a) << "the arena in use stays";
  set.check_invariants();
}

TEST(ArenaSetTest, BeyondTheSpareArenasTheEmptyOnesGoBackWhenANewOneIsMade) {
  SimBackend sim;
  ArenaSet set(sim, kArenaBytes, /*per_stream=*/true, [](Arena&) { return true; }, [] {});
  for (StreamId s = 1; s <= 100; ++s) {
    set.get(s % 2 == 0, s);
    set.check_invariants();
    ASSERT_LE(set.empty_stream_arenas(), ArenaSet::kSpareArenas + 1) << "stream " << s;
  }
  EXPECT_LE(sim.live_reservations(), ArenaSet::kSpareArenas + 1);
}

TEST(ArenaSetTest, OutOfAddressSpaceTheEmptyArenasGoBackAfterAWaitOrTheErrorStands) {
  SimBackend sim;
  FaultBackend faults(sim);
  int waits = 0;
  ArenaSet set(faults, kArenaBytes, /*per_stream=*/true, [](Arena&) { return true; }, [&] { ++waits; });
  set.get(false, 1);
  set.check_invariants();
  // The next reservation fails as out of memory: the empty arena of stream 1 goes back, after a wait, and the
  // retried reservation serves stream 2.
  faults.arm({BackendCall::kReserve, 1, 1, FaultError::kOutOfMemory});
  Arena& two = set.get(false, 2);
  set.check_invariants();
  EXPECT_EQ(waits, 1);
  EXPECT_EQ(two.stream, 2u);
  EXPECT_EQ(sim.live_reservations(), 1u);
  // Now nothing is empty to give back, and no smaller arena fits either: the error reaches the caller and no slot
  // is left half made.
  two.blocks = 1;
  set.check_invariants();
  faults.arm({BackendCall::kReserve, 1, 1 + ArenaSet::kMaxArenaHalvings, FaultError::kOutOfMemory});
  EXPECT_THROW(set.get(false, 3), OutOfMemoryError);
  EXPECT_EQ(faults.calls_seen(BackendCall::kReserve), 4u + ArenaSet::kMaxArenaHalvings)
      << "stream 1's, stream 2's twice, then the full size and every halving for stream 3";
  EXPECT_EQ(set.empty_stream_arenas(), 0u);
  EXPECT_EQ(set.get(false, 3).stream, 3u) << "a later call makes it";
  set.check_invariants();
  EXPECT_EQ(sim.live_reservations(), 2u);
}

// Many streams at once: past kFullSizeArenas arenas in use, each doubling of their count halves the size of the
// arenas made, so a process's address space (about 128 TiB, the GPU's included) holds hundreds of them.
TEST(ArenaSetTest, ArenaSizesHalveAsArenasInUseDouble) {
  SimBackend sim;
  constexpr std::uint64_t kTiB = 1024 * kGiB;
  ArenaSet set(sim, kTiB, /*per_stream=*/true, [](Arena&) { return true; }, [] {});
  std::uint64_t reserved_bytes = 0;
  for (StreamId s = 1; s <= 600; ++s) {
    Arena& a = set.get(false, s);
    a.blocks = 1;  // in use: none goes back
    const std::uint64_t before = s - 1;  // arenas in use when it was made
    const std::uint64_t expect = before < 16    ? kTiB
                                 : before < 32  ? kTiB / 2
                                 : before < 64  ? kTiB / 4
                                 : before < 128 ? kTiB / 8
                                 : before < 256 ? kTiB / 16
                                 : before < 512 ? kTiB / 32
                                                : kTiB / 64;
    ASSERT_EQ(a.virtual_bytes, expect) << "stream " << s;
    reserved_bytes += a.virtual_bytes;
  }
  set.check_invariants();
  EXPECT_LE(reserved_bytes, 64 * kTiB) << "600 streams in half a process's address space";
  // Arenas that go back make room for full-size ones again.
  for (StreamId s = 1; s <= 600; ++s) set.get(false, s).blocks = 0;
  EXPECT_EQ(set.retire_empty(false), 600u);
  EXPECT_EQ(set.get(false, 601).virtual_bytes, kTiB);
  set.check_invariants();
}

// Out of address space with no arena empty (a job with many streams at once), the new arena is reserved at half
// the size, and half again, the largest that fits; it goes back at its own size.
TEST(ArenaSetTest, OutOfAddressSpaceWithNoArenaEmptyANewArenaIsReservedSmaller) {
  SimBackend sim;
  FaultBackend faults(sim);
  bool may_unmap = false;
  std::uint64_t retries = 0;
  ArenaSet set(faults, kArenaBytes, /*per_stream=*/true, [&](Arena&) { return may_unmap; }, [] {}, nullptr, nullptr,
               0, &retries);
  set.get(false, 1).blocks = 1;
  // The full size fails, and so do half and a quarter: an eighth fits.
  faults.arm({BackendCall::kReserve, 1, 3, FaultError::kOutOfMemory});
  Arena& two = set.get(false, 2);
  set.check_invariants();
  EXPECT_EQ(two.virtual_bytes, kArenaBytes / 8);
  EXPECT_EQ(retries, 1u) << "one allocation retried (Stats::num_alloc_retries)";
  EXPECT_EQ(two.free.ranges().size(), 1u);
  EXPECT_EQ(two.free.ranges()[0].size_bytes, kArenaBytes / 8) << "its free range spans it, no more";
  EXPECT_EQ(sim.live_reservations(), 2u);
  // It goes back at its own size (the sim backend refuses a free of another size), and the next arena is full-size.
  may_unmap = true;
  EXPECT_EQ(set.retire_empty(false), 1u);
  set.check_invariants();
  EXPECT_EQ(sim.live_reservations(), 1u);
  EXPECT_EQ(set.get(false, 3).virtual_bytes, kArenaBytes);
  set.check_invariants();
  // The largest size that fits is taken: past the sizes that are multiples of the granularity, none is tried.
  ArenaSet odd(faults, 3 * sim.granularity_bytes(), /*per_stream=*/true, [](Arena&) { return true; }, [] {});
  faults.arm({BackendCall::kReserve, 1, 1, FaultError::kOutOfMemory});
  EXPECT_THROW(odd.get(false, 1), OutOfMemoryError) << "1.5 pages is no size to reserve";
  odd.check_invariants();
}

TEST(ArenaSetTest, ANewStreamTakesOverTheEmptyArenaHeldLongestThatTheHandoverLets) {
  SimBackend sim;
  std::set<StreamId> busy;  // streams whose work may still touch their arenas
  std::vector<StreamId> asked;
  ArenaSet set(sim, kArenaBytes, /*per_stream=*/true, [](Arena&) { return true; }, [] {},
               [&](const Arena& arena) -> std::uint64_t {
                 asked.push_back(arena.stream);
                 return busy.count(arena.stream) ? 0 : 100 + arena.stream;
               });
  Arena& one = set.get(false, 1);
  one.blocks = 1;  // stream 1 has a block placed: not to be taken over
  Arena& two = set.get(false, 2);
  two.blocks = 1;
  Arena& small = set.get(true, 3);
  set.check_invariants();
  EXPECT_EQ(sim.live_reservations(), 3u);
  EXPECT_TRUE(asked.empty()) << "nothing of the pool was empty: no question asked";
  // Now empty. Stream 4's large arena: stream 1's, the longest held, unless its work may still run.
  one.blocks = 0;
  two.blocks = 0;
  busy.insert(1);
  Arena& four = set.get(false, 4);
  set.check_invariants();
  EXPECT_EQ(&four, &two);
  EXPECT_EQ(four.stream, 4u);
  EXPECT_EQ(four.handover_tick, 102u);
  EXPECT_EQ(asked, (std::vector<StreamId>{1, 2})) << "oldest first, the small pool's arena not asked";
  EXPECT_EQ(sim.live_reservations(), 3u) << "nothing reserved";
  EXPECT_EQ(&set.get(false, 4), &two) << "its slot now";
  busy.clear();
  asked.clear();
  Arena& five = set.get(false, 5);
  EXPECT_EQ(&five, &one);
  EXPECT_EQ(asked, (std::vector<StreamId>{1}));
  set.check_invariants();
  // An arena with a block placed is never asked; none left empty in the large pool: stream 6 gets a new one.
  one.blocks = 1;
  two.blocks = 1;
  asked.clear();
  Arena& six = set.get(false, 6);
  EXPECT_TRUE(asked.empty());
  EXPECT_NE(&six, &one);
  EXPECT_NE(&six, &two);
  EXPECT_EQ(sim.live_reservations(), 4u);
  EXPECT_EQ(small.stream, 3u);
  set.check_invariants();
  // Stream 1, whose arena went to stream 5, comes back: the same rule (stream 6's arena, the only empty one).
  EXPECT_EQ(&set.get(false, 1), &six);
  set.check_invariants();
}

TEST(ArenaSetTest, WithAQuietTimeAnArenaThatKeepsBlocksPassesOnceItsStreamIsQuietInBothPools) {
  SimBackend sim;
  ManualClock clock;
  constexpr std::int64_t kQuietNs = 250'000'000;
  std::set<StreamId> busy;
  ArenaSet set(sim, kArenaBytes, /*per_stream=*/true, [](Arena&) { return true; }, [] {},
               [&](const Arena& arena) -> std::uint64_t { return busy.count(arena.stream) ? 0 : 100; }, &clock,
               kQuietNs);
  Arena& one = set.get(false, 1);
  one.blocks = 1;  // the workspace it keeps
  clock.advance_ns(10);
  Arena& two = set.get(false, 2);
  two.blocks = 1;
  EXPECT_EQ(two.last_active_ns, 10) << "stamped with the clock at its allocation";
  clock.advance_ns(kQuietNs - 11);  // the clock at kQuietNs - 1
  EXPECT_NE(&set.get(false, 3), &one) << "stream 1 quiet 1 ns short of the quiet time: a new arena";
  EXPECT_EQ(sim.live_reservations(), 3u);
  set.check_invariants();
  // Stream 1 allocates in the small pool: active, so its large arena stays its own although quiet there.
  set.get(true, 1);
  clock.advance_ns(1);
  set.get(false, 3).blocks = 1;
  EXPECT_NE(&set.get(false, 4), &one) << "stream 1 was active in its small pool";
  EXPECT_EQ(sim.live_reservations(), 5u);
  set.check_invariants();
  // Every stream quiet now; stream 2's and stream 1's large arenas still keep a block each.
  clock.advance_ns(kQuietNs);
  set.get(false, 4).blocks = 1;
  Arena& five = set.get(false, 5);
  EXPECT_EQ(&five, &two) << "the quietest stream's arena (stream 2 last allocated at 10 ns; stream 1 later)";
  EXPECT_EQ(five.stream, 5u);
  EXPECT_EQ(five.blocks, 1u) << "its block stays where it is";
  EXPECT_EQ(five.handover_tick, 100u);
  EXPECT_EQ(sim.live_reservations(), 5u) << "nothing reserved";
  set.check_invariants();
  // The handover still decides: stream 1's work may still run, so stream 6 skips it for stream 3's arena.
  busy.insert(1);
  Arena& six = set.get(false, 6);
  EXPECT_NE(&six, &one);
  EXPECT_EQ(six.stream, 6u);
  EXPECT_EQ(sim.live_reservations(), 5u);
  set.check_invariants();
}

TEST(ArenaSetTest, QuietStreamsArenasGoQuietestFirstKeepingBlocksOrNotThenALiveStreamsEmptyOne) {
  SimBackend sim;
  ManualClock clock;
  constexpr std::int64_t kQuietNs = 1000;
  ArenaSet set(sim, kArenaBytes, /*per_stream=*/true, [](Arena&) { return true; }, [] {},
               [](const Arena&) -> std::uint64_t { return 1; }, &clock, kQuietNs);
  Arena& keeps = set.get(false, 1);  // quiet from kQuietNs on, keeps a block
  keeps.blocks = 1;
  clock.advance_ns(10);
  Arena& quiet_empty = set.get(false, 2);  // quiet from kQuietNs + 10 on, empty (a block while stream 3 comes)
  quiet_empty.blocks = 1;
  Arena& live_empty = set.get(false, 3);   // empty
  quiet_empty.blocks = 0;
  EXPECT_EQ(sim.live_reservations(), 3u);
  clock.advance_ns(kQuietNs);
  EXPECT_EQ(&set.get(false, 3), &live_empty) << "stream 3 allocates again: live";
  set.check_invariants();
  EXPECT_EQ(&set.get(false, 4), &keeps) << "stream 1 went quiet first: its arena, though it keeps a block";
  EXPECT_EQ(keeps.kept_blocks, 1u);
  EXPECT_EQ(&set.get(false, 5), &quiet_empty);
  EXPECT_EQ(&set.get(false, 6), &live_empty) << "a live stream's empty arena, as without a quiet time";
  EXPECT_EQ(sim.live_reservations(), 3u);
  set.check_invariants();
  // Without a clock only empty arenas pass.
  SimBackend sim2;
  ArenaSet plain(sim2, kArenaBytes, /*per_stream=*/true, [](Arena&) { return true; }, [] {},
                 [](const Arena&) -> std::uint64_t { return 1; });
  plain.get(false, 1).blocks = 1;
  EXPECT_EQ(plain.get(false, 2).stream, 2u);
  EXPECT_EQ(sim2.live_reservations(), 2u) << "no quiet time: the arena that keeps a block is not taken";
  EXPECT_EQ(plain.get(false, 1).last_active_ns, 0) << "and nothing read a clock";
}

TEST(ArenaSetTest, AHandoverThatThrowsChangesNothing) {
  SimBackend sim;
  bool fail = true;
  ArenaSet set(sim, kArenaBytes, /*per_stream=*/true, [](Arena&) { return true; }, [] {},
               [&](const Arena&) -> std::uint64_t {
                 if (fail) throw BackendError("cuStreamQuery", "CUDA_ERROR_LAUNCH_FAILED (fake)");
                 return 7;
               });
  Arena& one = set.get(false, 1);
  EXPECT_THROW(set.get(false, 2), BackendError);
  set.check_invariants();
  EXPECT_EQ(one.stream, 1u);
  EXPECT_EQ(&set.get(false, 1), &one) << "stream 1 keeps its arena";
  EXPECT_EQ(sim.live_reservations(), 1u);
  fail = false;
  EXPECT_EQ(&set.get(false, 2), &one) << "a later call takes it over";
  EXPECT_EQ(one.handover_tick, 7u);
  set.check_invariants();
}

TEST(ArenaSetTest, ARetiredArenaStillNamedOrHoldingAChunkFailsTheCheck) {
  SimBackend sim;
  ArenaSet set(sim, kArenaBytes, /*per_stream=*/true, [](Arena&) { return true; }, [] {});
  Arena& a = set.get(false, 1);
  set.get(true, 2);
  set.check_invariants();
  a.retired = true;  // marked retired by hand: its slot still names it
  test::expect_broken([&] { set.check_invariants(); }, "a slot names retired arena");
  a.retired = false;
  set.check_invariants();
  // Retired properly, then given a page map entry by hand: a retired arena must have no chunk mapped.
  EXPECT_EQ(set.retire_empty(false), 2u);
  set.check_invariants();
  set[a.id].pages.insert(PageNumber{0}, 0, Pages{1});
  test::expect_broken([&] { set.check_invariants(); }, "is not a spare id once, or has chunks or blocks");
  set[a.id].pages.erase(PageNumber{0});
  set.check_invariants();
}

}  // namespace
}  // namespace gmlake::engine
