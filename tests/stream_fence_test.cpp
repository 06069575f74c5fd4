// The gmlake policy with asynchronous streams (StreamEvents): chunks never move away from a page before the
// work its stream queued has finished, and same-stream reuse never waits.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "policies/gmlake/stitching_allocator.h"
#include "expect_error.h"
#include "gmlake/sim_backend.h"
#include "manual_events.h"

namespace gmlake::engine {
namespace {

// These tests pin down the page-granular mechanics (one chunk size, no grow-ahead); chunks of several sizes
// are tested in multi_size_chunks_test.cpp.
// Moves unbounded (move_share_permille:0): these tests pin down how memory moves, not when the budget stops it.
const std::string kPageGranular = "max_chunk_bytes:2M,grow_bytes:2M,move_share_permille:0";

using test::ManualEvents;

// StreamFence on its own under random traffic on three streams: its invariants hold after every step, a tick
// once safe stays safe, wait_safe makes its tick safe, and wait_all makes every tick handed out safe.
TEST(StreamFenceAloneTest, InvariantsHoldAfterEveryStepOfRandomTraffic) {
  ManualEvents events;
  StreamFence fence(&events);
  std::mt19937_64 rng(7);
  std::uint64_t tick = 0;
  std::map<StreamId, std::uint64_t> safe_seen;  // highest tick seen safe per stream
  for (int step = 0; step < 20000; ++step) {
    const StreamId stream = static_cast<StreamId>(rng() % 3);
    switch (rng() % 7) {
      case 0:
      case 1:
        fence.note_idle(stream, ++tick);
        break;
      case 2: {
        const std::uint64_t t = tick == 0 ? 0 : 1 + rng() % tick;
        if (fence.safe(stream, t)) safe_seen[stream] = std::max(safe_seen[stream], t);
        break;
      }
      case 3:
        if (tick != 0) {
          const std::uint64_t t = 1 + rng() % tick;
          fence.wait_safe(stream, t, ++tick);
          ASSERT_TRUE(fence.safe(stream, t)) << "step " << step;
          safe_seen[stream] = std::max(safe_seen[stream], t);
        }
        break;
      case 4:
        if (tick != 0) {
          const std::uint64_t t = 1 + rng() % tick;
          fence.cover(stream, t, ++tick);
        }
        break;
      case 5:
        events.finish(stream);
        EXPECT_TRUE(fence.stream_idle(stream));
        break;
      default:
        if (rng() % 50 == 0) {
          fence.wait_all(++tick);
          for (StreamId s = 0; s < 3; ++s) ASSERT_TRUE(fence.safe(s, tick));
        }
        break;
    }
    ASSERT_NO_THROW(fence.check_invariants()) << "step " << step;
    for (const auto& [s, t] : safe_seen) ASSERT_TRUE(fence.safe(s, t)) << "a safe tick turned unsafe, step " << step;
    // Every call that asks the driver is counted (Stats::stream_event_calls), releases are not.
    ASSERT_EQ(fence.driver_calls(), events.driver_calls()) << "step " << step;
  }
  EXPECT_GT(events.recorded(), 100) << "the traffic recorded marks";
  EXPECT_GT(events.idle_queries, 100) << "and asked whether streams were idle";
}

TEST(StreamFenceAloneTest, WithoutEventsEveryTickIsSafeAndNoStreamIsKept) {
  StreamFence fence(nullptr);
  fence.note_idle(1, 5);
  fence.cover(1, 5, 6);
  fence.wait_safe(2, 7, 8);
  EXPECT_TRUE(fence.safe(1, 100));
  EXPECT_NO_THROW(fence.check_invariants());
}

class StreamFenceTest : public ::testing::Test {
 protected:
  StitchingAllocator& make(const std::string& conf, Clock* clock = nullptr) {
    alloc_ = std::make_unique<StitchingAllocator>(
        parse_config(conf.empty() ? kPageGranular : kPageGranular + "," + conf), backend_, &events_, clock);
    return *alloc_;
  }
  std::uint64_t reserved() const { return static_cast<std::uint64_t>(alloc_->stats().reserved_bytes.current); }

  SimBackend backend_;
  ManualEvents events_;
  std::unique_ptr<StitchingAllocator> alloc_;
};

// StreamFence::cover on its own: an uncovered tick gets a mark (recorded, never waited for), which makes it
// safe once the stream finishes; a tick already covered gets none.
TEST(StreamFenceCoverTest, AnUncoveredTickGetsAMarkThatMakesItSafeOnceTheStreamFinishes) {
  ManualEvents events;
  StreamFence fence(&events);
  constexpr StreamId kStream = 3;
  fence.note_idle(kStream, 1);  // the stream's first mark, at tick 1
  fence.note_idle(kStream, 2);  // within the spacing: no mark
  EXPECT_EQ(events.recorded(), 1);
  EXPECT_EQ(fence.readiness(kStream, 2), StreamFence::Readiness::kUncovered);
  fence.cover(kStream, 2, 3);
  EXPECT_EQ(events.recorded(), 2);
  EXPECT_EQ(events.waits, 0) << "cover never waits";
  EXPECT_EQ(fence.readiness(kStream, 2), StreamFence::Readiness::kCovered);
  fence.cover(kStream, 2, 4);  // covered already: nothing recorded
  EXPECT_EQ(events.recorded(), 2);
  events.finish(kStream);
  EXPECT_TRUE(fence.safe(kStream, 2));
  fence.cover(kStream, 2, 5);  // safe: nothing recorded
  EXPECT_EQ(events.recorded(), 2);
}

// StreamFence::readiness asks the driver only where its answer depends on it: a tick already known safe, and a
// tick no unfinished mark covers, are answered from what the fence knows (no event query); a covered tick polls.
TEST(StreamFenceReadinessTest, ASafeOrUncoveredTickIsAnsweredWithoutAskingTheDriver) {
  ManualEvents events;
  StreamFence fence(&events);
  constexpr StreamId kStream = 3;
  fence.note_idle(kStream, 1);  // the stream's first mark, at tick 1
  std::uint64_t calls = fence.driver_calls();
  EXPECT_EQ(fence.readiness(kStream, 2), StreamFence::Readiness::kUncovered);
  EXPECT_EQ(fence.driver_calls(), calls) << "no mark covers tick 2: nothing to ask";
  EXPECT_EQ(fence.readiness(kStream, 1), StreamFence::Readiness::kCovered);
  EXPECT_EQ(fence.driver_calls(), calls + 1) << "covered: one query of the mark";
  events.finish(kStream);
  EXPECT_EQ(fence.readiness(kStream, 1), StreamFence::Readiness::kSafe);
  calls = fence.driver_calls();
  EXPECT_EQ(fence.readiness(kStream, 1), StreamFence::Readiness::kSafe);
  EXPECT_EQ(fence.readiness(kStream, 0), StreamFence::Readiness::kSafe);
  EXPECT_EQ(fence.driver_calls(), calls) << "known safe: nothing to ask";
  EXPECT_EQ(fence.driver_calls(), events.driver_calls());
}

// StreamFence::wait_safe says whether it drained the stream: true only where it had to record the mark it waited
// for (the tick uncovered), false for a tick covered by an earlier mark or already safe.
TEST(StreamFenceWaitTest, AWaitDrainsTheStreamOnlyWhereNoMarkCoveredTheTick) {
  ManualEvents events;
  StreamFence fence(&events);
  constexpr StreamId kStream = 3;
  fence.note_idle(kStream, 1);  // the stream's first mark, at tick 1
  fence.note_idle(kStream, 2);  // within the spacing: no mark
  EXPECT_FALSE(fence.wait_safe(kStream, 1, 3)) << "covered by the first mark";
  EXPECT_EQ(events.recorded(), 1);
  EXPECT_TRUE(fence.wait_safe(kStream, 2, 4)) << "uncovered: a mark recorded now and waited for";
  EXPECT_EQ(events.recorded(), 2);
  EXPECT_TRUE(fence.safe(kStream, 2));
  EXPECT_FALSE(fence.wait_safe(kStream, 2, 5)) << "already safe";
  EXPECT_EQ(events.waits, 2);
  EXPECT_EQ(events.recorded(), 2);
}

TEST_F(StreamFenceTest, SharedArenasAcrossStreamsAreRefusedWithAsynchronousStreams) {
  test::expect_error([&] { make("cross_stream_reuse:true"); }, ErrorCode::kConfig, "cross_stream_reuse");
}

TEST_F(StreamFenceTest, SameStreamReuseNeitherWaitsNorCreates) {
  auto& a = make("cross_stream_reuse:false");
  void* p = a.allocate(4 * kMiB, 1);
  a.deallocate(p);
  EXPECT_EQ(a.allocate(4 * kMiB, 1), p);
  EXPECT_EQ(events_.waits, 0);
  EXPECT_EQ(reserved(), 4 * kMiB);
  a.check_invariants();
}

// A chunk its own stream may still be using moves to back another block of that stream with no wait and no new
// memory: the block's work is queued after that work (stream order). Its old mapping stays as a standby one,
// which is unmapped only once that work has finished.
TEST_F(StreamFenceTest, AnIdleChunkMovesToABlockOfItsOwnStreamInStreamOrder) {
  // Lag growth off: an uncovered chunk would otherwise make a new one first (the next test).
  auto& a = make("cross_stream_reuse:false,headroom_permille:0,lag_grow_pages:0,in_order_moves:true");
  constexpr StreamId kStream = 1;
  void* x = a.allocate(2 * kMiB, kStream);  // page 0
  void* y = a.allocate(2 * kMiB, kStream);  // page 1
  void* z = a.allocate(2 * kMiB, kStream);  // page 2
  a.deallocate(x);  // the stream's first mark: x's page is covered
  a.deallocate(z);  // within the mark spacing: z's page is uncovered
  void* w = a.allocate(4 * kMiB, kStream);  // 2 pages past y: the idle chunks back them, unfinished
  EXPECT_EQ(reserved(), 6 * kMiB) << "no chunk created for the lag";
  EXPECT_EQ(events_.waits, 0) << "no wait in stream order";
  EXPECT_EQ(a.stats().fence_waits, 0u);
  EXPECT_GE(a.stats().in_order_evictions, 1u);
  EXPECT_EQ(a.stats().in_order_evictions, a.stats().evictions) << "every move was made in stream order";
  a.check_invariants();
  // Page 0 again: its standby mapping belongs to a chunk that w uses now, and the work queued on page 0 may
  // still run: it is unmapped only after waiting for that work.
  void* v = a.allocate(2 * kMiB, kStream);
  EXPECT_EQ(v, x);
  EXPECT_GE(a.stats().fence_waits, 1u) << "the old mapping was unmapped without waiting for its work";
  a.check_invariants();
  for (void* p : {v, w, y}) a.deallocate(p);
  a.check_invariants();
}

TEST_F(StreamFenceTest, LagGrowthComesFirstThenMovesInStreamOrderInsteadOfWaits) {
  // With in_order_moves an uncovered chunk of the allocating stream makes a new chunk while lag growth is allowed
  // (the layout the device still runs stays where it is); once it is spent, the chunk moves in stream order.
  auto& a = make("cross_stream_reuse:false,headroom_permille:0,lag_grow_pages:1,in_order_moves:true");
  constexpr StreamId kStream = 1;
  void* x = a.allocate(2 * kMiB, kStream);  // page 0
  void* y = a.allocate(2 * kMiB, kStream);  // page 1
  void* z = a.allocate(2 * kMiB, kStream);  // page 2
  void* pin = a.allocate(2 * kMiB, kStream);  // page 3
  a.deallocate(x);  // the stream's first mark: x's page is covered
  a.deallocate(z);  // within the mark spacing: z's page is uncovered
  void* w = a.allocate(6 * kMiB, kStream);  // 3 pages past pin
  EXPECT_EQ(events_.waits, 0) << "no wait: lag growth, then stream order";
  EXPECT_EQ(a.stats().fence_waits, 0u);
  EXPECT_EQ(reserved(), 10 * kMiB) << "x, y, z and pin's chunks, and one made for the lag";
  EXPECT_EQ(a.stats().in_order_evictions, 2u);
  a.check_invariants();
  for (void* p : {w, y, pin}) a.deallocate(p);
  a.check_invariants();
}

TEST_F(StreamFenceTest, AtTheStandbyLimitAnUnfinishedOldMappingStopsTheMoveInStreamOrder) {
  // One standby mapping per chunk: a chunk that already has an unfinished one cannot move in stream order, since
  // the move would unmap it; it waits (lag growth off) instead.
  auto& a =
      make("cross_stream_reuse:false,headroom_permille:0,standby_mappings:1,lag_grow_pages:0,in_order_moves:true");
  constexpr StreamId kStream = 1;
  void* x = a.allocate(2 * kMiB, kStream);  // page 0: chunk c0
  void* y = a.allocate(2 * kMiB, kStream);  // page 1
  a.deallocate(x);
  void* z = a.allocate(4 * kMiB, kStream);  // pages 2-3: c0 moves there in stream order (standby at page 0)
  EXPECT_EQ(a.stats().in_order_evictions, 1u);
  EXPECT_EQ(events_.waits, 0);
  void* u = a.allocate(2 * kMiB, kStream);  // page 4: z's range cannot grow
  a.deallocate(z);  // c0 idle again at page 2, its standby at page 0 still unfinished
  void* big = a.allocate(6 * kMiB, kStream);  // pages 5-7: c0 must move again, its standby first unmapped
  EXPECT_LE(a.stats().in_order_evictions, 2u) << "only page 3's chunk, with no standby mapping, may move so";
  EXPECT_GE(a.stats().fence_waits, 1u) << "the standby limit would unmap an unfinished mapping";
  EXPECT_EQ(reserved(), 10 * kMiB) << "y, u, the two idle chunks and one new";
  a.check_invariants();
  for (void* p : {big, u, y}) a.deallocate(p);
  a.check_invariants();
}

TEST_F(StreamFenceTest, FreesBetweenMarksAskTheDriverNothing) {
  // 64 blocks on their own chunks, each free turning one chunk idle: one mark per kMarkSpacingTicks idle turns,
  // and the marks are polled only when a new one is due, not at every free.
  auto& a = make("cross_stream_reuse:false");
  std::vector<void*> blocks;
  for (int i = 0; i < 64; ++i) blocks.push_back(a.allocate(2 * kMiB, 1));
  const int queries_before = events_.queries;
  for (void* p : blocks) a.deallocate(p);
  const int marks = 64 / static_cast<int>(StreamFence::kMarkSpacingTicks);
  EXPECT_EQ(events_.recorded(), marks);
  EXPECT_LE(events_.queries - queries_before, marks) << "at most one query per mark due";
  EXPECT_EQ(a.stats().stream_event_calls, events_.driver_calls())
      << "the pool's statistics count every call that asked the driver";
  EXPECT_GE(a.stats().stream_event_calls, static_cast<std::uint64_t>(marks));
  a.check_invariants();
}

TEST_F(StreamFenceTest, AFreeCoveredByAnUnfinishedMarkMakesAnotherStreamGrowRatherThanBlockTheHost) {
  auto& a = make("cross_stream_reuse:false");
  a.deallocate(a.allocate(4 * kMiB, 1));
  a.allocate(4 * kMiB, 2);
  EXPECT_EQ(reserved(), 8 * kMiB) << "lag growth (lag_grow_covered): new chunks, the old ones still idle";
  EXPECT_EQ(events_.waits, 0);
  EXPECT_EQ(a.stats().fence_waits, 0u);
  a.check_invariants();
}

// lag_headroom_permille: lag growth, a page at a time here, only while reserved bytes stay within that many
// thousandths above the highest allocated bytes H = 4 MiB (bound H + H / 1000 x permille: 1001 admits both pages of
// a second 4 MiB block, 501 one, 0 none); past the bound the allocator waits for the mark instead.
TEST(StreamFenceLagHeadroomTest, LagGrowthStopsAtTheBoundAboveTheHighestAllocatedBytesThenWaits) {
  struct Row {
    std::uint64_t permille, reserved_mib, waits;
  };
  for (const Row r : {Row{1001, 8, 0}, Row{501, 6, 1}, Row{0, 4, 1}}) {
    SimBackend backend;
    ManualEvents events;
    StitchingAllocator a(
        parse_config(kPageGranular + ",cross_stream_reuse:false,lag_headroom_permille:" + std::to_string(r.permille)),
        backend, &events);
    a.deallocate(a.allocate(4 * kMiB, 1));  // covered by the stream's first mark, unfinished
    a.allocate(4 * kMiB, 2);
    EXPECT_EQ(static_cast<std::uint64_t>(a.stats().reserved_bytes.current), r.reserved_mib * kMiB) << r.permille;
    EXPECT_EQ(a.stats().fence_waits, r.waits) << r.permille;
    EXPECT_EQ(static_cast<std::uint64_t>(events.waits), r.waits) << r.permille;
    a.check_invariants();
  }
}

TEST_F(StreamFenceTest, WithLagGrowCoveredOffAFreeCoveredByAnUnfinishedMarkIsWaitedForInsteadOfGrowing) {
  auto& a = make("cross_stream_reuse:false,lag_grow_covered:false");
  a.deallocate(a.allocate(4 * kMiB, 1));
  EXPECT_EQ(events_.recorded_streams, std::set<StreamId>{1});
  a.allocate(4 * kMiB, 2);
  EXPECT_EQ(reserved(), 4 * kMiB);  // stream 1's chunks, once its queued work up to the mark finished
  EXPECT_EQ(events_.waits, 1);
  EXPECT_EQ(a.stats().fence_waits, 1u);
  EXPECT_EQ(a.stats().fence_drains, 0u) << "the free's own mark covered it: no mark recorded to wait for";
  a.check_invariants();
}

// The time a wait blocks the host is counted on the pool's clock, and a wait that had to record its own mark
// counts as a drain.
TEST_F(StreamFenceTest, AWaitCountsTheHostsBlockedTimeAndADrainWhereNoMarkCovered) {
  ManualClock clock;
  events_.clock = &clock;
  events_.wait_ns = 250'000;
  auto& a = make("cross_stream_reuse:false,lag_grow_pages:0", &clock);
  void* p = a.allocate(2 * kMiB, 1);
  void* q = a.allocate(2 * kMiB, 1);
  a.deallocate(p);  // covered by the stream's first mark
  a.deallocate(q);  // idle after that mark, within the spacing: uncovered
  a.allocate(2 * kMiB, 2);  // p's page: a wait for the first mark, no drain
  EXPECT_EQ(a.stats().fence_waits, 1u);
  EXPECT_EQ(a.stats().fence_drains, 0u);
  EXPECT_EQ(a.stats().fence_wait_ns, 250'000u);
  a.allocate(2 * kMiB, 2);  // q's page, no lag growth: a mark recorded now and waited for, the stream drained
  EXPECT_EQ(a.stats().fence_waits, 2u);
  EXPECT_EQ(a.stats().fence_drains, 1u);
  EXPECT_EQ(a.stats().fence_wait_ns, 500'000u);
  EXPECT_EQ(reserved(), 4 * kMiB) << "both pages moved, none created";
  a.check_invariants();
}

TEST_F(StreamFenceTest, APageIdledAfterTheLastMarkMakesAnotherStreamGrowRatherThanDrainTheStream) {
  auto& a = make("cross_stream_reuse:false,lag_grow_covered:false");
  void* p = a.allocate(2 * kMiB, 1);
  void* q = a.allocate(2 * kMiB, 1);
  a.deallocate(p);  // its page: covered by the stream's first mark
  a.deallocate(q);  // its page: idle after that mark, within the mark spacing: uncovered
  a.allocate(4 * kMiB, 2);
  EXPECT_EQ(events_.waits, 1);        // for p's page
  EXPECT_EQ(reserved(), 6 * kMiB);    // q's page stays; a new chunk instead
  EXPECT_EQ(a.stats().evictions, 1u);
  a.check_invariants();
}

TEST_F(StreamFenceTest, GrowingForUncoveredPagesStopsAfterLagGrowChunksInARowThenWaits) {
  auto& a = make("cross_stream_reuse:false,lag_grow_pages:2");
  void* p = a.allocate(2 * kMiB, 1);  // its free records the stream's first mark
  std::vector<void*> young;
  for (int i = 0; i < 4; ++i) young.push_back(a.allocate(2 * kMiB, 1));
  a.deallocate(p);
  events_.finish_all();  // p's page is safe ...
  for (void* q : young) a.deallocate(q);  // ... the young pages idle after the last mark: uncovered
  events_.busy_streams.insert(1);  // their work (no mark after it) may still run: stream 2 cannot take the arena
  a.allocate(2 * kMiB, 2);  // takes p's safe page: no growth, no wait
  EXPECT_EQ(reserved(), 10 * kMiB);
  a.allocate(2 * kMiB, 2);  // uncovered: grows
  a.allocate(2 * kMiB, 2);  // uncovered: grows (2 in a row)
  EXPECT_EQ(reserved(), 14 * kMiB);
  EXPECT_EQ(events_.waits, 0);
  a.allocate(2 * kMiB, 2);  // the bound: waits for the young pages' stream instead of growing
  EXPECT_EQ(reserved(), 14 * kMiB);
  EXPECT_EQ(a.stats().fence_waits, 1u);
  EXPECT_EQ(a.stats().fence_drains, 1u) << "no mark covered the young pages: the wait drained the stream";
  EXPECT_GE(events_.waits, 1);
  a.check_invariants();
}

TEST_F(StreamFenceTest, AFinishedFreeLetsItsChunksMoveToAnotherStreamAtOnce) {
  auto& a = make("cross_stream_reuse:false,arena_handover:false");
  a.deallocate(a.allocate(4 * kMiB, 1));
  events_.finish_all();
  a.allocate(4 * kMiB, 2);
  EXPECT_EQ(reserved(), 4 * kMiB);
  EXPECT_EQ(a.stats().evictions, 2u);
  EXPECT_EQ(events_.waits, 0);
  a.check_invariants();
}

TEST_F(StreamFenceTest, AnEmptyArenaPassesToANewStreamOnlyOnceItsOldStreamsWorkFinished) {
  auto& a = make("cross_stream_reuse:false");
  void* p = a.allocate(4 * kMiB, 1);
  void* p2 = a.allocate(4 * kMiB, 1);
  a.deallocate(p);
  a.deallocate(p2);  // their marks have not finished: stream 1's work may still touch the pages
  void* q = a.allocate(4 * kMiB, 2);
  EXPECT_NE(q, p) << "a new arena: the old one's work is queued";
  EXPECT_EQ(a.stats().arena_handovers, 0u);
  EXPECT_EQ(a.stats().reserved_bytes.current, 12 * kMiB) << "grown for the lag, not moved";
  a.check_invariants();
  events_.finish_all();
  const std::uint64_t waits = a.stats().fence_waits;
  void* r = a.allocate(4 * kMiB, 3);  // stream 1's arena is empty and its work finished: stream 3 takes it
  EXPECT_EQ(r, p) << "the same place, its chunks mapped where they were";
  EXPECT_EQ(a.stats().arena_handovers, 1u);
  EXPECT_EQ(a.stats().fence_waits, waits) << "nothing waited for";
  a.check_invariants();
  // p2's pages turned idle under stream 1, whose work finished: safe, though stream 3 has no mark that says so.
  // At a cap that leaves no room, stream 2 takes them with no wait.
  const std::uint64_t evictions = a.stats().evictions;
  a.set_cap_bytes(a.stats().reserved_bytes.current);
  void* s2 = a.allocate(4 * kMiB, 2);
  EXPECT_GT(a.stats().evictions, evictions) << "p2's chunks moved to stream 2";
  EXPECT_EQ(a.stats().fence_waits, waits) << "no wait on stream 3 for pages it never touched";
  a.check_invariants();
  for (void* x : {q, r, s2}) a.deallocate(x);
  a.check_invariants();
}

TEST_F(StreamFenceTest, AStreamWhoseWorkIsUnmarkedButDoneHandsItsArenaOverWhenTheDriverSaysItIsIdle) {
  auto& a = make("cross_stream_reuse:false");
  void* p = a.allocate(4 * kMiB, 1);  // its free records the stream's first mark
  std::vector<void*> young;
  for (int i = 0; i < 2; ++i) young.push_back(a.allocate(2 * kMiB, 1));
  a.deallocate(p);
  for (void* y : young) a.deallocate(y);  // idle after the last mark: no mark tells whether their work finished
  events_.finish_all();
  const int queries = events_.idle_queries;
  void* q = a.allocate(4 * kMiB, 2);
  EXPECT_GT(events_.idle_queries, queries) << "asked the stream itself";
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.stats().arena_handovers, 1u);
  EXPECT_EQ(a.stats().fence_waits, 0u);
  a.check_invariants();
}

TEST_F(StreamFenceTest, AQuietStreamsArenaPassesWithTheBlocksItKeepsAndTheirFreesWaitForTheirOwnStream) {
  ManualClock clock;
  auto& a = make("cross_stream_reuse:false,handover_quiet_ms:250", &clock);
  void* kept1 = a.allocate(4 * kMiB, 1);  // as the cuBLAS workspaces PyTorch keeps for a stream
  void* kept2 = a.allocate(4 * kMiB, 1);
  void* p = a.allocate(4 * kMiB, 1);
  a.deallocate(p);
  events_.finish_all();
  clock.advance_ns(249'999'999);
  void* early = a.allocate(4 * kMiB, 2);
  EXPECT_EQ(a.stats().arena_handovers, 0u) << "stream 1 allocated 1 ns less than the quiet time ago";
  EXPECT_NE(early, p);
  a.deallocate(early);
  a.check_invariants();
  clock.advance_ns(1);
  void* q = a.allocate(4 * kMiB, 3);
  EXPECT_EQ(a.stats().arena_handovers, 1u);
  EXPECT_EQ(q, p) << "stream 1's arena, its chunks where they were";
  EXPECT_EQ(a.find_block(kept1)->stream, 1u) << "the kept blocks stay stream 1's, where they are";
  a.check_invariants();
  // Stream 1 idle: the kept block's free asks the stream and waits for nothing.
  const int queries = events_.idle_queries;
  a.deallocate(kept1);
  EXPECT_GT(events_.idle_queries, queries);
  EXPECT_EQ(a.stats().fence_waits, 0u);
  a.check_invariants();
  // Stream 1 has queued work: the free waits for it before stream 3 may place a block on those pages.
  events_.busy_streams.insert(1);
  const std::uint64_t reserved_before = reserved();
  a.deallocate(kept2);
  EXPECT_EQ(a.stats().fence_waits, 1u);
  EXPECT_GE(events_.waits, 1);
  EXPECT_TRUE(events_.recorded_streams.count(1)) << "a mark on stream 1 itself";
  a.check_invariants();
  void* r = a.allocate(8 * kMiB, 3);
  EXPECT_EQ(r, kept1) << "stream 3 reuses the kept blocks' range";
  EXPECT_EQ(reserved(), reserved_before) << "and their pages, nothing created";
  a.check_invariants();
  for (void* x : {q, r}) a.deallocate(x);
  a.check_invariants();
}

TEST_F(StreamFenceTest, AKeptBlocksFreeWaitsForEveryStreamWhenItsOwnCannotBeMarked) {
  ManualClock clock;
  auto& a = make("cross_stream_reuse:false,handover_quiet_ms:250", &clock);
  void* kept = a.allocate(4 * kMiB, 1);
  a.deallocate(a.allocate(4 * kMiB, 1));
  events_.finish_all();
  clock.advance_ns(250'000'000);
  void* q = a.allocate(4 * kMiB, 2);
  ASSERT_EQ(a.stats().arena_handovers, 1u);
  // Stream 1 has queued work and recording on it fails (a destroyed stream, say): the free waits for every stream.
  events_.busy_streams.insert(1);
  events_.failing_streams.insert(1);
  EXPECT_NO_THROW(a.deallocate(kept));
  EXPECT_EQ(events_.synchronizations, 1);
  EXPECT_FALSE(a.find_block(kept).has_value());
  a.check_invariants();
  EXPECT_EQ(a.allocate(4 * kMiB, 2), kept) << "its range serves stream 2";
  a.check_invariants();
  static_cast<void>(q);
}

TEST_F(StreamFenceTest, WithoutAQuietTimeAnArenaThatKeepsABlockNeverPasses) {
  ManualClock clock;
  auto& a = make("cross_stream_reuse:false,handover_quiet_ms:0", &clock);
  void* kept = a.allocate(4 * kMiB, 1);
  void* p = a.allocate(4 * kMiB, 1);
  a.deallocate(p);
  events_.finish_all();
  clock.advance_ns(3'600'000'000'000);
  void* q = a.allocate(4 * kMiB, 2);
  EXPECT_EQ(a.stats().arena_handovers, 0u);
  EXPECT_NE(q, p) << "a new arena: stream 1's kept block holds its own";
  EXPECT_GT(a.stats().evictions, 0u) << "the idle chunks moved into it";
  a.check_invariants();
  for (void* x : {kept, q}) a.deallocate(x);
  a.check_invariants();
}

TEST_F(StreamFenceTest, AtTheCapTheAllocatorWaitsForTheFreeingStreamBeforeUnmapping) {
  auto& a = make("cross_stream_reuse:false,cap_bytes:4M");
  a.deallocate(a.allocate(4 * kMiB, 1));
  EXPECT_NE(a.allocate(4 * kMiB, 2), nullptr);
  EXPECT_EQ(events_.waits, 1);
  EXPECT_EQ(a.stats().fence_waits, 1u);
  EXPECT_EQ(reserved(), 4 * kMiB);
  a.check_invariants();
}

TEST_F(StreamFenceTest, EmptyCacheWaitsForQueuedWorkBeforeReleasing) {
  auto& a = make("cross_stream_reuse:false");
  a.deallocate(a.allocate(4 * kMiB, 1));
  a.deallocate(a.allocate(2 * kMiB, 2));
  a.empty_cache();
  EXPECT_EQ(events_.synchronizations, 1);
  EXPECT_TRUE(events_.unfinished.empty());
  EXPECT_EQ(reserved(), 0u);
  EXPECT_EQ(backend_.live_chunks(), 0u);
  a.check_invariants();
}

TEST_F(StreamFenceTest, TeardownSynchronizesTheDeviceInsteadOfRecordingOnStreamsThatMayBeGone) {
  auto& a = make("cross_stream_reuse:false");
  a.deallocate(a.allocate(4 * kMiB, 1));
  const std::size_t recorded = events_.recorded_streams.size();
  alloc_.reset();
  EXPECT_EQ(events_.synchronizations, 1);
  EXPECT_EQ(events_.recorded_streams.size(), recorded);
  EXPECT_EQ(backend_.live_chunks(), 0u);
}

TEST_F(StreamFenceTest, AnIdleBoundEvictsOnlyFinishedPages) {
  auto& a = make("cross_stream_reuse:false,max_idle_mapped_bytes:2M");
  a.deallocate(a.allocate(8 * kMiB, 1));
  EXPECT_EQ(a.stats().evictions, 0u);  // nothing known finished yet
  events_.finish_all();
  a.deallocate(a.allocate(512, 1));    // the next free trims
  EXPECT_GT(a.stats().evictions, 0u);
  a.check_invariants();
}


// A chunk taken back at a standby mapping in stream order (no fence) leaves its other place a standby mapping
// that the stream's queued work may still touch: unmapping that mapping waits for the work (else the GPU faults
// on a range unmapped under a running kernel: CUDA_ERROR_ILLEGAL_ADDRESS, seen on the H100 before this wait).
TEST_F(StreamFenceTest, AStandbyMappingLeftInStreamOrderIsUnmappedOnlyOnceItsWorkFinished) {
  auto& a = make("cross_stream_reuse:false,headroom_permille:0");
  constexpr StreamId kStream = 1;
  void* x = a.allocate(2 * kMiB, kStream);  // page 0: chunk c0
  void* y = a.allocate(2 * kMiB, kStream);  // page 1
  a.deallocate(x);
  events_.finish_all();
  void* z = a.allocate(4 * kMiB, kStream);  // pages 2-3: c0 moves there (safe), standby at page 0
  ASSERT_EQ(a.stats().evictions, 1u);
  a.deallocate(z);  // c0 idle at page 2; the stream's work on it is still queued
  void* w = a.allocate(2 * kMiB, kStream);  // page 0 again: c0 taken back in stream order, page 2 is standby
  EXPECT_EQ(w, x);
  const int waits_before = events_.waits;
  const std::uint64_t fence_waits_before = a.stats().fence_waits;
  // Pages 2-3 again: page 2's standby mapping (of c0, used by w) must go, and the work queued on it may run.
  void* v = a.allocate(4 * kMiB, kStream);
  EXPECT_EQ(v, z);
  EXPECT_GT(events_.waits, waits_before) << "the standby mapping was unmapped without waiting for its work";
  EXPECT_GT(a.stats().fence_waits, fence_waits_before);
  a.check_invariants();
  for (void* p : {v, w, y}) a.deallocate(p);
  a.check_invariants();
}

}  // namespace
}  // namespace gmlake::engine
