// LakeLender (src/lake/lender.cpp) serving a borrower in a forked child, on the host backend: a borrower killed
// holding loans, a recall answered under load, a recall left past its deadline. Deadlines use a manual clock
// (now_ns passed to poll): nothing here depends on timing.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>

#include <string>
#include <vector>

#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/lake.h"
#include "lake/lake_wire.h"
#include "ipc_test_support.h"
#include "lake_test_support.h"

namespace gmlake::test {
namespace {

constexpr std::uint64_t kLoanBytes = 2 * kPageBytes;

class LakeLenderTest : public ::testing::Test {
 protected:
  // A borrower child connected to this test's lender; `body` runs in it with its own host backend.
  ForkedChild borrower_child(const std::function<int(LakeBorrower&, HostBackend&, int, int)>& body) {
    const LakeAddress address = address_;
    return ForkedChild([=](int up, int down) {
      HostBackend backend(kPageBytes);
      LakeBorrower borrower(backend, address);
      return body(borrower, backend, up, down);
    });
  }
  void serve_until(const std::function<bool()>& done, std::uint64_t now_ns = 0) {
    while (!done()) lender_.poll(-1, now_ns);
  }

  LakeAddress address_ = lake_address(::testing::UnitTest::GetInstance()->current_test_info()->name());
  HostBackend backend_{kPageBytes};
  LakeLender lender_{backend_, address_, 0};
};

TEST_F(LakeLenderTest, ABorrowerKilledHoldingLoansGetsThemReleasedHere) {
  ForkedChild child = borrower_child([](LakeBorrower& borrower, HostBackend& backend, int up, int) {
    const Loan a = borrower.borrow(kLoanBytes);
    const Loan b = borrower.borrow(kLoanBytes);
    MappedChunk ma(backend, a.chunk, kLoanBytes), mb(backend, b.chunk, kLoanBytes);
    ma.fill(1);
    mb.fill(2);
    send_message(up, "mapped");
    ::pause();  // killed here, holding both
    return 0;
  });
  serve_until([&] { return lender_.lent_bytes() == 2 * kLoanBytes; });
  EXPECT_EQ(backend_.live_chunks(), 2u);
  ASSERT_EQ(child.receive(), "mapped");
  ::kill(child.pid(), SIGKILL);
  EXPECT_EQ(child.wait(), -1);
  serve_until([&] { return lender_.borrowers() == 0; });
  EXPECT_EQ(lender_.lent_bytes(), 0u);
  EXPECT_EQ(lender_.stranded_bytes(), 0u);
  EXPECT_EQ(backend_.live_chunks(), 0u) << "the dead borrower's chunks came back";
}

TEST_F(LakeLenderTest, ARecallUnderLoadIsAnsweredByEvictionAndTheBorrowerStaysServed) {
  ForkedChild child = borrower_child([](LakeBorrower& borrower, HostBackend& backend, int up, int) {
    std::vector<Loan> loans{borrower.borrow(kLoanBytes), borrower.borrow(kLoanBytes)};
    std::vector<MappedChunk> mapped{{backend, loans[0].chunk, kLoanBytes}, {backend, loans[1].chunk, kLoanBytes}};
    send_message(up, "mapped");
    std::size_t returned = 0;
    for (unsigned char round = 0; returned < loans.size(); ++round) {
      for (std::size_t i = 0; i < loans.size(); ++i) {
        if (borrower.loans().contains(loans[i].id)) mapped[i].fill(round);  // the load: writes between polls
      }
      for (const std::uint64_t id : borrower.poll(0)) {
        const std::size_t i = id == loans[0].id ? 0 : 1;
        mapped[i].unmap();  // evict: nothing of it stays mapped
        borrower.give_back(id);
        ++returned;
      }
    }
    const Loan again = borrower.borrow(kLoanBytes);  // still a borrower in good standing
    send_message(up, borrower.lender_gone() ? "gone" : "served");
    borrower.give_back(again.id);
    return 0;
  });
  serve_until([&] { return lender_.lent_bytes() == 2 * kLoanBytes; });
  ASSERT_EQ(child.receive(), "mapped");
  EXPECT_EQ(lender_.recall_all(/*deadline_ns=*/1000), 2u);
  EXPECT_EQ(lender_.recall_all(1000), 0u) << "a loan is recalled once";
  serve_until([&] { return lender_.lent_bytes() == 0; }, /*now_ns=*/10);
  EXPECT_EQ(lender_.stranded_bytes(), 0u);
  EXPECT_EQ(lender_.borrowers(), 1u) << "answered in time: not cut off";
  serve_until([&] { return lender_.borrowers() == 0; }, 20);
  EXPECT_EQ(child.receive(), "served");
  EXPECT_EQ(child.wait(), 0);
  EXPECT_EQ(backend_.live_chunks(), 0u);
}

TEST_F(LakeLenderTest, ARecallPastItsDeadlineCutsTheBorrowerOffAndKeepsItsChunkUntilItExits) {
  ForkedChild child = borrower_child([](LakeBorrower& borrower, HostBackend& backend, int up, int down) {
    const Loan loan = borrower.borrow(kLoanBytes);
    MappedChunk mapped(backend, loan.chunk, kLoanBytes);
    mapped.fill(7);
    send_message(up, "mapped");
    if (receive_message(down) != "check") return 20;
    const std::vector<std::uint64_t> recalled = borrower.poll(0);  // the recall, then the cut
    if (recalled.size() != 1 || !borrower.lender_gone()) return 21;
    if (!mapped.holds(7)) return 22;  // still its memory: the lender did not reuse it
    try {
      borrower.borrow(kLoanBytes);
      return 23;
    } catch (const BackendError&) {
    }
    return 0;
  });
  serve_until([&] { return lender_.lent_bytes() == kLoanBytes; });
  ASSERT_EQ(child.receive(), "mapped");
  EXPECT_EQ(lender_.recall_all(/*deadline_ns=*/100), 1u);
  lender_.poll(0, /*now_ns=*/200);  // the borrower never answered
  EXPECT_EQ(lender_.borrowers(), 0u) << "cut off";
  EXPECT_EQ(lender_.stranded_bytes(), kLoanBytes);
  EXPECT_EQ(backend_.live_chunks(), 1u) << "not released while a live process may map it";
  ASSERT_TRUE(child.send("check"));
  EXPECT_EQ(child.wait(), 0);
  serve_until([&] { return lender_.stranded_bytes() == 0; }, 300);
  EXPECT_EQ(backend_.live_chunks(), 0u) << "released once the borrower exited";
}

TEST_F(LakeLenderTest, ARecallThatArrivesWhileTheBorrowerWaitsForALoanIsReportedByItsNextPoll) {
  ForkedChild child = borrower_child([](LakeBorrower& borrower, HostBackend&, int up, int down) {
    const Loan first = borrower.borrow(kLoanBytes);
    if (receive_message(down) != "recalled") return 30;
    const Loan second = borrower.borrow(kLoanBytes);  // the recall of `first` comes before this grant
    if (!borrower.loans().at(first.id).recalled) return 31;
    const std::vector<std::uint64_t> recalled = borrower.poll(0);
    if (recalled != std::vector<std::uint64_t>{first.id}) return 32;
    if (!borrower.poll(0).empty()) return 33;  // reported once
    borrower.give_back(first.id);
    borrower.give_back(second.id);
    send_message(up, "done");
    return 0;
  });
  serve_until([&] { return lender_.lent_bytes() == kLoanBytes; });
  EXPECT_EQ(lender_.recall_all(/*deadline_ns=*/1000), 1u);
  ASSERT_TRUE(child.send("recalled"));
  serve_until([&] { return lender_.borrowers() == 0; });
  EXPECT_EQ(child.receive(), "done");
  EXPECT_EQ(child.wait(), 0);
  EXPECT_EQ(backend_.live_chunks(), 0u);
}

TEST_F(LakeLenderTest, AListenerAtAnAddressInUseIsABackendError) {
  try {
    LakeLender second(backend_, address_, 0);
    ADD_FAILURE() << "two lenders at one address";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("bind"), std::string::npos) << e.what();
  }
  EXPECT_THROW(lender_.loan_chunk(1), Error);
}

// --- Trust: the borrower's uid (SO_PEERCRED), path sockets 0600, and nothing of the lender's earlier bytes.

// Serves `lender` until `child` sends a message; returns it.
std::string serve_until_child_says(LakeLender& lender, ForkedChild& child) {
  for (;;) {
    pollfd p{child.from_child(), POLLIN, 0};
    if (::poll(&p, 1, 0) == 1) return child.receive();
    lender.poll(10, 0);
  }
}

// A lender in this process that keeps its log lines.
struct LoggingLender {
  explicit LoggingLender(const LakeAddress& address, std::vector<std::uint32_t> allowed_uids = {},
                         std::uint64_t budget_bytes = 0)
      : lender(backend, address, budget_bytes, std::move(allowed_uids),
               [this](const std::string& line) { lines.push_back(line); }) {}
  int lines_with(const std::string& text) const {
    int n = 0;
    for (const std::string& l : lines) n += l.find(text) != std::string::npos ? 1 : 0;
    return n;
  }
  HostBackend backend{kPageBytes};
  std::vector<std::string> lines;
  LakeLender lender;
};

TEST(LakeLenderTrust, ABorrowerOfAnotherUidIsRefusedLoggedAndLentNothing) {
  const LakeAddress address = lake_address("other-uid");
  LoggingLender l(address);
  const std::uint32_t lender_uid = ::geteuid();
  ForkedChild child([&](int up, int) {
    if (!become_other_uid()) {
      send_message(up, "no-uid");
      return 0;
    }
    HostBackend backend(kPageBytes);
    LakeBorrower borrower(backend, address, 0, {lender_uid});  // it trusts the lender; the lender does not it
    try {
      borrower.borrow(kLoanBytes);
      send_message(up, "lent");
    } catch (const BackendError& e) {
      send_message(up, e.what());
    }
    return borrower.lender_gone() && borrower.loans().empty() && backend.live_chunks() == 0 ? 0 : 40;
  });
  const std::string said = serve_until_child_says(l.lender, child);
  if (said == "no-uid") GTEST_SKIP() << kNoOtherUid;
  EXPECT_NE(said.find("refused this process"), std::string::npos) << said;
  EXPECT_EQ(child.wait(), 0);
  EXPECT_EQ(l.lender.refused_borrowers(), 1u);
  EXPECT_EQ(l.lender.borrowers(), 0u);
  EXPECT_EQ(l.lender.lent_bytes(), 0u);
  EXPECT_EQ(l.backend.live_chunks(), 0u) << "nothing was created for it";
  ASSERT_EQ(l.lines.size(), 1u) << "one line per refusal";
  EXPECT_NE(l.lines[0].find("refused borrower"), std::string::npos) << l.lines[0];
  EXPECT_NE(l.lines[0].find("uid " + std::to_string(kOtherUid)), std::string::npos) << l.lines[0];
}

TEST(LakeLenderTrust, AnAllowedUidIsServedLikeTheOwnUid) {
  const LakeAddress address = lake_address("allowed-uid");
  LoggingLender l(address, {kOtherUid});
  const std::uint32_t lender_uid = ::geteuid();
  ForkedChild child([&](int up, int down) {
    if (!become_other_uid()) {
      send_message(up, "no-uid");
      return 0;
    }
    HostBackend backend(kPageBytes);
    LakeBorrower borrower(backend, address, 0, {lender_uid});
    const Loan loan = borrower.borrow(kLoanBytes);
    send_message(up, "lent " + std::to_string(loan.size_bytes));
    if (receive_message(down) != "return") return 41;
    borrower.give_back(loan.id);
    return 0;
  });
  const std::string first = serve_until_child_says(l.lender, child);
  if (first == "no-uid") GTEST_SKIP() << kNoOtherUid;
  EXPECT_EQ(first, "lent " + std::to_string(kLoanBytes));
  EXPECT_EQ(l.lender.lent_bytes(), kLoanBytes);
  EXPECT_EQ(l.lender.refused_borrowers(), 0u);
  ASSERT_TRUE(child.send("return"));
  while (l.lender.borrowers() != 0) l.lender.poll(-1, 0);
  EXPECT_EQ(child.wait(), 0);
  EXPECT_EQ(l.backend.live_chunks(), 0u);
  EXPECT_EQ(l.lines_with("lent loan"), 1);
  EXPECT_EQ(l.lines_with("returned"), 1);
}

TEST(LakeLenderTrust, APathSocketKeepsOtherUidsOutAtConnect) {
  const std::string path = "/tmp/gmlake-lake-lender-test-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  LoggingLender l(path, {kOtherUid});  // allowed by uid, still kept out by the file's mode
  ForkedChild child([&](int up, int) {
    if (!become_other_uid()) {
      send_message(up, "no-uid");
      return 0;
    }
    HostBackend backend(kPageBytes);
    try {
      LakeBorrower borrower(backend, path);
      send_message(up, "connected");
    } catch (const BackendError& e) {
      send_message(up, e.what());
    }
    return 0;
  });
  const std::string said = child.receive();
  EXPECT_EQ(child.wait(), 0);
  ::unlink(path.c_str());
  if (said == "no-uid") GTEST_SKIP() << kNoOtherUid;
  EXPECT_NE(said.find("Permission denied"), std::string::npos) << said;
  l.lender.poll(0, 0);
  EXPECT_EQ(l.lender.borrowers(), 0u);
}

TEST(LakeLenderTrust, AChunkLentHoldsNoneOfTheLendersEarlierBytes) {
  const LakeAddress address = lake_address("earlier-bytes");
  LoggingLender l(address);
  // The lender's own earlier use of its memory: a chunk of the loan's size, written, returned to the backend.
  {
    const ChunkHandle used = l.backend.create(kLoanBytes);
    MappedChunk m(l.backend, used, kLoanBytes);
    m.fill(0xA5);
    ASSERT_TRUE(m.holds(0xA5));
    m.unmap();
    l.backend.release(used);
  }
  ForkedChild child([&](int up, int down) {
    HostBackend backend(kPageBytes);
    LakeBorrower borrower(backend, address);
    const Loan loan = borrower.borrow(kLoanBytes);
    MappedChunk m(backend, loan.chunk, kLoanBytes);
    std::uint64_t pattern = 0, non_zero = 0;
    for (std::uint64_t i = 0; i < kLoanBytes; ++i) {
      pattern += m.bytes()[i] == 0xA5 ? 1 : 0;
      non_zero += m.bytes()[i] != 0 ? 1 : 0;
    }
    m.fill(0x3C);  // this process's bytes, which the lender's next loan must not carry to anyone either
    m.unmap();
    send_message(up, std::to_string(pattern) + " " + std::to_string(non_zero));
    if (receive_message(down) != "return") return 42;
    borrower.give_back(loan.id);
    const Loan again = borrower.borrow(kLoanBytes);
    MappedChunk m2(backend, again.chunk, kLoanBytes);
    const bool zero = m2.holds(0);
    m2.unmap();
    borrower.give_back(again.id);
    return zero ? 0 : 43;
  });
  while (l.lender.lent_bytes() == 0) l.lender.poll(-1, 0);
  EXPECT_EQ(child.receive(), "0 0") << "pattern bytes and non-zero bytes the borrower read in its loan";
  ASSERT_TRUE(child.send("return"));
  while (l.lender.borrowers() != 0) l.lender.poll(-1, 0);
  EXPECT_EQ(child.wait(), 0) << "the second loan held the first borrower's bytes";
  EXPECT_EQ(l.backend.live_chunks(), 0u);
}

TEST(LakeLenderTrust, ABorrowerThatFloodsRequestsWithoutReadingIsCutOffNotWaitedFor) {
  const LakeAddress address = lake_address("flood");
  LoggingLender l(address, {}, /*budget_bytes=*/2 * kLoanBytes);
  ForkedChild child([&](int up, int down) {
    const int s = lake::connect_to(address);
    lake::Message request;
    request.type = lake::MessageType::kRequest;
    request.size_bytes = kLoanBytes;
    std::uint64_t sent = 0;
    for (;;) {  // never reads an answer
      try {
        if (!lake::send_message(s, request)) break;  // cut off: the lender closed the connection
        ++sent;
      } catch (const BackendError&) {
        ::usleep(1000);  // its own socket is full: wait for the lender to read
      }
    }
    send_message(up, std::to_string(sent));
    receive_message(down);  // alive (it may still map what it was lent) until the test says
    ::close(s);
    return 0;
  });
  while (l.lender.borrowers() == 0) l.lender.poll(-1, 0);
  while (l.lender.borrowers() != 0) l.lender.poll(-1, 0);  // hung here in sendmsg before sends were non-blocking
  const std::uint64_t sent = std::stoull(child.receive());
  EXPECT_GT(sent, 100u);
  EXPECT_EQ(l.lender.stranded_bytes(), 2 * kLoanBytes) << "its two loans wait for its exit (before the fix, a cut-off in poll released them at once)";
  EXPECT_GT(l.lender.refused_requests(), 0u) << "the budget refused the rest";
  EXPECT_EQ(l.lines_with("cut off"), 1);
  ASSERT_TRUE(child.send("exit"));
  EXPECT_EQ(child.wait(), 0);
  while (l.lender.stranded_bytes() != 0) l.lender.poll(-1, 0);
  EXPECT_EQ(l.backend.live_chunks(), 0u);
}

TEST(LakeLenderTrust, ADescriptorSentByABorrowerIsClosedNotKept) {
  // Found by lake_fuzzer (fuzz/corpus/lake/finding-lender-kept-a-borrowers-grant-descriptor.bin): a borrower's
  // GRANT, with a descriptor, cut the borrower off but left the descriptor open in the lender.
  const LakeAddress address = lake_address("grant-from-borrower");
  LoggingLender l(address);
  const int before = open_descriptors();
  const int s = lake::connect_to(address);
  const int memfd = ::memfd_create("lake-lender-test", MFD_CLOEXEC);
  ASSERT_GE(memfd, 0);
  lake::Message grant;
  grant.type = lake::MessageType::kGrant;
  grant.loan_id = 1;
  grant.size_bytes = kLoanBytes;
  ASSERT_TRUE(lake::send_message(s, grant, memfd));
  ::close(memfd);
  while (l.lines_with("cut off") == 0) l.lender.poll(-1, 0);
  ::close(s);
  l.lender.poll(0, 0);
  EXPECT_EQ(open_descriptors(), before) << "the borrower's descriptor (and its socket) closed";
  EXPECT_EQ(l.lender.borrowers(), 0u);
}

}  // namespace
}  // namespace gmlake::test
