// `gmlake lend` (src/frontends/cli/lend_command.cpp) as a process: it lends on the host backend, logs its events,
// and on SIGTERM recalls every loan and exits 0 once they came back; bad options exit 2 with one line.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cli_support.h"
#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/lake.h"
#include "lake_test_support.h"

namespace gmlake::test {
namespace {

constexpr std::uint64_t kLoanBytes = 2 * kPageBytes;

// `gmlake lend ARGS...` started with its stderr on a pipe this test reads line by line.
class LendProcess {
 public:
  explicit LendProcess(const std::vector<std::string>& args) {
    int err[2];
    if (::pipe2(err, O_CLOEXEC) != 0) ADD_FAILURE() << "pipe";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(err[1], 2);
      std::vector<char*> argv{const_cast<char*>(GMLAKE_CLI_PATH), const_cast<char*>("lend")};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(GMLAKE_CLI_PATH, argv.data());
      _exit(127);
    }
    ::close(err[1]);
    err_ = err[0];
  }
  ~LendProcess() {
    if (!waited_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
    ::close(err_);
  }
  // Reads stderr until a line containing `text` (true) or end of file / 20 s (false). Every line is kept.
  bool wait_for(const std::string& text) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
      for (std::size_t at; (at = pending_.find('\n')) != std::string::npos;) {
        lines_.push_back(pending_.substr(0, at));
        pending_.erase(0, at + 1);
        if (lines_.back().find(text) != std::string::npos) return true;
      }
      pollfd p{err_, POLLIN, 0};
      if (std::chrono::steady_clock::now() > deadline || ::poll(&p, 1, 100) < 0) return false;
      if (p.revents == 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(err_, buffer, sizeof(buffer));
      if (n <= 0) return false;
      pending_.append(buffer, static_cast<std::size_t>(n));
    }
  }
  int count(const std::string& text) const {
    int n = 0;
    for (const std::string& l : lines_) n += l.find(text) != std::string::npos ? 1 : 0;
    return n;
  }
  std::string all() const {
    std::string out;
    for (const std::string& l : lines_) out += l + "\n";
    return out;
  }
  void signal(int s) const { ::kill(pid_, s); }
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    waited_ = true;
    wait_for("\x01");  // the rest of stderr
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  int err_ = -1;
  bool waited_ = false;
  std::string pending_;
  std::vector<std::string> lines_;
};

TEST(LendCommand, LendsLogsAndOnSigtermRecallsEveryLoanThenStopsCleanly) {
  const LakeAddress address = lake_address("lend-command");
  LendProcess lend({"--backend", "host", "--socket", address, "--budget", "8M", "--recall-ms", "20000"});
  ASSERT_TRUE(lend.wait_for("ready")) << lend.all();
  EXPECT_EQ(lend.count("lending up to 8388608 bytes of host at " + address), 1) << lend.all();
  HostBackend backend(kPageBytes);
  {
    LakeBorrower borrower(backend, address);
    const Loan a = borrower.borrow(kLoanBytes), b = borrower.borrow(kLoanBytes);
    EXPECT_THROW(borrower.borrow(2 * kLoanBytes), OutOfMemoryError) << "over the 8 MiB budget";
    MappedChunk m(backend, a.chunk, kLoanBytes);
    m.fill(0x42);
    EXPECT_TRUE(m.holds(0x42));
    ASSERT_TRUE(lend.wait_for("lent loan " + std::to_string(b.id))) << lend.all();
    lend.signal(SIGTERM);
    std::size_t back = 0;
    while (back < 2 && !borrower.lender_gone()) {
      for (const std::uint64_t id : borrower.poll(-1)) {
        if (id == a.id) m.unmap();  // evict, then give back
        borrower.give_back(id);
        ++back;
      }
    }
    EXPECT_EQ(back, 2u);
    EXPECT_EQ(backend.live_chunks(), 0u);
  }
  EXPECT_EQ(lend.wait(), 0) << lend.all();
  EXPECT_EQ(lend.count("recalled loan"), 2) << lend.all();
  EXPECT_EQ(lend.count("returned by pid"), 2) << lend.all();
  EXPECT_EQ(lend.count("refused " + std::to_string(2 * kLoanBytes) + " bytes"), 1) << lend.all();
  EXPECT_EQ(lend.count("stopped: every loan returned"), 1) << lend.all();
}

TEST(LendCommand, ALoanKeptPastTheRecallTimeMakesTheStopExitOne) {
  const LakeAddress address = lake_address("lend-command-kept");
  LendProcess lend({"--backend", "host", "--socket", address, "--budget", "0", "--recall-ms", "100"});
  ASSERT_TRUE(lend.wait_for("ready")) << lend.all();
  HostBackend backend(kPageBytes);
  LakeBorrower borrower(backend, address);
  const Loan loan = borrower.borrow(kLoanBytes);
  ASSERT_TRUE(lend.wait_for("lent loan")) << lend.all();
  lend.signal(SIGTERM);  // this borrower never answers the recall
  EXPECT_EQ(lend.wait(), 1) << lend.all();
  EXPECT_EQ(lend.count("cut off (loan"), 1) << lend.all();
  EXPECT_EQ(lend.count(std::to_string(kLoanBytes) + " bytes not returned"), 1) << lend.all();
  borrower.give_back(loan.id);  // still valid here: the lender's memfd lives on in this process's descriptor
}

TEST(LendCommand, BadOptionsAreOneLineAndExitTwo) {
  const std::vector<std::vector<std::string>> bad = {
      {"--backend", "host", "--socket", "relative", "--budget", "8M"},
      {"--backend", "host", "--socket", "@x", "--budget", "3M"},
      {"--backend", "host", "--socket", "@x", "--budget", "lots"},
      {"--backend", "sim", "--socket", "@x", "--budget", "8M"},
      {"--backend", "host", "--device", "1", "--socket", "@x", "--budget", "8M"},
      {"--backend", "host", "--socket", "@x", "--budget", "8M", "--allow-uid", "x"},
      {"--backend", "host", "--budget", "8M"},
  };
  for (const std::vector<std::string>& args : bad) {
    LendProcess lend(args);
    EXPECT_EQ(lend.wait(), 2) << args[args.size() - 1] << ": " << lend.all();
    EXPECT_EQ(lend.count("ready"), 0);
    EXPECT_GE(lend.count("gmlake"), 1) << lend.all();
  }
}

}  // namespace
}  // namespace gmlake::test
