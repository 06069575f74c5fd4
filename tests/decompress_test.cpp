// read_decompressed (src/trace/decompress.cpp): xz and gzip files, whole, concatenated, truncated, corrupt.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "expect_error.h"
#include "gmlake/error.h"
#include "gmlake/trace.h"
#include "trace_file_fixture.h"

namespace gmlake {
namespace {

using test::TraceFileTest;

void expect_trace_error(const std::function<void()>& f, const std::string& must_contain) {
  test::expect_error(f, ErrorCode::kTrace, must_contain);
}

TEST_F(TraceFileTest, RawXzAndGzipSnapshotsReadTheSame) {
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::vector<std::uint8_t>>>{
           {"run.snapshot.pickle", pickle_}, {"run.snapshot.pickle.xz", xz(pickle_)},
           {"run.pickle.gz", gzip(pickle_)}}) {
    const std::string path = write(name, bytes);
    EXPECT_EQ(read_decompressed(path), pickle_) << name;
    const Trace t = read_trace(path);
    EXPECT_EQ(t.name, "run") << name;
    ASSERT_EQ(t.devices.size(), 1u) << name;
    EXPECT_EQ(t.devices[0].events.size(), 2u) << name;
  }
}

TEST_F(TraceFileTest, ConcatenatedXzStreamsAndGzipMembersReadAsOne) {
  const std::vector<std::uint8_t> a = {1, 2, 3};
  const std::vector<std::uint8_t> b = {4, 5};
  EXPECT_EQ(read_decompressed(write("two.xz", concat(xz(a), xz(b)))), concat(a, b));
  EXPECT_EQ(read_decompressed(write("two.gz", concat(gzip(a), gzip(b)))), concat(a, b));
}

TEST_F(TraceFileTest, TruncatedXzIsAnErrorNamingTheFile) {
  const std::vector<std::uint8_t> full = xz(pickle_);
  for (std::size_t n : {std::size_t{6}, std::size_t{12}, full.size() / 2, full.size() - 1}) {
    const std::string path = write("cut.xz", std::vector<std::uint8_t>(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n)));
    expect_trace_error([&] { read_decompressed(path); }, path + ": truncated or corrupt xz data");
  }
}

TEST_F(TraceFileTest, TruncatedGzipIsAnErrorNamingTheFile) {
  const std::vector<std::uint8_t> full = gzip(pickle_);
  for (std::size_t n : {std::size_t{2}, std::size_t{10}, full.size() / 2, full.size() - 1}) {
    const std::string path = write("cut.gz", std::vector<std::uint8_t>(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n)));
    expect_trace_error([&] { read_decompressed(path); }, path + ": truncated or corrupt gzip data");
  }
}

TEST_F(TraceFileTest, CorruptCompressedDataIsAnError) {
  std::vector<std::uint8_t> bad_xz = xz(pickle_);
  bad_xz[bad_xz.size() / 2] ^= 0x55;
  expect_trace_error([&] { read_decompressed(write("bad.xz", bad_xz)); }, "truncated or corrupt xz data");
  std::vector<std::uint8_t> bad_gz = gzip(pickle_);
  bad_gz[bad_gz.size() - 6] ^= 0x55;  // inside the CRC-32 trailer
  expect_trace_error([&] { read_decompressed(write("bad.gz", bad_gz)); }, "truncated or corrupt gzip data");
  expect_trace_error([&] { read_decompressed(write("junk.gz", concat(gzip(pickle_), {'x', 'y', 'z'}))); },
                     "trailing bytes");
}

}  // namespace
}  // namespace gmlake
