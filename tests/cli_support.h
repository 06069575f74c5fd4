// Running build/gmlake from a test: a temporary folder per test, the exit status and both output streams.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace gmlake::testing {

namespace fs = std::filesystem;

struct Outcome {
  int status;
  std::string out;
  std::string err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fixture with its own folder (dir_), removed after the test.
class CliFixture : public ::testing::Test {
 protected:
  explicit CliFixture(const std::string& tag) : tag_(tag) {}
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gmlake_" + tag_ + "_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `prefix gmlake args` in sh; stdout goes to `out` unless it is "" (then to a file read back).
  Outcome run(const std::string& args, const std::string& prefix = "", const std::string& out = "") {
    const std::string out_path = out.empty() ? (dir_ / "out").string() : out;
    const std::string cmd = prefix + " " + std::string(GMLAKE_CLI_PATH) + " " + args + " >" + out_path + " 2>" +
                            (dir_ / "err").string();
    const int raw = std::system(("sh -c '" + cmd + "'").c_str());
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, out.empty() ? slurp(out_path) : "", slurp(dir_ / "err")};
  }

  fs::path dir_;

 private:
  std::string tag_;
};

}  // namespace gmlake::testing
