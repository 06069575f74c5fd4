// LakeBorrower (src/lake/borrower.cpp) against a lender in a forked child, on the host backend: loans whose bytes
// both processes see, a lender that dies holding loans, and out of memory on both sides.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "expect_error.h"
#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/lake.h"
#include "ipc_test_support.h"
#include "lake_test_support.h"
#include "lake/lake_wire.h"

namespace gmlake::test {
namespace {

constexpr std::uint64_t kLoanBytes = 2 * kPageBytes;

// In a raw lender's child: reads (and closes any descriptor of) what the borrower sends on `s`, answering
// nothing, until the borrower closes. Returns 0 then, or `error_status` when a message is malformed.
int read_until_closed(int s, int error_status) {
  for (int fd = -1;; fd = -1) {
    try {
      if (!lake::receive_message(s, &fd)) return 0;
    } catch (const Error&) {
      return error_status;
    }
    if (fd >= 0) ::close(fd);
  }
}

// A lender in a child process at `address`, with its own host backend of `device_bytes` (0: unlimited) and
// `budget_bytes`; `body` runs in the child once the lender listens (after "ready" is sent).
ForkedChild lender_child(const LakeAddress& address, std::uint64_t device_bytes, std::uint64_t budget_bytes,
                         const std::function<int(LakeLender&, HostBackend&, int, int)>& body) {
  return ForkedChild([=](int up, int down) {
    HostBackend backend(kPageBytes, device_bytes);
    LakeLender lender(backend, address, budget_bytes);
    send_message(up, "ready");
    return body(lender, backend, up, down);
  });
}

TEST(LakeBorrower, ALoanIsTheLendersMemoryAndBothProcessesSeeItsBytes) {
  const LakeAddress address = lake_address("bytes");
  ForkedChild child = lender_child(address, 0, 0, [](LakeLender& lender, HostBackend& backend, int up, int down) {
    while (lender.lent_bytes() == 0) lender.poll(-1, 0);
    const std::string id = receive_message(down);  // the borrower wrote 0x5A
    MappedChunk mine(backend, lender.loan_chunk(std::stoull(id)), kLoanBytes);
    const bool saw = mine.holds(0x5A);
    mine.fill(0xA5);
    mine.unmap();
    send_message(up, saw ? "saw" : "did not see");
    return serve_one_borrower(lender, backend);
  });
  ASSERT_EQ(child.receive(), "ready");
  HostBackend backend(kPageBytes);
  {
    LakeBorrower borrower(backend, address);
    const Loan loan = borrower.borrow(kLoanBytes);
    EXPECT_EQ(loan.size_bytes, kLoanBytes);
    EXPECT_EQ(borrower.borrowed_bytes(), kLoanBytes);
    EXPECT_EQ(backend.chunk_device(loan.chunk), kImportedDevice) << "the lender's memory, not this device's";
    EXPECT_EQ(backend.live_imported_bytes(), kLoanBytes);
    EXPECT_EQ(backend.live_chunk_bytes(backend.device()), 0u);
    EXPECT_EQ(backend.live_chunk_bytes(), kLoanBytes);
    MappedChunk mapped(backend, loan.chunk, kLoanBytes);
    mapped.fill(0x5A);
    ASSERT_TRUE(child.send(std::to_string(loan.id)));
    EXPECT_EQ(child.receive(), "saw");
    EXPECT_TRUE(mapped.holds(0xA5)) << "the lender's write shows here";
    test::expect_error([&] { borrower.give_back(loan.id); }, ErrorCode::kInvalidArgument, "still mapped");
    mapped.unmap();
    borrower.give_back(loan.id);
    EXPECT_EQ(borrower.borrowed_bytes(), 0u);
    EXPECT_EQ(backend.live_imported_bytes(), 0u);
    test::expect_error([&] { borrower.give_back(loan.id); }, ErrorCode::kInvalidArgument, "no such loan");
  }
  EXPECT_EQ(child.wait(), 0) << "the lender got every chunk back";
  EXPECT_EQ(backend.live_chunks(), 0u);
}

TEST(LakeBorrower, ALenderKilledHoldingLoansLeavesThemValidUntilGivenBackAndLendsNoMore) {
  const LakeAddress address = lake_address("lender-killed");
  ForkedChild child = lender_child(address, 0, 0, [](LakeLender& lender, HostBackend&, int, int) {
    for (;;) lender.poll(-1, 0);
    return 0;
  });
  ASSERT_EQ(child.receive(), "ready");
  HostBackend backend(kPageBytes);
  LakeBorrower borrower(backend, address);
  const Loan loan = borrower.borrow(kLoanBytes);
  MappedChunk mapped(backend, loan.chunk, kLoanBytes);
  mapped.fill(0x11);
  ::kill(child.pid(), SIGKILL);
  EXPECT_EQ(child.wait(), -1);
  EXPECT_TRUE(borrower.poll(-1).empty()) << "no recall: the lender just went";
  EXPECT_TRUE(borrower.lender_gone());
  EXPECT_TRUE(mapped.holds(0x11)) << "the imported chunk keeps the memory alive";
  mapped.fill(0x22);
  EXPECT_TRUE(mapped.holds(0x22));
  test::expect_error([&] { borrower.borrow(kLoanBytes); }, ErrorCode::kBackend, "lender has exited");
  mapped.unmap();
  borrower.give_back(loan.id);
  EXPECT_EQ(backend.live_chunks(), 0u);
}

TEST(LakeBorrower, OutOfMemoryOnBothSidesIsAnErrorThatChangesNothing) {
  const LakeAddress address = lake_address("oom");
  // The lender's device holds 2 loans; the borrower's own device is full from the start.
  ForkedChild child = lender_child(address, 2 * kLoanBytes, 0, [](LakeLender& lender, HostBackend& backend, int, int) {
    const int code = serve_one_borrower(lender, backend);
    return code != 0 ? code : lender.refused_requests() == 1 ? 0 : 11;
  });
  ASSERT_EQ(child.receive(), "ready");
  HostBackend backend(kPageBytes, kPageBytes);
  const ChunkHandle own = backend.create(kPageBytes);
  test::expect_error([&] { backend.create(kPageBytes); }, ErrorCode::kOutOfMemory, "");
  {
    LakeBorrower borrower(backend, address);
    const Loan a = borrower.borrow(kLoanBytes);
    const Loan b = borrower.borrow(kLoanBytes);
    test::expect_error([&] { borrower.borrow(kLoanBytes); }, ErrorCode::kOutOfMemory, "no memory to lend");
    EXPECT_EQ(borrower.loans().size(), 2u);
    borrower.give_back(a.id);
    const Loan c = borrower.borrow(kLoanBytes);  // room again on the lender
    EXPECT_NE(c.id, a.id);
    borrower.give_back(b.id);
    borrower.give_back(c.id);
  }
  backend.release(own);
  EXPECT_EQ(child.wait(), 0) << "one refusal, every chunk back";
}

TEST(LakeBorrower, TheLendersBudgetBoundsItsLoans) {
  const LakeAddress address = lake_address("budget");
  ForkedChild child = lender_child(address, 0, kLoanBytes, [](LakeLender& lender, HostBackend& backend, int, int) {
    return serve_one_borrower(lender, backend);
  });
  ASSERT_EQ(child.receive(), "ready");
  HostBackend backend(kPageBytes);
  {
    LakeBorrower borrower(backend, address);
    const Loan a = borrower.borrow(kLoanBytes);
    test::expect_error([&] { borrower.borrow(kPageBytes); }, ErrorCode::kOutOfMemory, "budget is spent");
    test::expect_error([&] { borrower.borrow(kPageBytes + 1); }, ErrorCode::kInvalidArgument, "granularity");
    borrower.give_back(a.id);
  }
  EXPECT_EQ(child.wait(), 0);
}

// A lender that is alive but does not answer (here: it does not poll until told): borrow() gives up after
// answer_timeout_ms with OutOfMemoryError, and refuses at once while that request is unanswered; once the lender
// answers, the late loan goes straight back (never imported here) and borrowing works again.
TEST(LakeBorrower, ASilentLenderIsOutOfMemoryAfterTheTimeoutAndItsLateLoanGoesStraightBack) {
  const LakeAddress address = lake_address("silent");
  ForkedChild child = lender_child(address, 0, 0, [](LakeLender& lender, HostBackend& backend, int up, int down) {
    if (receive_message(down) != "serve") return 20;  // silent until then: the request waits in the socket
    return serve_commands(lender, backend, up, down);
  });
  ASSERT_EQ(child.receive(), "ready");
  HostBackend backend(kPageBytes);
  {
    LakeBorrower borrower(backend, address, 100);
    using Clock = std::chrono::steady_clock;
    const Clock::time_point t0 = Clock::now();
    test::expect_error([&] { borrower.borrow(kLoanBytes); }, ErrorCode::kOutOfMemory, "did not answer within 100 ms");
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    EXPECT_GE(waited, 90) << "it waited for the answer";
    EXPECT_LT(waited, 5000) << "then gave up";
    EXPECT_TRUE(borrower.awaiting_answer());
    EXPECT_EQ(borrower.borrowed_bytes(), 0u);
    EXPECT_EQ(backend.live_chunks(), 0u);
    // No second request, so no second wait: refused at once, naming the unanswered one.
    test::expect_error([&] { borrower.borrow(kLoanBytes); }, ErrorCode::kOutOfMemory, "has not answered");
    ASSERT_TRUE(child.send("serve"));  // the lender now answers the old request: a loan
    for (int i = 0; i < 200 && borrower.awaiting_answer(); ++i) borrower.poll(10);
    EXPECT_FALSE(borrower.awaiting_answer());
    EXPECT_FALSE(borrower.lender_gone()) << "a late answer is no garbage";
    EXPECT_EQ(backend.live_chunks(), 0u) << "the late loan was never imported";
    ASSERT_TRUE(child.send("lent"));
    EXPECT_EQ(child.receive(), "0") << "the late loan went back";
    const Loan loan = borrower.borrow(kLoanBytes);
    EXPECT_EQ(borrower.borrowed_bytes(), kLoanBytes);
    borrower.give_back(loan.id);
  }
  EXPECT_EQ(child.wait(), 0) << "the lender got every chunk back";
  EXPECT_EQ(backend.live_chunks(), 0u);
}

TEST(LakeBorrower, NoLenderAtTheAddressIsABackendError) {
  HostBackend backend(kPageBytes);
  test::expect_error([&] { LakeBorrower(backend, lake_address("nobody")); }, ErrorCode::kBackend, "no gmlake lender");
}

// --- Trust: the lender's uid, and a lender that breaks the protocol.

TEST(LakeBorrowerTrust, ALenderOfAnotherUidIsNotTrustedUnlessAllowed) {
  const LakeAddress address = lake_address("other-uid-lender");
  const std::uint32_t borrower_uid = ::geteuid();
  ForkedChild child([=](int up, int down) {
    if (!become_other_uid()) {
      send_message(up, "no-uid");
      return 0;
    }
    HostBackend backend(kPageBytes);
    LakeLender lender(backend, address, 0, {borrower_uid});
    send_message(up, "ready");
    for (;;) {  // serves until the test says stop
      lender.poll(10, 0);
      pollfd p{down, POLLIN, 0};
      if (::poll(&p, 1, 0) == 1) break;
    }
    while (lender.borrowers() != 0) lender.poll(-1, 0);  // the trusting borrower's RETURN and its exit
    return lender.lent_bytes() == 0 && backend.live_chunks() == 0 ? 0 : 50;
  });
  const std::string first = child.receive();
  if (first == "no-uid") GTEST_SKIP() << kNoOtherUid;
  ASSERT_EQ(first, "ready");
  HostBackend backend(kPageBytes);
  const int descriptors = open_descriptors();
  test::expect_error([&] { LakeBorrower(backend, address); }, ErrorCode::kBackend,
                     "runs as uid " + std::to_string(kOtherUid));
  EXPECT_EQ(open_descriptors(), descriptors) << "the refused connection was closed";
  {
    LakeBorrower trusting(backend, address, 0, {kOtherUid});
    const Loan loan = trusting.borrow(kLoanBytes);
    EXPECT_EQ(loan.size_bytes, kLoanBytes);
    trusting.give_back(loan.id);
  }
  ASSERT_TRUE(child.send("stop"));
  EXPECT_EQ(child.wait(), 0);
  EXPECT_EQ(backend.live_chunks(), 0u);
}

// A lender in a child that answers each REQUEST with the GRANT `grant(n, request)` makes for the n-th request
// (a memfd of `file_bytes` attached), until the borrower goes.
ForkedChild raw_lender(const LakeAddress& address, std::uint64_t file_bytes,
                       const std::function<lake::Message(int, const lake::Message&)>& grant) {
  return ForkedChild([=](int up, int) {
    const int listener = lake::listen_at(address);
    send_message(up, "ready");
    const int s = ::accept(listener, nullptr, nullptr);
    const int memfd = ::memfd_create("raw-lender", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (s < 0 || memfd < 0 || ::ftruncate(memfd, static_cast<off_t>(file_bytes)) != 0 ||
        ::fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
      return 60;
    }
    for (int n = 0;; ++n) {
      int fd = -1;
      std::optional<lake::Message> m;
      try {
        m = lake::receive_message(s, &fd);
      } catch (const Error&) {
        return 61;
      }
      if (!m) return 0;
      if (m->type != lake::MessageType::kRequest) continue;
      lake::send_message(s, grant(n, *m), memfd);
    }
  });
}

lake::Message grant_of(std::uint64_t loan_id, std::uint64_t size_bytes) {
  lake::Message g;
  g.type = lake::MessageType::kGrant;
  g.loan_id = loan_id;
  g.size_bytes = size_bytes;
  return g;
}

TEST(LakeBorrowerTrust, AGrantOfAnotherSizeThanAskedEndsTheConnectionAndLeavesNothing) {
  const LakeAddress address = lake_address("wrong-size");
  ForkedChild child = raw_lender(address, 8 * kLoanBytes,
                                 [](int, const lake::Message& r) { return grant_of(1, r.size_bytes * 2); });
  ASSERT_EQ(child.receive(), "ready");
  HostBackend backend(kPageBytes);
  const int descriptors = open_descriptors();
  {
    LakeBorrower borrower(backend, address);
    test::expect_error([&] { borrower.borrow(kLoanBytes); }, ErrorCode::kBackend, "broke the protocol");
    EXPECT_TRUE(borrower.lender_gone());
    EXPECT_TRUE(borrower.loans().empty());
    EXPECT_EQ(backend.live_chunks(), 0u) << "before the fix, a grant of 2x was imported as a chunk of 2x";
  }
  EXPECT_EQ(open_descriptors(), descriptors) << "the granted descriptor and the socket were closed";
  EXPECT_EQ(child.wait(), 0);
}

TEST(LakeBorrowerTrust, ALoanIdGrantedTwiceEndsTheConnectionAndKeepsTheFirstLoanValid) {
  const LakeAddress address = lake_address("twice");
  ForkedChild child = raw_lender(address, 8 * kLoanBytes,
                                 [](int, const lake::Message& r) { return grant_of(7, r.size_bytes); });
  ASSERT_EQ(child.receive(), "ready");
  HostBackend backend(kPageBytes);
  const int descriptors = open_descriptors();
  {
    LakeBorrower borrower(backend, address);
    const Loan first = borrower.borrow(kLoanBytes);
    EXPECT_EQ(first.id, 7u);
    test::expect_error([&] { borrower.borrow(kLoanBytes); }, ErrorCode::kBackend, "granted twice");
    EXPECT_TRUE(borrower.lender_gone());
    EXPECT_EQ(borrower.loans().size(), 1u);
    EXPECT_EQ(backend.live_chunks(), 1u) << "before the fix, the second import stayed live under no loan";
    MappedChunk m(backend, first.chunk, kLoanBytes);
    m.fill(1);
    EXPECT_TRUE(m.holds(1));
    m.unmap();
    borrower.give_back(first.id);
    EXPECT_EQ(backend.live_chunks(), 0u);
  }
  EXPECT_EQ(open_descriptors(), descriptors);
  EXPECT_EQ(child.wait(), 0);
}

TEST(LakeBorrowerTrust, AnAnswerAlreadyWaitingIsTakenEvenWithAOneMillisecondTimeout) {
  // Found by lake_fuzzer: the time left was rounded down to whole milliseconds, so a 1 ms timeout gave up at once
  // without reading the GRANT that was already there.
  const LakeAddress address = lake_address("already-there");
  ForkedChild child([=](int up, int) {
    const int listener = lake::listen_at(address);
    send_message(up, "ready");
    const int s = ::accept(listener, nullptr, nullptr);
    const int memfd = ::memfd_create("raw-lender", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (s < 0 || memfd < 0 || ::ftruncate(memfd, kLoanBytes) != 0 || ::fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
      return 60;
    }
    lake::send_message(s, grant_of(3, kLoanBytes), memfd);  // before any request: waiting when borrow() looks
    send_message(up, "granted");
    return read_until_closed(s, 61);
  });
  ASSERT_EQ(child.receive(), "ready");
  HostBackend backend(kPageBytes);
  {
    LakeBorrower borrower(backend, address, /*answer_timeout_ms=*/1);
    ASSERT_EQ(child.receive(), "granted");
    const Loan loan = borrower.borrow(kLoanBytes);
    EXPECT_EQ(loan.id, 3u);
    EXPECT_FALSE(borrower.awaiting_answer());
    borrower.give_back(loan.id);
  }
  EXPECT_EQ(child.wait(), 0);
  EXPECT_EQ(backend.live_chunks(), 0u);
}

// Before: a REFUSE(not allowed) read while a timed-out request was outstanding was taken for that request's late
// answer and dropped, and the borrower asked again: the refusal of this process went unseen (the borrow was out
// of memory, as if the lender were only slow).
TEST(LakeBorrowerTrust, ARefusalOfThisProcessIsNotTakenForTheLateAnswerToARequestThatTimedOut) {
  const LakeAddress address = lake_address("refused-late");
  ForkedChild child([=](int up, int down) {
    const int listener = lake::listen_at(address);
    send_message(up, "ready");
    const int s = ::accept(listener, nullptr, nullptr);
    if (s < 0 || receive_message(down) != "refuse") return 60;  // the request stays unread until then
    lake::Message r;
    r.type = lake::MessageType::kRefuse;
    r.arg = static_cast<std::uint64_t>(lake::RefuseReason::kNotAllowed);
    if (!lake::send_message(s, r)) return 61;
    send_message(up, "refused");
    return read_until_closed(s, 62);  // until the borrower closes: what it sends is read, nothing answered
  });
  ASSERT_EQ(child.receive(), "ready");
  HostBackend backend(kPageBytes);
  {
    LakeBorrower borrower(backend, address, /*answer_timeout_ms=*/1);
    test::expect_error([&] { borrower.borrow(kLoanBytes); }, ErrorCode::kOutOfMemory, "did not answer");
    EXPECT_TRUE(borrower.awaiting_answer());
    EXPECT_FALSE(borrower.refused());
    ASSERT_TRUE(child.send("refuse"));
    ASSERT_EQ(child.receive(), "refused");
    test::expect_error([&] { borrower.borrow(kLoanBytes); }, ErrorCode::kBackend, "refused this process");
    EXPECT_TRUE(borrower.refused());
    EXPECT_TRUE(borrower.lender_gone());
    EXPECT_TRUE(borrower.loans().empty());
    test::expect_error([&] { borrower.borrow(kLoanBytes); }, ErrorCode::kBackend, "refused this process");
  }
  EXPECT_EQ(child.wait(), 0);
  EXPECT_EQ(backend.live_chunks(), 0u);
}

}  // namespace
}  // namespace gmlake::test
