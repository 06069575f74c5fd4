// StreamUses (record_stream) over every policy, with the sim backend and events that finish only when the test
// says so: a block used by another stream is not reused, by any stream, until that stream's work up to the free
// has finished; bad pointers, a failing event record and out-of-memory lose nothing. Invariants of the allocator
// and of StreamUses are checked after every step.
#include "adaptors/stream_uses.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "expect_error.h"
#include "gmlake/allocator.h"
#include "gmlake/error.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"
#include "manual_events.h"
#include "policy_test_support.h"

namespace gmlake {
namespace {

constexpr StreamId kA = 1;  // the stream the blocks are allocated on
constexpr StreamId kB = 2;
constexpr StreamId kC = 3;

class StreamUsesTest : public ::testing::TestWithParam<Policy> {
 protected:
  void SetUp() override { make(""); }
  void TearDown() override { check(); }

  void make(const std::string& conf, bool with_events = true) {
    uses_.reset();
    Config config = parse_config(conf);
    config.policy = GetParam();
    allocator_ = make_allocator(config, backend_);
    uses_ = std::make_unique<StreamUses>(*allocator_, with_events ? &events_ : nullptr);
  }
  void check() const {
    allocator_->check_invariants();
    uses_->check_invariants();
  }
  void* allocate(std::uint64_t size_bytes, StreamId stream) {
    void* p = uses_->allocate(size_bytes, stream);
    check();
    return p;
  }
  void deallocate(void* p) {
    uses_->deallocate(p);
    check();
  }
  void record(void* p, StreamId stream) {
    uses_->record_stream(p, stream);
    check();
  }
  bool pending(void* p) const {
    const auto block = allocator_->find_block(p);
    return block && block->pending_free;
  }
  bool live(void* p) const {
    const auto block = allocator_->find_block(p);
    return block && !block->pending_free;
  }

  SimBackend backend_;
  test::ManualEvents events_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<StreamUses> uses_;
};

std::string policy_name(const ::testing::TestParamInfo<Policy>& info) { return to_string(info.param); }
INSTANTIATE_TEST_SUITE_P(Policies, StreamUsesTest,
                         ::testing::Values(Policy::kGmlake, Policy::kCaching, Policy::kExpandable), policy_name);

TEST_P(StreamUsesTest, ABlockUsedByAnotherStreamIsReusedOnlyOnceThatStreamsWorkUpToTheFreeHasFinished) {
  void* p = allocate(4 * kMiB, kA);
  record(p, kB);
  deallocate(p);
  EXPECT_TRUE(pending(p));
  EXPECT_EQ(uses_->pending_frees(), 1u);
  EXPECT_EQ(events_.recorded_streams, std::set<StreamId>{kB});

  void* on_own_stream = allocate(4 * kMiB, kA);
  void* on_other_stream = allocate(4 * kMiB, kC);
  EXPECT_NE(on_own_stream, p);
  EXPECT_NE(on_other_stream, p);
  EXPECT_TRUE(pending(p)) << "polled, not finished";

  events_.finish(kB);
  EXPECT_EQ(allocate(4 * kMiB, kA), p) << "the best fit, once free";
  EXPECT_EQ(uses_->pending_frees(), 0u);
  EXPECT_EQ(events_.outstanding(), 0);
  EXPECT_EQ(events_.waits, 0);
  EXPECT_EQ(uses_->stats().deferred_frees, 1u);
  // Every record and query counts, whether StreamUses or the wrapped allocator's fence made it.
  EXPECT_EQ(uses_->stats().stream_event_calls, events_.driver_calls());
  EXPECT_GE(events_.queries, 2) << "polled while pending";
}

TEST_P(StreamUsesTest, AFreeWaitsForEveryRecordedStream) {
  void* p = allocate(4 * kMiB, kA);
  record(p, kB);
  record(p, kC);
  deallocate(p);
  EXPECT_EQ(events_.recorded_streams, (std::set<StreamId>{kB, kC}));
  events_.finish(kB);
  EXPECT_NE(allocate(kMiB, kA), nullptr);
  EXPECT_TRUE(pending(p)) << "stream C has not finished";
  EXPECT_EQ(events_.outstanding(), 1) << "B's event is released once seen finished";
  events_.finish(kC);
  EXPECT_NE(allocate(kMiB, kA), nullptr);
  EXPECT_FALSE(allocator_->find_block(p).has_value());
  EXPECT_EQ(events_.outstanding(), 0);
}

TEST_P(StreamUsesTest, AStreamRecordedTwiceIsRecordedOnceAndTheBlocksOwnStreamNotAtAll) {
  void* p = allocate(4 * kMiB, kA);
  record(p, kB);
  record(p, kB);
  record(p, kA);
  deallocate(p);
  EXPECT_EQ(events_.stream_of.size(), 1u);
  EXPECT_EQ(events_.recorded_streams, std::set<StreamId>{kB});

  void* q = allocate(4 * kMiB, kA);
  record(q, kA);
  deallocate(q);
  EXPECT_FALSE(allocator_->find_block(q).has_value()) << "only its own stream: freed at once";
  EXPECT_EQ(uses_->stats().deferred_frees, 1u);
}

TEST_P(StreamUsesTest, ABlockWithoutRecordedStreamsIsFreedAtOnceWhileOthersWait) {
  void* p = allocate(4 * kMiB, kA);
  void* q = allocate(4 * kMiB, kA);
  record(p, kB);
  deallocate(q);
  EXPECT_FALSE(allocator_->find_block(q).has_value());
  EXPECT_TRUE(live(p));
  EXPECT_TRUE(events_.stream_of.empty());
  deallocate(p);
  EXPECT_TRUE(pending(p));
}

TEST_P(StreamUsesTest, UnknownInteriorAndFreedPointersAreRejectedAndChangeNothing) {
  void* p = allocate(4 * kMiB, kA);
  record(p, kB);
  int on_stack = 0;
  for (void* bad : {static_cast<void*>(&on_stack), testing::offset(p, kRoundBytes)}) {
    const testing::Snapshot before = testing::Snapshot::of(*allocator_);
    test::expect_error([&] { uses_->record_stream(bad, kB); }, ErrorCode::kInvalidPointer, "record_stream");
    testing::expect_unchanged(before, *allocator_);
    check();
  }
  uses_->record_stream(nullptr, kB);  // nothing

  deallocate(p);
  test::expect_error([&] { uses_->record_stream(p, kC); }, ErrorCode::kInvalidPointer, "not a live block");
  test::expect_error([&] { uses_->deallocate(p); }, ErrorCode::kInvalidPointer, "");  // double free
  check();
  EXPECT_TRUE(pending(p)) << "the pending free is not lost";
  EXPECT_EQ(uses_->pending_frees(), 1u);
  EXPECT_EQ(events_.stream_of.size(), 1u);

  events_.finish_all();
  EXPECT_NE(allocate(kMiB, kA), nullptr);
  EXPECT_FALSE(allocator_->find_block(p).has_value());
  test::expect_error([&] { uses_->deallocate(p); }, ErrorCode::kInvalidPointer, "");
  check();
}

TEST_P(StreamUsesTest, OutOfMemoryWithPendingFreesWaitsForThemAndRetries) {
  make("cap_bytes:20M");
  void* p = allocate(12 * kMiB, kA);
  record(p, kB);
  deallocate(p);
  void* q = allocate(12 * kMiB, kA);
  EXPECT_NE(q, nullptr);
  EXPECT_EQ(events_.waits, 1);
  EXPECT_EQ(uses_->pending_frees(), 0u);
  EXPECT_EQ(events_.outstanding(), 0);

  EXPECT_THROW(uses_->allocate(12 * kMiB, kA), OutOfMemoryError) << "nothing pending: no retry";
  EXPECT_EQ(events_.waits, 1);
  check();
}

TEST_P(StreamUsesTest, EmptyCacheCompletesPendingFreesAndReleasesTheirMemory) {
  void* p = allocate(12 * kMiB, kA);
  record(p, kB);
  deallocate(p);
  uses_->empty_cache();
  check();
  EXPECT_EQ(events_.waits, 1);
  EXPECT_EQ(uses_->pending_frees(), 0u);
  EXPECT_EQ(allocator_->stats().reserved_bytes.current, 0);
}

TEST_P(StreamUsesTest, AFailedEventRecordLeavesTheBlockAllocatedWithItsStreamsAndLosesNothing) {
  void* p = allocate(4 * kMiB, kA);
  record(p, kB);
  record(p, kC);
  events_.failing_streams = {kC};  // B's event is recorded first, then C's fails
  const testing::Snapshot before = testing::Snapshot::of(*allocator_);
  test::expect_error([&] { uses_->deallocate(p); }, ErrorCode::kBackend, "cuEventRecord");
  check();
  testing::expect_unchanged(before, *allocator_);
  EXPECT_TRUE(live(p));
  EXPECT_EQ(uses_->pending_frees(), 0u);
  EXPECT_EQ(events_.outstanding(), 0) << "B's event is released";

  events_.failing_streams.clear();
  deallocate(p);  // the caller frees it again: both streams still count
  EXPECT_TRUE(pending(p));
  events_.finish(kB);
  EXPECT_NE(allocate(kMiB, kA), nullptr);
  EXPECT_TRUE(pending(p));
  events_.finish(kC);
  EXPECT_NE(allocate(kMiB, kA), nullptr);
  EXPECT_FALSE(allocator_->find_block(p).has_value());
}

TEST_P(StreamUsesTest, DestructionReleasesThePendingFreesEvents) {
  void* p = allocate(4 * kMiB, kA);
  record(p, kB);
  record(p, kC);
  deallocate(p);
  uses_ = std::make_unique<StreamUses>(*allocator_, &events_);
  EXPECT_EQ(events_.outstanding(), 0);
  EXPECT_TRUE(pending(p)) << "given back with the allocator";
}

TEST_P(StreamUsesTest, WithoutEventsRecordStreamOnlyChecksThePointerAndFreesAreImmediate) {
  make("", /*with_events=*/false);
  void* p = allocate(4 * kMiB, kA);
  record(p, kB);
  deallocate(p);
  EXPECT_FALSE(allocator_->find_block(p).has_value());
  EXPECT_EQ(uses_->pending_frees(), 0u);
  EXPECT_EQ(uses_->stats().deferred_frees, 0u);
  test::expect_error([&] { uses_->record_stream(p, kB); }, ErrorCode::kInvalidPointer, "record_stream");
}

}  // namespace
}  // namespace gmlake
