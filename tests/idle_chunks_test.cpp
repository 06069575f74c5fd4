// IdleChunks (src/policies/gmlake/idle_chunks.h) on its own: the queue of idle chunks, oldest first, over chunks
// of a ChunkStore on the sim backend whose fields the test sets by hand (moved here from chunk_store_test.cpp).
#include "policies/gmlake/idle_chunks.h"

#include <gtest/gtest.h>

#include <vector>

#include "expect_error.h"
#include "gmlake/sim_backend.h"

namespace gmlake::engine {
namespace {

constexpr std::uint64_t kPage = std::uint64_t{1} << 21;

class IdleChunksTest : public ::testing::Test {
 protected:
  IdleChunksTest() : store_(sim_, PageGeometry(kPage), stats_) {}
  ~IdleChunksTest() override {
    for (const ChunkId id : created_) store_.release(id);
  }

  // A chunk mapped somewhere and turned idle now (pushed with a new tick).
  ChunkId idle_chunk() {
    const ChunkId id = store_.create(Pages{1});
    store_[id].arena = 0;
    store_[id].users = 0;
    store_[id].idle_since = queue_.next_tick();
    queue_.push(id, store_[id].idle_since);
    created_.push_back(id);
    return id;
  }
  std::vector<ChunkId> current() const {
    std::vector<ChunkId> out;
    queue_.for_each_current(store_, [&](ChunkId id) { out.push_back(id); });
    return out;
  }

  SimBackend sim_;
  Stats stats_;
  ChunkStore store_;
  IdleChunks queue_;
  std::vector<ChunkId> created_;
};

TEST_F(IdleChunksTest, TheOldestStillIdleChunkComesFirstAndDeadEntriesAreSkipped) {
  const ChunkId a = idle_chunk(), b = idle_chunk(), c = idle_chunk();
  EXPECT_EQ(queue_.oldest(store_), a);
  store_[a].users = 1;  // used again: its entry is dead
  EXPECT_EQ(queue_.oldest(store_), b);
  store_[b].idle_since = queue_.next_tick();  // idle again later: its old entry is dead, the new one is last
  queue_.push(b, store_[b].idle_since);
  EXPECT_EQ(queue_.oldest(store_), c);
  EXPECT_EQ(current(), (std::vector<ChunkId>{c, b}));
  store_[c].arena = Chunk::kUnmapped;  // unmapped (evicted)
  store_[b].users = 2;
  EXPECT_EQ(queue_.oldest(store_), kNoChunk);
  EXPECT_TRUE(current().empty());
}

TEST_F(IdleChunksTest, CompactionKeepsTheOrderOfTheChunksStillIdle) {
  // Enough entries to compact, most of them dead, after the queue's head has moved past some.
  std::vector<ChunkId> ids;
  for (int i = 0; i < 5000; ++i) ids.push_back(idle_chunk());
  for (int i = 0; i < 5000; ++i) {
    if (i % 100 != 7) store_[ids[i]].users = 1;
  }
  EXPECT_EQ(queue_.oldest(store_), ids[7]);  // the head moved past the first seven, all dead
  store_[ids[7]].users = 1;
  std::vector<ChunkId> expect;
  for (int i = 107; i < 5000; i += 100) expect.push_back(ids[i]);
  EXPECT_EQ(queue_.queued(), 5000u - 7u);
  queue_.compact_if_dead(/*idle_chunks=*/expect.size(), store_);
  EXPECT_EQ(queue_.queued(), expect.size());  // only the live entries are left
  EXPECT_EQ(current(), expect);
  EXPECT_EQ(queue_.oldest(store_), ids[107]);
  // A push after compaction goes last.
  store_[ids[0]].users = 0;
  store_[ids[0]].idle_since = queue_.next_tick();
  queue_.push(ids[0], store_[ids[0]].idle_since);
  expect.push_back(ids[0]);
  EXPECT_EQ(current(), expect);
}

TEST_F(IdleChunksTest, CompactionWaitsForSixteenEntriesPerIdleChunk) {
  std::vector<ChunkId> ids;
  for (int i = 0; i < 4200; ++i) ids.push_back(idle_chunk());
  for (int i = 300; i < 4200; ++i) store_[ids[i]].users = 1;
  queue_.compact_if_dead(/*idle_chunks=*/300, store_);  // 4200 entries < 16 x 300: kept
  EXPECT_EQ(queue_.queued(), 4200u);
  queue_.check_invariants();
  for (int i = 200; i < 300; ++i) store_[ids[i]].users = 1;
  queue_.compact_if_dead(/*idle_chunks=*/200, store_);  // 4200 >= 16 x 200 and kMinCompact: the dead go
  EXPECT_EQ(queue_.queued(), 200u);
  queue_.check_invariants();
  EXPECT_EQ(current(), std::vector<ChunkId>(ids.begin(), ids.begin() + 200));
}

TEST_F(IdleChunksTest, EntriesWrittenIntoRoomAreQueuedInOrderAfterThoseBefore) {
  const ChunkId a = idle_chunk();
  // A walk's batch: room for three, two written.
  std::vector<ChunkId> ids;
  for (int i = 0; i < 2; ++i) {
    ids.push_back(store_.create(Pages{1}));
    created_.push_back(ids.back());
    store_[ids.back()].arena = 0;
  }
  const std::uint64_t tick = queue_.next_tick();
  IdleChunks::Entry* const room = queue_.room(3);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    store_[ids[i]].idle_since = tick;
    room[i] = {ids[i], tick};
  }
  queue_.pushed(ids.size());
  queue_.check_invariants();
  EXPECT_EQ(queue_.queued(), 3u);
  EXPECT_EQ(current(), (std::vector<ChunkId>{a, ids[0], ids[1]}));
  // Room past the capacity grows it, and what was queued stays.
  IdleChunks::Entry* const more = queue_.room(10000);
  more[0] = {a, queue_.next_tick()};
  store_[a].idle_since = more[0].tick;
  queue_.pushed(1);
  EXPECT_EQ(current(), (std::vector<ChunkId>{ids[0], ids[1], a}));
  EXPECT_EQ(queue_.oldest(store_), ids[0]);
  queue_.check_invariants();
}

TEST_F(IdleChunksTest, TicksThatGoBackOrWereNeverHandedOutFailTheCheck) {
  IdleChunks queue;  // its own: the fixture's is not needed
  queue.check_invariants();
  const std::uint64_t t1 = queue.next_tick();
  const std::uint64_t t2 = queue.next_tick();
  queue.push(0, t1);
  queue.push(1, t2);
  queue.push(2, t2);  // two chunks turning idle at one tick
  queue.check_invariants();
  queue.push(3, t1);
  test::expect_broken([&] { queue.check_invariants(); }, "the idle queue's ticks go back");
  IdleChunks ahead;
  ahead.push(0, ahead.next_tick() + 1);
  test::expect_broken([&] { ahead.check_invariants(); }, "the idle queue holds a tick not handed out yet");
}

}  // namespace
}  // namespace gmlake::engine
