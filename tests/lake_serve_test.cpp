// serve_until_stopped (src/lake/serve.cpp): a lender served until a signal, then emptied by recalls; a borrower
// that keeps its loan past the recall time is reported, not waited for.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <string>
#include <vector>

#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/lake.h"
#include "ipc_test_support.h"
#include "lake_test_support.h"

namespace gmlake::test {
namespace {

constexpr std::uint64_t kLoanBytes = 2 * kPageBytes;

volatile std::sig_atomic_t g_stop = 0;
extern "C" void set_stop(int) { g_stop = 1; }

// SIGUSR1 sets g_stop while the test runs (a child sends it, as a user's kill sends SIGTERM to `gmlake lend`).
class LakeServeTest : public ::testing::Test {
 protected:
  LakeServeTest() {
    g_stop = 0;
    struct sigaction a {};
    a.sa_handler = set_stop;
    sigemptyset(&a.sa_mask);
    sigaction(SIGUSR1, &a, &previous_);
  }
  ~LakeServeTest() override { sigaction(SIGUSR1, &previous_, nullptr); }
  struct sigaction previous_ {};
  LakeAddress address_ = lake_address(::testing::UnitTest::GetInstance()->current_test_info()->name());
  HostBackend backend_{kPageBytes};
  std::vector<std::string> lines_;
  LakeLender lender_{backend_, address_, 0, {}, [this](const std::string& l) { lines_.push_back(l); }};
};

TEST_F(LakeServeTest, AStopRecallsEveryLoanAndEndsOnceAllCameBack) {
  const LakeAddress address = address_;
  const pid_t server = ::getpid();
  ForkedChild child([=](int up, int) {
    HostBackend backend(kPageBytes);
    LakeBorrower borrower(backend, address);
    const Loan a = borrower.borrow(kLoanBytes), b = borrower.borrow(kLoanBytes);
    ::kill(server, SIGUSR1);  // stop, with two loans out
    std::size_t back = 0;
    while (back < 2) {
      for (const std::uint64_t id : borrower.poll(-1)) {
        borrower.give_back(id);
        ++back;
      }
      if (borrower.lender_gone()) return 70;
    }
    try {
      borrower.borrow(kLoanBytes);
      return 71;  // a stopping lender lends nothing new
    } catch (const OutOfMemoryError&) {
    }
    send_message(up, a.id != b.id ? "both back" : "same id");
    return 0;
  });
  EXPECT_EQ(serve_until_stopped(lender_, g_stop, /*recall_ms=*/60'000), 0u);
  EXPECT_EQ(lender_.lent_bytes(), 0u);
  for (;;) {  // still answering (refusing) until the child reports
    pollfd p{child.from_child(), POLLIN, 0};
    if (::poll(&p, 1, 0) == 1) break;
    lender_.poll(10, 0);
  }
  EXPECT_EQ(child.receive(), "both back");
  EXPECT_EQ(lender_.refused_requests(), 1u) << "the request after the stop";
  EXPECT_EQ(child.wait(), 0);
  while (lender_.borrowers() != 0) lender_.poll(-1, 0);
  EXPECT_EQ(backend_.live_chunks(), 0u);
  int recalled = 0;
  for (const std::string& l : lines_) recalled += l.find("recalled loan") != std::string::npos ? 1 : 0;
  EXPECT_EQ(recalled, 2);
}

TEST_F(LakeServeTest, ABorrowerThatKeepsItsLoanPastTheRecallTimeIsCutOffAndReported) {
  const LakeAddress address = address_;
  const pid_t server = ::getpid();
  ForkedChild child([=](int, int down) {
    HostBackend backend(kPageBytes);
    LakeBorrower borrower(backend, address);
    borrower.borrow(kLoanBytes);
    ::kill(server, SIGUSR1);
    receive_message(down);  // never reads the recall; alive until the test is done
    return 0;
  });
  EXPECT_EQ(serve_until_stopped(lender_, g_stop, /*recall_ms=*/50), kLoanBytes) << "kept past the recall time";
  EXPECT_EQ(lender_.borrowers(), 0u) << "cut off";
  EXPECT_EQ(backend_.live_chunks(), 1u) << "not released while the borrower lives";
  ASSERT_TRUE(child.send("exit"));
  EXPECT_EQ(child.wait(), 0);
  while (lender_.stranded_bytes() != 0) lender_.poll(-1, 0);
  EXPECT_EQ(backend_.live_chunks(), 0u);
}

}  // namespace
}  // namespace gmlake::test
