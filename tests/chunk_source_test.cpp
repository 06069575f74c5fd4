// ChunkSource (src/policies/gmlake/chunk_source.h) on its own, over real parts on the sim backend: the order in
// which a run's memory is found (free chunk, new chunk within headroom, the oldest idle chunk's memory, new
// memory), and the bounds that change it (move budget, cap, peers).
#include "policies/gmlake/chunk_source.h"

#include <gtest/gtest.h>

#include <memory>

#include "gmlake/clock.h"
#include "gmlake/error.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"
#include "manual_events.h"

namespace gmlake::engine {
namespace {

class ChunkSourceTest : public ::testing::Test {
 protected:
  ChunkSourceTest()
      : store_(sim_, PageGeometry(kPageBytes), stats_),
        stitcher_(sim_, store_, kGeometry),
        use_(store_, arenas_),
        fence_(nullptr),
        arenas_(sim_, 64 * kGiB, false, [](Arena&) { return true; }, [] {}) {}
  ~ChunkSourceTest() override {
    // Unmap and release everything, so that the sim backend ends empty.
    std::vector<ChunkId> live;
    store_.for_each([&](ChunkId id, const Chunk&) { live.push_back(id); });
    for (const ChunkId id : live) {
      if (store_[id].mapped()) stitcher_.unmap(arenas_[store_[id].arena], id);
      while (!store_[id].standby.empty()) {
        const ChunkPlace place = store_[id].standby.back();
        stitcher_.unmap_standby(arenas_[place.arena], place.first_page, id);
      }
      store_.release(id);
    }
  }

  // Chunks up to 256 MiB (these tests pin down how runs of several sizes are served; the default is 4 MiB).
  void make_source(const std::string& config) {
    source_ = std::make_unique<ChunkSource>(
        parse_config("max_chunk_bytes:256M," + config), kGeometry,
        ChunkSource::Parts{sim_, store_, use_, fence_, arenas_, stitcher_, stats_, clock_});
  }
  // A chunk of `pages` pages mapped at `first_page` of the large arena, with access, and idle.
  ChunkId idle_chunk(std::uint64_t first_page, std::uint64_t pages) {
    Arena& arena = arenas_.get(false, 0);
    const ChunkId id = store_.create(Pages{pages});
    stitcher_.map(arena, PageNumber{first_page}, id);
    stitcher_.grant(arena, PageNumber{first_page}, Pages{pages});
    use_.mapped_for_block(id, PageNumber{first_page}, PageNumber{first_page + pages - 1});
    use_.unuse(arena, PageNumber{first_page}, PageNumber{first_page + pages - 1});
    return id;
  }
  // A chunk of `pages` pages mapped at `first_page` of the large arena, with access, used by a block.
  ChunkId used_chunk(std::uint64_t first_page, std::uint64_t pages) {
    Arena& arena = arenas_.get(false, 0);
    const ChunkId id = store_.create(Pages{pages});
    stitcher_.map(arena, PageNumber{first_page}, id);
    stitcher_.grant(arena, PageNumber{first_page}, Pages{pages});
    use_.mapped_for_block(id, PageNumber{first_page}, PageNumber{first_page + pages - 1});  // a block of its pages
    return id;
  }
  // A chunk `obtain` returned goes back to the free index (the test maps nothing).
  void give_back(ChunkId id) { store_.add_free(id); }

  static constexpr PageGeometry kGeometry = PageGeometry::from_shift(21);  // 2 MiB pages
  ManualClock clock_;
  SimBackend sim_;
  Stats stats_;
  ChunkStore store_;
  Stitcher stitcher_;
  ChunkUse use_;
  StreamFence fence_;
  ArenaSet arenas_;
  std::unique_ptr<ChunkSource> source_;
};

TEST_F(ChunkSourceTest, ItsChunkAndGrowthLimitsAreChunkSizesOverItsReservedBytes) {
  // The tables are chunk_sizes_test's; here, that the source passes its own device's reserved bytes.
  const Config config = parse_config("growth_chunk_share:4");
  const ChunkSource source(config, kGeometry,
                           ChunkSource::Parts{sim_, store_, use_, fence_, arenas_, stitcher_, stats_, clock_});
  const ChunkSizes sizes(config, kGeometry);
  EXPECT_EQ(source.chunk_limit(Pages{8193}), sizes.chunk_limit(Pages{8193}));
  EXPECT_EQ(source.growth_limit(), Pages{1}) << "nothing reserved";
  const ChunkId reserved = store_.create(Pages{20});  // 40 MiB / 4 = 10 MiB: 5 pages
  EXPECT_EQ(source.growth_limit(), Pages{5});
  EXPECT_EQ(source.growth_limit(true), sizes.growth_limit(20 * kPageBytes, true));
  store_.release(reserved);
}

TEST_F(ChunkSourceTest, WhereThePoolGrowsANewChunkCoversMoreOfTheRun) {
  // Reserved 16 pages, all used: a run with nothing idle or free to move is growth. growth_chunk_share 1: the
  // growth limit is growth_chunk_bytes, 8 pages. (headroom_permille 1 with no allocation noted: no headroom.)
  make_source("growth_chunk_share:1,headroom_permille:1");
  used_chunk(0, 16);
  ASSERT_EQ(source_->growth_limit(), Pages{8});
  // The block's share is 1 page (pages), the run 12 pages: one chunk of 8 pages, not one of 1.
  const ChunkId a = source_->obtain(Pages{1}, kPageBytes, ChunkSource::OverBudget::kOwnDevice, Pages{12});
  EXPECT_EQ(store_[a].pages, Pages{8});
  // A run shorter than the limit gets a chunk of the run's size, never more.
  const ChunkId b = source_->obtain(Pages{1}, kPageBytes, ChunkSource::OverBudget::kOwnDevice, Pages{3});
  EXPECT_EQ(store_[b].pages, Pages{3});
  // Without run_pages (0: the run is `pages`), the chunk is `pages`, as before.
  const ChunkId c = source_->obtain(Pages{2}, 2 * kPageBytes);
  EXPECT_EQ(store_[c].pages, Pages{2});
  // A peer source's run (OverBudget::kPeer) keeps the block's share.
  const ChunkId d = source_->obtain(Pages{1}, kPageBytes, ChunkSource::OverBudget::kPeer, Pages{12});
  EXPECT_EQ(store_[d].pages, Pages{1});
  EXPECT_EQ(stats_.evictions, 0u);
  EXPECT_EQ(stats_.chunks_released, 0u);
  for (const ChunkId id : {a, b, c, d}) give_back(id);
}

TEST_F(ChunkSourceTest, WithoutStreamEventsTheAssumptionPicksTheGrowthShare) {
  // 100 pages used: growth. Busy (the default assumption): 1/768 of 200 MiB is under a page. Waiting, at a waiting
  // share of 32 (the default is the busy share): 3 pages.
  for (const bool waits : {false, true}) {
    make_source(std::string("headroom_permille:1,waiting_growth_chunk_share:32,assume_device_waits:") +
                (waits ? "1" : "0"));
    const ChunkId used = used_chunk(0, 100);
    const std::uint64_t before = stats_.waiting_growths;
    source_->begin(0);
    const ChunkId a = source_->obtain(Pages{1}, kPageBytes, ChunkSource::OverBudget::kOwnDevice, Pages{12});
    EXPECT_EQ(store_[a].pages, waits ? Pages{3} : Pages{1});
    EXPECT_EQ(stats_.waiting_growths - before, waits ? 1u : 0u);
    give_back(a);
    source_->release_all_free();
    stitcher_.unmap(arenas_[store_[used].arena], used);
    store_.release(used);
  }
}

TEST_F(ChunkSourceTest, WithStreamEventsTheStreamIsAskedOnlyWhereGrowthIsMadeUntilItWaits) {
  test::ManualEvents events;
  StreamFence fence(&events);
  ChunkSource source(parse_config("max_chunk_bytes:256M,headroom_permille:1,waiting_growth_chunk_share:32"), kGeometry,
                     ChunkSource::Parts{sim_, store_, use_, fence, arenas_, stitcher_, stats_, clock_});
  used_chunk(0, 100);
  const StreamId stream = 7;
  // Stream 7 has queued work: the busy share (a page), asked once per growth chunk while it stays busy.
  events.busy_streams.insert(stream);
  source.begin(stream);
  const ChunkId a = source.obtain(Pages{1}, kPageBytes, ChunkSource::OverBudget::kOwnDevice, Pages{12});
  const ChunkId b = source.obtain(Pages{1}, kPageBytes, ChunkSource::OverBudget::kOwnDevice, Pages{11});
  EXPECT_EQ(store_[a].pages, Pages{1});
  EXPECT_EQ(store_[b].pages, Pages{1});
  EXPECT_EQ(events.idle_queries, 2);
  // It drained (the device waits): 1/32 of the 204 MiB reserved = 3 pages; a drained stream stays drained for the
  // rest of the allocation, so it is asked no more.
  events.busy_streams.clear();
  const ChunkId c = source.obtain(Pages{1}, kPageBytes, ChunkSource::OverBudget::kOwnDevice, Pages{10});
  const ChunkId d = source.obtain(Pages{1}, kPageBytes, ChunkSource::OverBudget::kOwnDevice, Pages{10});
  EXPECT_EQ(store_[c].pages, Pages{3});
  EXPECT_EQ(store_[d].pages, Pages{3});
  EXPECT_EQ(events.idle_queries, 3);
  EXPECT_EQ(stats_.waiting_growths, 2u);
  // A new allocation asks again; the stream is busy once more.
  events.busy_streams.insert(stream);
  source.begin(stream);
  const ChunkId e = source.obtain(Pages{1}, kPageBytes, ChunkSource::OverBudget::kOwnDevice, Pages{12});
  EXPECT_EQ(store_[e].pages, Pages{1});
  EXPECT_EQ(events.idle_queries, 4);
  // A run served by a free chunk is not growth: the stream is not asked.
  give_back(e);
  source.begin(stream);
  EXPECT_EQ(source.obtain(Pages{1}, kPageBytes, ChunkSource::OverBudget::kOwnDevice, Pages{1}), e);
  EXPECT_EQ(events.idle_queries, 4);
  for (const ChunkId id : {a, b, c, d, e}) give_back(id);
}

TEST_F(ChunkSourceTest, WhileTheDeviceWaitsANewChunkIsMadeWithinTheWaitingHeadroomRatherThanAnIdleOneMoved) {
  // 100 pages used, 1 idle, the highest allocated 100 pages: a page more is past headroom_permille (7: 100.7
  // pages) but within waiting_headroom_permille 50 (105 pages; off by default).
  test::ManualEvents events;
  StreamFence fence(&events);
  ChunkSource source(parse_config("max_chunk_bytes:256M,waiting_headroom_permille:50"), kGeometry,
                     ChunkSource::Parts{sim_, store_, use_, fence, arenas_, stitcher_, stats_, clock_});
  used_chunk(0, 100);
  auto safe_idle_chunk = [&](std::uint64_t first_page) {
    const ChunkId id = idle_chunk(first_page, 1);
    fence.note_idle(0, use_.idle_since(id));  // a mark after its last use, finished: it may move at once
    events.finish_all();
    return id;
  };
  const ChunkId idle = safe_idle_chunk(100);
  source.note_allocated(100 * kPageBytes);
  const StreamId stream = 3;
  // Waiting: a new chunk (102 of 105 pages), the idle one stays where it is.
  source.begin(stream);
  const ChunkId made = source.obtain(Pages{1}, kPageBytes);
  EXPECT_NE(made, idle);
  EXPECT_EQ(stats_.chunks_created, 3u);
  EXPECT_EQ(stats_.evictions, 0u);
  EXPECT_TRUE(store_[idle].mapped());
  EXPECT_EQ(events.idle_queries, 1);
  // Busy (queued work hides the move): the idle chunk moves, its memory backs the run, nothing is made.
  events.busy_streams.insert(stream);
  source.begin(stream);
  EXPECT_EQ(source.obtain(Pages{1}, kPageBytes), idle);
  EXPECT_EQ(stats_.evictions, 1u);
  EXPECT_EQ(stats_.chunks_created, 3u);
  // Asked where the headroom would move, and once more by the move budget (move_share_permille) after the move:
  // whether the move was on the critical path. Not again for the free chunk.
  EXPECT_EQ(events.idle_queries, 3);
  // The default (waiting_headroom_permille 0: off): the stream is not asked where no move is made (the idle chunk
  // here has no finished mark: lag growth makes a new one).
  idle_chunk(101, 1);
  events.busy_streams.clear();
  ChunkSource off(parse_config("max_chunk_bytes:256M"), kGeometry,
                  ChunkSource::Parts{sim_, store_, use_, fence, arenas_, stitcher_, stats_, clock_});
  off.note_allocated(100 * kPageBytes);
  off.begin(stream);
  const ChunkId got = off.obtain(Pages{1}, kPageBytes);
  EXPECT_EQ(stats_.evictions, 1u);
  EXPECT_EQ(events.idle_queries, 3);
  for (const ChunkId id : {made, idle, got}) give_back(id);
}

TEST_F(ChunkSourceTest, WithIdleMemoryOrUnderACapNewChunksKeepTheBlocksShare) {
  // Within the headroom a new chunk is made although a chunk is idle: not growth (memory to move is left).
  make_source("growth_chunk_share:1,headroom_permille:1000");
  used_chunk(0, 16);
  idle_chunk(16, 1);
  source_->note_allocated(17 * kPageBytes);  // reserved 17 pages: at the allocated high, not below it
  const ChunkId a = source_->obtain(Pages{1}, kPageBytes, ChunkSource::OverBudget::kOwnDevice, Pages{12});
  EXPECT_EQ(store_[a].pages, Pages{1});
  EXPECT_EQ(stats_.evictions, 0u);
  give_back(a);
  // Under a cap (memory first): page-sized chunks, whatever the run.
  source_->set_cap_bytes(64 * kPageBytes);
  const ChunkId b = source_->obtain(Pages{1}, kPageBytes, ChunkSource::OverBudget::kOwnDevice, Pages{12});
  EXPECT_EQ(store_[b].pages, Pages{1});
  give_back(b);
}

TEST_F(ChunkSourceTest, BelowTheAllocatedHighANewChunkIsGrowthSizedByThatHigh) {
  // The job has allocated 64 pages before (the pool emptied since: empty_cache, a model rebuilt); 2 pages are
  // reserved now, one idle. Re-forming below that high, a new chunk covers the run up to the growth limit of the
  // high (64 pages / growth_chunk_share 16 = 4 pages), not the block's share of one page, though a chunk is idle.
  make_source("growth_chunk_share:16,headroom_permille:10");
  used_chunk(0, 1);
  idle_chunk(1, 1);
  source_->note_allocated(64 * kPageBytes);
  EXPECT_EQ(source_->growth_limit(), Pages{4}) << "the limit follows the high, not the 2 pages reserved";
  const ChunkId a = source_->obtain(Pages{1}, kPageBytes, ChunkSource::OverBudget::kOwnDevice, Pages{12});
  EXPECT_EQ(store_[a].pages, Pages{4});
  EXPECT_EQ(stats_.evictions, 0u) << "within the headroom: made, not moved";
  // A run shorter than the limit gets the run, no more (what is made is covered now: nothing strands).
  const ChunkId b = source_->obtain(Pages{1}, kPageBytes, ChunkSource::OverBudget::kOwnDevice, Pages{3});
  EXPECT_EQ(store_[b].pages, Pages{3});
  give_back(a);
  give_back(b);
}

TEST_F(ChunkSourceTest, AFreeChunkThatFitsInTheRunIsMappedWholeUpToTheGrowthSize) {
  make_source("growth_chunk_share:1,headroom_permille:1");
  used_chunk(0, 16);
  const ChunkId six = store_.create(Pages{6});
  give_back(six);
  // The block's share is a page, but the free chunk fits in the run (8 pages): taken, nothing released or made.
  EXPECT_EQ(source_->obtain(Pages{1}, kPageBytes, ChunkSource::OverBudget::kOwnDevice, Pages{8}), six);
  EXPECT_EQ(stats_.chunks_released, 0u);
  EXPECT_EQ(stats_.chunks_created, 2u);
  give_back(six);
  // It does not fit in a run of 4 pages: released (nothing idle), and the run grows by a chunk of its size.
  const ChunkId four = source_->obtain(Pages{1}, kPageBytes, ChunkSource::OverBudget::kOwnDevice, Pages{4});
  EXPECT_EQ(store_[four].pages, Pages{4});
  EXPECT_EQ(stats_.chunks_released, 1u);
  give_back(four);
  // A free chunk larger than the growth size (8 pages) is not taken whole, even where the run would hold it.
  const ChunkId ten = store_.create(Pages{10});
  give_back(ten);
  const ChunkId got = source_->obtain(Pages{1}, kPageBytes, ChunkSource::OverBudget::kOwnDevice, Pages{12});
  EXPECT_NE(got, ten);
  EXPECT_LE(store_[got].pages, Pages{8});
  give_back(got);
}

TEST_F(ChunkSourceTest, AFreeChunkOfAtLeastHalfTheRunIsTakenBeforeAnythingElse) {
  make_source("headroom_permille:0");
  const ChunkId small = store_.create(Pages{2});
  const ChunkId fits = store_.create(Pages{3});
  give_back(small);
  give_back(fits);
  EXPECT_EQ(source_->obtain(Pages{4}, 4 * kPageBytes), fits) << "the largest free chunk of at most 4 pages, >= 2";
  EXPECT_EQ(stats_.chunks_created, 2u);
  // A free chunk under half the run is not worth a map of its own: with nothing idle, it is released and one
  // chunk of the run's size is made from its memory.
  const ChunkId made = source_->obtain(Pages{8}, 8 * kPageBytes);
  EXPECT_EQ(store_[made].pages, Pages{8});
  EXPECT_EQ(stats_.chunks_released, 1u);
  EXPECT_EQ(store_.free_chunks(), 0u);
  give_back(made);
  give_back(fits);
}

TEST_F(ChunkSourceTest, WithinHeadroomANewChunkIsMadeRatherThanAnIdleOneMoved) {
  make_source("headroom_permille:500");
  const ChunkId idle = idle_chunk(0, 4);
  source_->note_allocated(16 * kPageBytes);  // headroom: up to 24 pages reserved
  EXPECT_TRUE(source_->within_headroom(Pages{4}));
  const ChunkId id = source_->obtain(Pages{4}, 4 * kPageBytes);
  EXPECT_NE(id, idle);
  EXPECT_EQ(stats_.evictions, 0u);
  EXPECT_TRUE(store_[idle].mapped());
  give_back(id);
}

TEST_F(ChunkSourceTest, PastTheHeadroomTheOldestIdleChunkIsMovedWhileTheMoveBudgetAllows) {
  make_source("headroom_permille:0,move_share_permille:0");  // unbounded moves
  const ChunkId older = idle_chunk(0, 4);
  const ChunkId newer = idle_chunk(8, 4);
  const ChunkId id = source_->obtain(Pages{4}, 4 * kPageBytes);
  EXPECT_EQ(id, older) << "evicted, then taken from the free chunks: no new memory";
  EXPECT_EQ(stats_.evictions, 1u);
  EXPECT_EQ(stats_.chunks_created, 2u);
  EXPECT_TRUE(store_[newer].mapped());
  EXPECT_EQ(use_.idle_chunks(), 1u);
  // Its mapping at page 0 stays, a standby one (standby_mappings, 4 by default): no unmap.
  EXPECT_FALSE(store_[older].mapped());
  ASSERT_EQ(store_[older].standby.size(), 1u);
  EXPECT_EQ(store_[older].standby[0].first_page, PageNumber{0});
  EXPECT_EQ(sim_.counters()[BackendCall::kUnmap], 0u);
  EXPECT_EQ(sim_.live_mappings(), 2u);
  give_back(id);
}

TEST_F(ChunkSourceTest, WithoutStandbyMappingsAnEvictedChunkIsUnmapped) {
  make_source("headroom_permille:0,move_share_permille:0,standby_mappings:0");
  const ChunkId older = idle_chunk(0, 4);
  idle_chunk(8, 4);
  const ChunkId id = source_->obtain(Pages{4}, 4 * kPageBytes);
  EXPECT_EQ(id, older);
  EXPECT_TRUE(store_[older].standby.empty());
  EXPECT_EQ(sim_.counters()[BackendCall::kUnmap], 1u);
  EXPECT_EQ(sim_.live_mappings(), 1u);
  give_back(id);
}

TEST_F(ChunkSourceTest, ReleasingAFreeChunkUnmapsItsStandbyMappingsFirst) {
  make_source("headroom_permille:0,move_share_permille:0");
  idle_chunk(0, 4);
  source_->evict(use_.oldest_idle(), ChunkSource::EvictTo::kStandby);
  EXPECT_EQ(sim_.live_mappings(), 1u) << "standby at page 0";
  source_->release_all_free();
  EXPECT_EQ(sim_.live_mappings(), 0u);
  EXPECT_EQ(sim_.live_chunks(), 0u);
  EXPECT_EQ(store_.live_chunks(), 0u);
}

TEST_F(ChunkSourceTest, OutOfMoveCreditAndWithNoCapTheSourceGrowsInstead) {
  // 1 ns of credit per allocation: one eviction (43 us) puts the credit deep below zero.
  make_source("headroom_permille:0,move_budget_ns_per_op:1");
  idle_chunk(0, 4);
  idle_chunk(8, 4);
  source_->note_allocated(100 * kPageBytes);  // growth for time within move_headroom_permille (2% of it): 2 pages
  source_->earn();
  const ChunkId moved = source_->obtain(Pages{4}, 4 * kPageBytes);
  EXPECT_EQ(stats_.evictions, 1u);
  source_->earn();
  const ChunkId grown = source_->obtain(Pages{4}, 4 * kPageBytes);
  EXPECT_EQ(stats_.evictions, 1u) << "no second move: a new chunk instead";
  EXPECT_EQ(stats_.chunks_created, 3u);
  // With a peer that may lend, the same refusal leaves the run to the peer.
  source_->set_cap_bytes(12 * kPageBytes);  // the own device cannot grow past what it holds
  EXPECT_EQ(source_->obtain(Pages{4}, 4 * kPageBytes, ChunkSource::OverBudget::kPeer), kNoChunk);
  give_back(moved);
  give_back(grown);
}

TEST_F(ChunkSourceTest, UnderACapChunksArePageSizedAndPastItTheErrorChangesNothing) {
  make_source("cap_bytes:" + std::to_string(6 * kPageBytes) + ",headroom_permille:0");
  EXPECT_TRUE(source_->near_cap(Pages{1}));
  const ChunkId a = source_->obtain(Pages{4}, 4 * kPageBytes);
  EXPECT_EQ(store_[a].pages, Pages{1}) << "memory first: page-sized chunks";
  std::vector<ChunkId> held{a};
  for (int i = 0; i < 5; ++i) held.push_back(source_->obtain(Pages{1}, kPageBytes));
  EXPECT_EQ(source_->reserved_now(), 6 * kPageBytes);
  EXPECT_FALSE(source_->cap_allows(Pages{1}));
  EXPECT_THROW(source_->obtain(Pages{1}, kPageBytes), OutOfMemoryError);
  EXPECT_EQ(source_->reserved_now(), 6 * kPageBytes);
  EXPECT_EQ(store_.live_chunks(), 6u);
  for (const ChunkId id : held) give_back(id);
}

TEST_F(ChunkSourceTest, ALowerCapEvictsAndReleasesIdleMemoryDownToIt) {
  make_source("headroom_permille:0");
  idle_chunk(0, 4);
  idle_chunk(8, 4);
  idle_chunk(16, 4);
  EXPECT_EQ(source_->reserved_now(), 12 * kPageBytes);
  source_->set_cap_bytes(5 * kPageBytes);
  EXPECT_LE(source_->reserved_now(), 5 * kPageBytes);
  EXPECT_EQ(use_.idle_chunks(), 1u);
  EXPECT_EQ(stats_.evictions, 2u);
  EXPECT_EQ(source_->cap_bytes(), 5 * kPageBytes);
}

TEST_F(ChunkSourceTest, AnIdleChunkABlockWouldStrandIsRecutAboveMaxStrandBytes) {
  make_source("headroom_permille:0,max_strand_bytes:4M");  // 2 pages may strand, 3 may not
  Arena& arena = arenas_.get(false, 0);
  const ChunkId big = idle_chunk(0, 8);
  // A block on pages 0..5 would leave 2 pages of the chunk uncovered: within the bound, nothing moves.
  EXPECT_EQ(source_->recut(arena, PageNumber{0}, PageNumber{5}, Pages{2}), 0u);
  EXPECT_TRUE(store_[big].mapped());
  // On pages 0..4 it would leave 3: the chunk is unmapped and released, its pages unmapped again.
  EXPECT_EQ(source_->recut(arena, PageNumber{0}, PageNumber{4}, Pages{3}), 1u);
  EXPECT_EQ(stats_.evictions, 1u);
  EXPECT_EQ(stats_.chunks_released, 1u);
  EXPECT_EQ(store_.live_chunks(), 0u);
  EXPECT_EQ(source_->reserved_now(), 0u);
  bool mapped = false;
  arena.pages.for_each(PageNumber{0}, PageNumber{7}, [&](PageNumber, const PageMap::Entry&) { mapped = true; });
  EXPECT_FALSE(mapped);
  // A chunk a block covers whole, or one that is used, is never re-cut.
  const ChunkId whole = idle_chunk(16, 2);
  EXPECT_EQ(source_->recut(arena, PageNumber{16}, PageNumber{17}, Pages{3}), 0u);
  EXPECT_TRUE(store_[whole].mapped());
}

TEST_F(ChunkSourceTest, ARecutIsAMoveTheMoveBudgetMayRefuse) {
  make_source("headroom_permille:0,max_strand_bytes:0,move_budget_ns_per_op:1");
  Arena& arena = arenas_.get(false, 0);
  idle_chunk(0, 8);
  idle_chunk(8, 8);
  source_->earn();
  EXPECT_EQ(source_->recut(arena, PageNumber{0}, PageNumber{1}, Pages{6}), 1u) << "credit is not negative yet";
  source_->earn();
  EXPECT_EQ(source_->recut(arena, PageNumber{8}, PageNumber{9}, Pages{6}), 0u) << "the first re-cut spent the credit";
  EXPECT_EQ(use_.idle_chunks(), 1u);
}

TEST_F(ChunkSourceTest, NearTheDevicesEndChunksArePageSized) {
  // A device of 20 pages: past 90% of it (18 pages), memory comes first as under a cap.
  sim_.set_device_limit_bytes(20 * kPageBytes);
  make_source("headroom_permille:0");
  source_->begin(0);
  EXPECT_FALSE(source_->near_cap(Pages{8}));
  const ChunkId a = source_->obtain(Pages{8}, 8 * kPageBytes);
  EXPECT_EQ(store_[a].pages, Pages{8});
  source_->begin(0);
  const ChunkId b = source_->obtain(Pages{8}, 8 * kPageBytes);
  EXPECT_EQ(store_[b].pages, Pages{8}) << "16 pages of 20: not yet past 90%";
  source_->begin(0);
  EXPECT_TRUE(source_->near_cap(Pages{4}));
  const ChunkId c = source_->obtain(Pages{4}, 4 * kPageBytes);
  EXPECT_EQ(store_[c].pages, Pages{1}) << "18 + 4 pages would pass 90% of the device: one page";
  give_back(a);
  give_back(b);
  give_back(c);
}

}  // namespace
}  // namespace gmlake::engine
