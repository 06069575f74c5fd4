// The engine borrowing through the lake (lake/lake_peers.*, the ChunkProvider the engine is given, as the Pool
// gives it; policies/gmlake/provided_chunks.*, stitching_allocator_lake.cpp): a gmlake pool in this process
// whose own memory is full takes chunks from a lender in a forked child (host backend, real bytes), answers
// recalls, and survives the lender's death and out of memory on both sides. The child is driven by commands
// (lake_test_support.h: serve_commands). Every step is followed by check_invariants().
#include "lake/lake_peers.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "expect_error.h"
#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/pool.h"
#include "gmlake/sim_backend.h"
#include "ipc_test_support.h"
#include "lake/lake_wire.h"
#include "lake_test_support.h"
#include "manual_events.h"
#include "policies/gmlake/stitching_allocator.h"

namespace gmlake::test {
namespace {

// Page-granular, no headroom: every byte is accounted for by the test.
const std::string kBase = "max_chunk_bytes:2M,grow_bytes:2M,headroom_permille:0";
constexpr std::uint64_t kOwnBytes = 8 * kMiB;

bool holds(const void* p, std::uint64_t size_bytes, unsigned char value) {
  const auto* bytes = static_cast<const unsigned char*>(p);
  for (std::uint64_t i = 0; i < size_bytes; ++i) {
    if (bytes[i] != value) return false;
  }
  return true;
}

class LakePeersTest : public ::testing::Test {
 protected:
  // A lender in a child with a host backend of `lender_bytes` (0: no limit), then this process's engine over
  // its own host backend of kOwnBytes, borrowing from the child.
  void start(std::uint64_t lender_bytes, const std::string& conf = "", StreamEvents* events = nullptr) {
    const LakeAddress address = address_;
    child_ = std::make_unique<ForkedChild>([=](int up, int down) {
      HostBackend backend(kPageBytes, lender_bytes);
      LakeLender lender(backend, address, 0);
      send_message(up, "ready");
      return serve_commands(lender, backend, up, down);
    });
    ASSERT_EQ(child_->receive(), "ready");
    engage(conf, events);
  }
  // This process's Pool over backend_ with the lake at address_ (and `conf`): the Pool connects the lake, gives it
  // to the engine and serves its recalls around every allocation and free.
  void engage(const std::string& conf, StreamEvents* events = nullptr) {
    const Config config = parse_config(kBase + ",lake_socket:" + address_ + (conf.empty() ? "" : "," + conf));
    alloc_ = std::make_unique<Pool>(config, backend_, events);
  }
  // The child's answer to `command`.
  std::string ask(const std::string& command) {
    EXPECT_TRUE(child_->send(command));
    return child_->receive();
  }
  std::uint64_t lent() { return std::stoull(ask("lent")); }
  std::uint64_t peer_bytes() const { return static_cast<std::uint64_t>(alloc_->stats().peer_reserved_bytes.current); }
  // Closes the pool (its loans go back) and returns the child's exit code.
  int finish() {
    alloc_.reset();
    EXPECT_EQ(backend_.live_chunks(), 0u) << "every chunk released here";
    return child_->wait();
  }

  LakeAddress address_ = lake_address(::testing::UnitTest::GetInstance()->current_test_info()->name());
  HostBackend backend_{kPageBytes, kOwnBytes};
  std::unique_ptr<ForkedChild> child_;
  std::unique_ptr<Pool> alloc_;
};

TEST_F(LakePeersTest, AFullPoolBorrowsFromTheLenderAndBothProcessesSeeTheBlocksBytes) {
  start(0);
  Pool& a = *alloc_;
  void* own = a.allocate(kOwnBytes, 0);
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 0u) << "the own device had room";
  EXPECT_EQ(lent(), 0u);
  void* q = a.allocate(4 * kMiB, 0);  // the own device is full: lent by the child
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 4 * kMiB);
  EXPECT_EQ(a.stats().reserved_bytes.current, static_cast<std::int64_t>(kOwnBytes + 4 * kMiB));
  EXPECT_EQ(backend_.live_chunk_bytes(0), kOwnBytes) << "loans are not the own device's memory";
  EXPECT_EQ(backend_.live_imported_bytes(), 4 * kMiB);
  EXPECT_EQ(lent(), 4 * kMiB);
  std::memset(q, 0x5A, 4 * kMiB);
  EXPECT_EQ(ask("count 90"), std::to_string(4 * kMiB)) << "the lender reads what the pool's block holds";
  EXPECT_EQ(ask("fill 165"), "filled");
  EXPECT_TRUE(holds(q, 4 * kMiB, 0xA5)) << "and the block shows what the lender wrote";
  a.deallocate(q);
  a.deallocate(own);
  a.check_invariants();
  a.empty_cache();
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 0u);
  EXPECT_EQ(lent(), 0u) << "every loan went back with RETURN";
  EXPECT_EQ(finish(), 0);
}

TEST_F(LakePeersTest, APoolThroughThePoolApiBorrowsPastItsCap) {
  const LakeAddress address = address_;
  ForkedChild child([=](int up, int down) {
    HostBackend backend(kPageBytes);
    LakeLender lender(backend, address, 0);
    send_message(up, "ready");
    return serve_commands(lender, backend, up, down);
  });
  ASSERT_EQ(child.receive(), "ready");
  {
    Pool pool(parse_config("backend:host,cap_bytes:4M,lake_socket:" + address));
    void* p = pool.allocate(4 * kMiB, 0);
    void* q = pool.allocate(2 * kMiB, 0);  // past the cap: lent
    pool.check_invariants();
    EXPECT_EQ(pool.stats().peer_reserved_bytes.current, static_cast<std::int64_t>(2 * kMiB));
    ASSERT_TRUE(child.send("lent"));
    EXPECT_EQ(child.receive(), std::to_string(2 * kMiB));
    std::memset(q, 7, 2 * kMiB);
    ASSERT_TRUE(child.send("count 7"));
    EXPECT_EQ(child.receive(), std::to_string(2 * kMiB));
    // A larger block past the cap is one loan: chunks_per_block bounds the own device's chunks (this block would
    // get 2 MiB ones there), not a loan, which costs a round trip and, on a peer GPU, a cuMemSetAccess over the link.
    void* r = pool.allocate(32 * kMiB, 0);
    EXPECT_EQ(pool.stats().peer_reserved_bytes.current, static_cast<std::int64_t>(34 * kMiB));
    ASSERT_TRUE(child.send("loans"));
    EXPECT_EQ(child.receive(), "2");
    pool.deallocate(r);
    pool.deallocate(p);
    pool.deallocate(q);
    pool.check_invariants();
  }
  EXPECT_EQ(child.wait(), 0) << "the pool gave every loan back as it closed";
}

TEST_F(LakePeersTest, ARecalledIdleChunkGoesBackAtTheNextCall) {
  start(0);
  Pool& a = *alloc_;
  void* own = a.allocate(kOwnBytes, 0);
  void* q = a.allocate(4 * kMiB, 0);
  a.deallocate(q);  // its lent chunk (one loan: loans are not bounded by max_chunk_bytes) stays mapped, idle
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 4 * kMiB);
  EXPECT_EQ(lent(), 4 * kMiB);
  EXPECT_EQ(ask("recall"), "1");
  void* r = a.allocate(2 * kMiB, 0);  // the call serves the recall first, then borrows anew
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 2 * kMiB) << "the recalled chunk went back; one new loan for r";
  EXPECT_EQ(lent(), 2 * kMiB);
  a.deallocate(r);
  a.deallocate(own);
  a.check_invariants();
  EXPECT_EQ(finish(), 0);
}

// With asynchronous streams (here ManualEvents, events that finish when the test says), a recalled loan its
// stream may still write goes back only once that work is known finished. The free that made it idle fell
// between the stream's marks, so no mark of its own follows it: the recall records one, and the loan goes back at
// the first call after the stream finished, though nothing more is freed on that stream.
TEST_F(LakePeersTest, ARecalledLoanUnderQueuedWorkGoesBackOnceThatWorkFinished) {
  ManualEvents events;
  start(0, "cross_stream_reuse:false", &events);
  Pool& a = *alloc_;
  constexpr StreamId kStream = 1;
  void* own = a.allocate(kOwnBytes, kStream);
  void* q = a.allocate(4 * kMiB, kStream);  // lent: one chunk
  a.deallocate(own);                         // the stream's first mark is recorded at this free
  a.deallocate(q);                           // within the mark spacing: the loan's idle tick has no mark
  a.check_invariants();
  EXPECT_EQ(events.recorded(), 1);
  EXPECT_EQ(ask("recall"), "1");
  void* r = a.allocate(2 * kMiB, kStream);  // serves the recall first; placed in own's pages, no backend call
  a.check_invariants();
  EXPECT_EQ(lent(), 4 * kMiB) << "the stream may still write the loan: kept";
  EXPECT_EQ(peer_bytes(), 4 * kMiB);
  events.finish(kStream);  // the device finished everything queued on the stream so far
  void* s = a.allocate(2 * kMiB, kStream);  // no free in between: the recall's own mark tells
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 0u) << "the recalled chunk went back";
  EXPECT_EQ(lent(), 0u);
  a.deallocate(s);
  a.deallocate(r);
  a.check_invariants();
  EXPECT_EQ(finish(), 0);
}

TEST_F(LakePeersTest, ARecalledChunkUnderALiveBlockTakesNoNewBlockAndGoesBackWhenTheBlockIsFreed) {
  start(0);
  Pool& a = *alloc_;
  void* own = a.allocate(kOwnBytes, 0);
  void* q = a.allocate(2 * kMiB + kMiB / 2, 0);  // two lent pages, one loan; the second page is mostly free
  const auto q_pages = reinterpret_cast<std::uintptr_t>(q) & ~(std::uintptr_t{kPageBytes} - 1);
  std::memset(q, 0x42, 2 * kMiB + kMiB / 2);
  a.check_invariants();
  EXPECT_EQ(lent(), 4 * kMiB);
  EXPECT_EQ(ask("recall"), "1");
  // 1.25 MiB would fit in the free part of q's second page at no cost; that page is recalled.
  void* r = a.allocate(kMiB + kMiB / 4, 0);
  a.check_invariants();
  const auto r_at = reinterpret_cast<std::uintptr_t>(r);
  EXPECT_TRUE(r_at + kMiB + kMiB / 4 <= q_pages || r_at >= q_pages + 4 * kMiB) << "r was placed on a recalled chunk";
  EXPECT_TRUE(holds(q, 2 * kMiB + kMiB / 2, 0x42)) << "the live block keeps its bytes";
  EXPECT_EQ(lent(), 6 * kMiB) << "the recalled chunk stays while q lives; r has a new loan";
  a.deallocate(q);  // q's chunk goes back with this free
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 2 * kMiB);
  EXPECT_EQ(lent(), 2 * kMiB);
  a.deallocate(r);
  a.deallocate(own);
  a.check_invariants();
  EXPECT_EQ(finish(), 0);
}

TEST_F(LakePeersTest, ARecallLeftPastItsDeadlineCutsThePoolOffButItsBlockStaysValid) {
  start(0);
  Pool& a = *alloc_;
  void* own = a.allocate(kOwnBytes, 0);
  void* q = a.allocate(2 * kMiB, 0);
  EXPECT_EQ(ask("recall"), "1");
  EXPECT_EQ(ask("expire"), "expired");  // q still lives: the lender cuts this pool off
  EXPECT_EQ(lent(), 0u) << "the loan is stranded at the lender, not lent";
  test::expect_error([&] { a.allocate(2 * kMiB, 0); }, ErrorCode::kOutOfMemory, "");
  a.check_invariants();
  std::memset(q, 0x17, 2 * kMiB);
  EXPECT_TRUE(holds(q, 2 * kMiB, 0x17)) << "the loan stays valid here";
  a.deallocate(q);
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 0u) << "released here once its block went";
  EXPECT_EQ(backend_.live_imported_bytes(), 0u);
  a.deallocate(own);
  EXPECT_EQ(finish(), 10) << "the lender keeps the chunk stranded while this process lives";
}

TEST_F(LakePeersTest, ALenderThatDiesLeavesThePoolUsableAndItsLoansValidUntilTheirBlocksGo) {
  start(0);
  Pool& a = *alloc_;
  void* own = a.allocate(kOwnBytes, 0);
  void* q = a.allocate(4 * kMiB, 0);
  std::memset(q, 0x33, 4 * kMiB);
  ::kill(child_->pid(), SIGKILL);
  EXPECT_EQ(child_->wait(), -1);
  test::expect_error([&] { a.allocate(2 * kMiB, 0); }, ErrorCode::kOutOfMemory, "no physical memory left");
  a.check_invariants();
  EXPECT_TRUE(holds(q, 4 * kMiB, 0x33)) << "the imported chunks keep the memory alive";
  std::memset(q, 0x44, 4 * kMiB);
  EXPECT_TRUE(holds(q, 4 * kMiB, 0x44));
  test::expect_error([&] { a.allocate(4 * kKiB, 0); }, ErrorCode::kOutOfMemory, "");  // small blocks alike
  a.deallocate(q);
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 0u);
  EXPECT_EQ(backend_.live_imported_bytes(), 0u) << "released here with the block (no lender to tell)";
  test::expect_error([&] { a.allocate(6 * kMiB, 0); }, ErrorCode::kOutOfMemory, "");
  a.deallocate(own);
  void* again = a.allocate(6 * kMiB, 0);  // own memory serves as before
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 0u);
  a.deallocate(again);
  alloc_.reset();
  EXPECT_EQ(backend_.live_chunks(), 0u);
}

// A lender that stops answering (alive, not polling) costs an allocation lake_answer_timeout_ms once, not a hang:
// the allocation goes on memory first on the own device (here it has none, so out of memory), the next ones do
// not wait, and the late loan goes back at a call after it came; then the pool borrows again.
TEST_F(LakePeersTest, ASilentLenderCostsOneTimeoutThenTheLateLoanGoesBackAndBorrowingResumes) {
  const LakeAddress address = address_;
  child_ = std::make_unique<ForkedChild>([=](int up, int down) {
    HostBackend backend(kPageBytes, 0);
    LakeLender lender(backend, address, 0);
    send_message(up, "ready");
    if (receive_message(down) != "serve") return 20;
    return serve_commands(lender, backend, up, down);
  });
  ASSERT_EQ(child_->receive(), "ready");
  engage("lake_answer_timeout_ms:100");
  Pool& a = *alloc_;
  void* own = a.allocate(kOwnBytes, 0);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  test::expect_error([&] { a.allocate(2 * kMiB, 0); }, ErrorCode::kOutOfMemory, "");
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count(), 5000) << "no hang";
  a.check_invariants();
  // Refused without a second request (one would be granted later and read as garbage: the lender gone, and the
  // allocation below would fail).
  test::expect_error([&] { a.allocate(2 * kMiB, 0); }, ErrorCode::kOutOfMemory, "");
  a.check_invariants();
  ASSERT_TRUE(child_->send("serve"));
  for (int i = 0; i < 200 && ask("lent") != "0"; ++i) {
    ::usleep(5000);
    EXPECT_EQ(a.allocate(0, 0), nullptr);  // a call that needs no memory: it reads the socket (the late loan)
  }
  EXPECT_EQ(lent(), 0u) << "the late loan went back";
  void* q = a.allocate(2 * kMiB, 0);  // the lender answers again: borrowed
  a.check_invariants();
  EXPECT_EQ(peer_bytes(), 2 * kMiB);
  a.deallocate(q);
  a.deallocate(own);
  a.check_invariants();
  EXPECT_EQ(finish(), 0);
}

TEST_F(LakePeersTest, OutOfMemoryOnBothSidesIsACleanErrorThatLeavesNothingBehind) {
  start(4 * kMiB);  // the lender can lend two pages
  Pool& a = *alloc_;
  void* own = a.allocate(kOwnBytes, 0);
  void* q = a.allocate(4 * kMiB, 0);
  a.check_invariants();
  const std::uint64_t ooms = a.stats().num_ooms;
  const std::uint64_t chunks = backend_.live_chunks();
  test::expect_error([&] { a.allocate(2 * kMiB, 0); }, ErrorCode::kOutOfMemory, "no physical memory left");
  test::expect_error([&] { a.allocate(6 * kMiB, 0); }, ErrorCode::kOutOfMemory, "");
  a.check_invariants();
  EXPECT_EQ(a.stats().num_ooms, ooms + 2);
  EXPECT_EQ(backend_.live_chunks(), chunks) << "no chunk left behind here";
  EXPECT_EQ(lent(), 4 * kMiB) << "nor at the lender";
  a.deallocate(q);
  void* r = a.allocate(4 * kMiB, 0);  // the idle lent pages serve it again
  a.check_invariants();
  EXPECT_EQ(lent(), 4 * kMiB);
  a.deallocate(r);
  a.deallocate(own);
  a.empty_cache();
  a.check_invariants();
  EXPECT_EQ(lent(), 0u);
  EXPECT_EQ(finish(), 0);
}

TEST_F(LakePeersTest, ThePeerBudgetBoundsWhatIsBorrowed) {
  start(0, "peer_budget_bytes:2M");
  Pool& a = *alloc_;
  void* own = a.allocate(kOwnBytes, 0);
  test::expect_error([&] { a.allocate(4 * kMiB, 0); }, ErrorCode::kOutOfMemory, "");
  a.check_invariants();
  EXPECT_EQ(lent(), 0u) << "a block the budget cannot hold keeps nothing borrowed";
  void* q = a.allocate(2 * kMiB, 0);
  EXPECT_EQ(peer_bytes(), 2 * kMiB);
  test::expect_error([&] { a.allocate(2 * kMiB, 0); }, ErrorCode::kOutOfMemory, "");
  a.check_invariants();
  EXPECT_EQ(lent(), 2 * kMiB);
  a.deallocate(q);
  a.deallocate(own);
  EXPECT_EQ(finish(), 0);
}

// A lender in a child that refuses each of `borrowers` connections as LakeLender refuses a uid it does not allow
// (REFUSE(not allowed), then the connection closed), then exits 0.
ForkedChild refusing_lender(const LakeAddress& address, int borrowers) {
  return ForkedChild([=](int up, int) {
    const int listener = lake::listen_at(address);
    send_message(up, "ready");
    for (int n = 0; n < borrowers; ++n) {
      const int s = ::accept(listener, nullptr, nullptr);
      lake::Message r;
      r.type = lake::MessageType::kRefuse;
      r.arg = static_cast<std::uint64_t>(lake::RefuseReason::kNotAllowed);
      if (s < 0 || !lake::send_message(s, r)) return 60;
      ::close(s);
    }
    return 0;
  });
}

// How many times `text` holds `part`.
int occurrences(const std::string& text, const std::string& part) {
  int n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

// Before: a pool whose lender refused its uid went on alone without a word (the refusal read as a lender gone).
TEST_F(LakePeersTest, ALenderThatRefusesThisProcessIsSaidOnceOnStderrCountedInTheStatsAndThePoolGoesOnAlone) {
  const LakeAddress address = lake_address("refusing");  // the test's name is too long for an address
  ForkedChild child = refusing_lender(address, 2);
  ASSERT_EQ(child.receive(), "ready");
  HostBackend second_backend(kPageBytes, kOwnBytes);
  ::testing::internal::CaptureStderr();
  {
    // Two pools of this process (two devices, say) borrowing from the one lender: one line between them.
    const Config config = parse_config(kBase + ",lake_socket:" + address);
    const std::unique_ptr<ChunkProvider> lake_a = make_lake_peers(config, backend_);
    const std::unique_ptr<ChunkProvider> lake_b = make_lake_peers(config, second_backend);
    engine::StitchingAllocator a(config, backend_, nullptr, nullptr, lake_a.get());
    engine::StitchingAllocator b(config, second_backend, nullptr, nullptr, lake_b.get());
    EXPECT_EQ(a.stats().lake_refusals, 0u) << "nothing asked yet";
    void* own = a.allocate(kOwnBytes, 0);
    for (int i = 0; i < 3; ++i) {  // refused: the own device is full, so out of memory; one line, not three
      test::expect_error([&] { a.allocate(2 * kMiB, 0); }, ErrorCode::kOutOfMemory, "");
      a.check_invariants();
    }
    EXPECT_EQ(a.stats().lake_refusals, 1u);
    EXPECT_EQ(a.stats().peer_reserved_bytes.peak, 0) << "nothing was lent";
    a.deallocate(own);
    void* q = a.allocate(2 * kMiB, 0);  // the own device serves it
    EXPECT_EQ(a.stats().peer_reserved_bytes.current, 0);
    a.deallocate(q);
    void* b_own = b.allocate(kOwnBytes, 0);
    test::expect_error([&] { b.allocate(2 * kMiB, 0); }, ErrorCode::kOutOfMemory, "");
    EXPECT_EQ(b.stats().lake_refusals, 1u) << "each pool counts its lender's refusal";
    b.deallocate(b_own);
    a.check_invariants();
    b.check_invariants();
  }
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(occurrences(said, "refused this process"), 1) << said;
  EXPECT_NE(said.find("'" + address + "'"), std::string::npos) << "the line names the lender: " << said;
  EXPECT_NE(said.find("own device only"), std::string::npos) << said;
  EXPECT_EQ(backend_.live_chunks() + second_backend.live_chunks(), 0u);
  EXPECT_EQ(child.wait(), 0);
}

// The same with a real lender and a real other uid: the lender (this process) allows only its own uid; the pool,
// in a child become kOtherUid, trusts the lender (lake_allowed_uids) but is refused by it.
TEST(LakePeersTrust, APoolWhoseUidTheLenderRefusesSaysSoOnceCountsItAndUsesItsOwnMemoryOnly) {
  const LakeAddress address = lake_address("refused-pool");
  HostBackend lender_backend(kPageBytes);
  std::vector<std::string> lender_lines;
  LakeLender lender(lender_backend, address, 0, {}, [&](const std::string& line) { lender_lines.push_back(line); });
  const std::uint32_t lender_uid = ::geteuid();
  ForkedChild child([&](int up, int) {
    if (!become_other_uid()) {
      send_message(up, "no-uid");
      return 0;
    }
    const int said = ::memfd_create("stderr", 0);  // this child's stderr, read back for the parent
    if (said < 0 || ::dup2(said, STDERR_FILENO) < 0) return 30;
    std::string report;
    {
      Pool pool(parse_config("backend:host,cap_bytes:4M,lake_allowed_uids:" + std::to_string(lender_uid) +
                             ",lake_socket:" + address));
      void* p = pool.allocate(4 * kMiB, 0);
      for (int i = 0; i < 3; ++i) {  // past the cap: the lender is asked, refuses; out of memory each time
        try {
          pool.allocate(2 * kMiB, 0);
          return 31;
        } catch (const OutOfMemoryError&) {
        }
      }
      pool.deallocate(p);
      void* q = pool.allocate(4 * kMiB, 0);  // within the cap, on the own device
      const Stats s = pool.stats();
      report = "refusals " + std::to_string(s.lake_refusals) + " peer_peak " +
               std::to_string(s.peer_reserved_bytes.peak) + "\n";
      pool.deallocate(q);
    }
    char text[4096] = {};
    if (::lseek(said, 0, SEEK_SET) != 0 || ::read(said, text, sizeof(text) - 1) < 0) return 32;
    send_message(up, report + text);
    return 0;
  });
  std::string said;
  for (;;) {  // serves until the child reports
    lender.poll(10, 0);
    pollfd p{child.from_child(), POLLIN, 0};
    if (::poll(&p, 1, 0) == 1) {
      said = child.receive();
      break;
    }
  }
  if (said == "no-uid") GTEST_SKIP() << kNoOtherUid;
  EXPECT_EQ(child.wait(), 0);
  EXPECT_EQ(said.rfind("refusals 1 peer_peak 0\n", 0), 0u) << said;
  EXPECT_EQ(occurrences(said, "refused this process"), 1) << "once, not per allocation: " << said;
  EXPECT_NE(said.find("uid " + std::to_string(kOtherUid)), std::string::npos) << said;
  EXPECT_EQ(lender.refused_borrowers(), 1u);
  EXPECT_EQ(lender.lent_bytes(), 0u);
  EXPECT_EQ(lender_backend.live_chunks(), 0u) << "nothing was created for it";
  ASSERT_EQ(lender_lines.size(), 1u);
  EXPECT_NE(lender_lines[0].find("refused borrower"), std::string::npos) << lender_lines[0];
}

TEST(LakePeersProvider, ALakeSocketGivesAProviderConnectedToTheLenderAndNoneGivesNone) {
  HostBackend host(kPageBytes);
  EXPECT_EQ(make_lake_peers(Config{}, host), nullptr) << "lake_socket:none";
  HostBackend lender_backend(kPageBytes);
  const LakeAddress address = lake_address("provider");
  LakeLender lender(lender_backend, address, 0);
  const std::unique_ptr<ChunkProvider> lake = make_lake_peers(parse_config("lake_socket:" + address), host);
  ASSERT_NE(dynamic_cast<LakePeers*>(lake.get()), nullptr);
  EXPECT_TRUE(lake->available());
  EXPECT_FALSE(lake->may_recall()) << "no loan out";
  EXPECT_EQ(lake->live_bytes(), 0u);
  EXPECT_EQ(lake->refusals(), 0u);
  lender.poll(0, 0);  // accepts it
  EXPECT_EQ(lender.borrowers(), 1u);
  test::expect_error([&] { lake->release(ChunkHandle{7}); }, ErrorCode::kInvalidArgument, "is no loan");
}

TEST(LakePeersConfig, ALakeSocketWithNoLenderOrOnABackendThatCannotImportIsAClearError) {
  HostBackend host(kPageBytes);
  test::expect_error([&] { make_lake_peers(parse_config("lake_socket:" + lake_address("nobody")), host); },
                     ErrorCode::kBackend, "no gmlake lender");
  test::expect_error([&] { Pool(parse_config("backend:host,lake_socket:" + lake_address("nobody"))); },
                     ErrorCode::kBackend, "no gmlake lender");
  test::expect_error([&] { Pool(parse_config("backend:sim,lake_socket:@x")); }, ErrorCode::kConfig,
                     "lake_socket: the sim backend cannot import");
  SimBackend sim;
  test::expect_error([&] { make_lake_peers(parse_config("lake_socket:@x"), sim); }, ErrorCode::kConfig,
                     "lake_socket: the sim backend cannot import");
  EXPECT_EQ(host.live_chunks(), 0u);
}

}  // namespace
}  // namespace gmlake::test
