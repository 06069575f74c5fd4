// LakeLender (src/lake/lender.cpp) serving a borrower in a forked child, on the host backend: a borrower killed
// holding loans, a recall answered under load, a recall left past its deadline. Deadlines use a manual clock
// (now_ns passed to poll): nothing here depends on timing.
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/lake.h"
#include "ipc_test_support.h"
#include "lake_test_support.h"

namespace gmlake::test {
namespace {

constexpr std::uint64_t kLoanBytes = 2 * kChunkBytes;

class LakeLenderTest : public ::testing::Test {
 protected:
  // A borrower child connected to this test's lender; `body` runs in it with its own host backend.
  ForkedChild borrower_child(const std::function<int(LakeBorrower&, HostBackend&, int, int)>& body) {
    const LakeAddress address = address_;
    return ForkedChild([=](int up, int down) {
      HostBackend backend(kChunkBytes);
      LakeBorrower borrower(backend, address);
      return body(borrower, backend, up, down);
    });
  }
  void serve_until(const std::function<bool()>& done, std::uint64_t now_ns = 0) {
    while (!done()) lender_.poll(-1, now_ns);
  }

  LakeAddress address_ = lake_address(::testing::UnitTest::GetInstance()->current_test_info()->name());
  HostBackend backend_{kChunkBytes};
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

}  // namespace
}  // namespace gmlake::test
