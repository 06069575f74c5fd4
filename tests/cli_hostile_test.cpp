// Hostile input through the `gmlake` command line (docs/errors.md): out of memory anywhere is one line and exit
// 2 (never "terminate called", exit 134); --cap takes one byte count and nothing else; a GMLAKE_CONF written
// for the C API (backend, debug) does not stop the CLI; config errors name the real command (`gmlake conf`);
// output that cannot be written (> /dev/full) is an error, not a silent exit 0.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_support.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define GMLAKE_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GMLAKE_TEST_SANITIZED 1
#endif

namespace {

using gmlake::testing::Outcome;
using gmlake::testing::slurp;
namespace fs = std::filesystem;

class CliHostileTest : public gmlake::testing::CliFixture {
 protected:
  CliHostileTest() : CliFixture("cli_hostile") {}
  void SetUp() override {
    CliFixture::SetUp();
    std::ofstream(dir_ / "small.csv") << "Thread,Time,Action,Pointer,Size,Stream\n"
                                         "1,1,allocate,0x1000,1048576,0x0\n1,2,allocate,0x200000,4096,0x0\n"
                                         "1,3,free,0x1000,1048576,0x0\n1,4,free,0x200000,4096,0x0\n";
    trace_ = (dir_ / "small.csv").string();
  }
  void expect_one_line_exit_2(const Outcome& o, const std::string& must_mention) {
    EXPECT_EQ(o.status, 2) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << "not one line: " << o.err;
    EXPECT_NE(o.err.find(must_mention), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find("terminate called"), std::string::npos) << o.err;
  }

  std::string trace_;
};

TEST_F(CliHostileTest, CapTakesOneByteCountNotASecondKeyAndNotNothing) {
  expect_one_line_exit_2(run("replay " + trace_ + " --cap 8G,cap_bytes:1"), "--cap: bad value '8G,cap_bytes:1'");
  expect_one_line_exit_2(run("replay " + trace_ + " --cap 8G,policy:caching"), "--cap");
  expect_one_line_exit_2(run("replay " + trace_ + " --cap \"\""), "--cap: empty value");
  EXPECT_EQ(run("replay " + trace_ + " --cap 8G").status, 0);
  EXPECT_EQ(run("replay " + trace_ + " --cap 0").status, 0);
}

TEST_F(CliHostileTest, AGmlakeConfForTheCApiIsAcceptedWithANote) {
  const Outcome o = run("replay " + trace_ + " --policy caching", "GMLAKE_CONF=backend:host,debug:1,cap_bytes:1G");
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.err.find("'backend' is ignored by the replay (the replay uses --backend)"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("'debug' is ignored by the replay"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("unknown key"), std::string::npos) << o.err;
}

TEST_F(CliHostileTest, ConfigErrorsPointToGmlakeConf) {
  const Outcome o = run("replay " + trace_ + " --conf nokey:1");
  expect_one_line_exit_2(o, "nokey: unknown key (`gmlake conf` lists the keys)");
  EXPECT_EQ(o.err.find("--help-conf"), std::string::npos);
}

TEST_F(CliHostileTest, OutputToAFullDeviceIsAnError) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  expect_one_line_exit_2(run("replay " + trace_, "", "/dev/full"), "cannot write the output to stdout");
  expect_one_line_exit_2(run("conf", "", "/dev/full"), "cannot write the output to stdout");
}

TEST_F(CliHostileTest, DevZeroIsRefusedAtOnce) {
  expect_one_line_exit_2(run("replay /dev/zero"), "/dev/zero: not a PyTorch snapshot or RMM log");
}

// 24 MiB of EMPTY_LIST opcodes under a 160 MB address-space limit: the reader runs out of memory before its
// budget (which would allow ~300 MB); std::bad_alloc must become one line and exit 2.
TEST_F(CliHostileTest, OutOfMemoryIsOneLineAndExit2) {
#ifdef GMLAKE_TEST_SANITIZED
  GTEST_SKIP() << "sanitizers reserve terabytes of shadow memory: an address-space limit stops them, not the CLI";
#endif
  std::string empties(24u << 20, ']');
  empties[0] = '\x80';
  empties[1] = '\x04';
  empties.back() = '.';
  std::ofstream(dir_ / "empties.pickle", std::ios::binary) << empties;
  const Outcome o = run("replay " + (dir_ / "empties.pickle").string(), "ulimit -v 160000;");
  expect_one_line_exit_2(o, "out of memory");
}

}  // namespace
