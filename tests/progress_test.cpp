// The replay's progress line (src/frontends/cli/progress.h), with its clock and its stream passed in: silent for
// the first two seconds, then label, bar and share of ops in place (\r), cleared at the end; never when disabled.
// That `gmlake replay` writes nothing to a stderr that is not a terminal: tests/cli_test.cpp.
#include "frontends/cli/progress.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace gmlake::cli {
namespace {

using std::chrono::milliseconds;

class ProgressLineTest : public ::testing::Test {
 protected:
  void SetUp() override { file_ = std::tmpfile(); }
  void TearDown() override { std::fclose(file_); }

  ProgressLine::Clock clock() {
    return [this] { return now_; };
  }
  std::string written() {
    std::fflush(file_);
    std::string text(static_cast<std::size_t>(std::ftell(file_)), '\0');
    std::rewind(file_);
    text.resize(std::fread(text.data(), 1, text.size(), file_));
    return text;
  }

  std::FILE* file_ = nullptr;
  std::chrono::steady_clock::time_point now_{};
};

TEST_F(ProgressLineTest, AReplayOfLessThanTwoSecondsWritesNothing) {
  {
    ProgressLine line("trace dev 0 gmlake", true, file_, clock());
    line(0.5);
    now_ += milliseconds(1999);
    line(0.99);
    EXPECT_FALSE(line.shown());
  }
  EXPECT_EQ(written(), "");
}

TEST_F(ProgressLineTest, AfterTwoSecondsTheLineShowsLabelBarAndShareInPlaceAndIsClearedAtTheEnd) {
  {
    ProgressLine line("gpt2 dev 0 caching", true, file_, clock());
    now_ += milliseconds(2000);
    line(0.5);
    line(1.0);
    EXPECT_TRUE(line.shown());
  }
  const std::string text = written();
  const std::string half = "\r" + std::string("gpt2 dev 0 caching") + std::string(40 - 18, ' ') + " [" +
                           std::string(15, '#') + std::string(15, ' ') + "]  50%";
  EXPECT_EQ(text.rfind(half, 0), 0u) << text;
  EXPECT_NE(text.find("[" + std::string(30, '#') + "] 100%"), std::string::npos) << text;
  const std::string clear = "\r" + std::string(ProgressLine::kLineWidth, ' ') + "\r";
  ASSERT_GE(text.size(), clear.size());
  EXPECT_EQ(text.substr(text.size() - clear.size()), clear) << "cleared at the end";
  EXPECT_EQ(text.find('\n'), std::string::npos) << "updated in place, never a new line";
}

TEST_F(ProgressLineTest, ASharePastTheEndsIsClampedToTheBar) {
  ProgressLine line("t", true, file_, clock());
  now_ += milliseconds(5000);
  line(1.5);
  line(-1);
  const std::string text = written();
  EXPECT_NE(text.find("] 100%"), std::string::npos) << text;
  EXPECT_NE(text.find("]   0%"), std::string::npos) << text;
}

TEST_F(ProgressLineTest, DisabledItNeverWritesHoweverLongTheReplay) {
  {
    ProgressLine line("t", false, file_, clock());
    now_ += milliseconds(60'000);
    line(0.5);
    EXPECT_FALSE(line.shown());
  }
  EXPECT_EQ(written(), "");
}

TEST(ProgressWantedTest, QuietSilencesItEvenOnATerminal) { EXPECT_FALSE(progress_wanted(/*quiet=*/true)); }

}  // namespace
}  // namespace gmlake::cli
