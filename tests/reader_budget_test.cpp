// The trace readers' memory budget. A file that is no trace is refused after its first
// bytes (also compressed, also a device that never ends); decompressed data is held to TraceReadLimits
// (max_bytes, max_ratio), raw reads to max_bytes exactly (the off-by-one); the pickle reader counts what it
// builds while parsing and stops at its budget. Real snapshots fit the default budget with room to spare.
#include <fcntl.h>
#include <lzma.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "expect_error.h"
#include "gmlake/error.h"
#include "gmlake/trace.h"
#include "gmlake/units.h"
#include "pickle_builder.h"
#include "trace_file_fixture.h"
#include "trace/pickle_reader.h"
#include "trace/trace_parsers.h"

namespace gmlake {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

void expect_trace_error(const std::function<void()>& f, const std::string& must_contain) {
  test::expect_error(f, ErrorCode::kTrace, must_contain);
}

// The budget tests compress fast (xz preset 1) and small (gzip level 9): 32 MiB of zeros and more.
Bytes fast_xz(const Bytes& in) { return test::TraceFileTest::xz(in, 1); }
Bytes small_gzip(const Bytes& in) { return test::TraceFileTest::gzip(in, Z_BEST_COMPRESSION); }

Bytes repeat(const Bytes& b, int times) {
  Bytes out;
  for (int i = 0; i < times; ++i) out.insert(out.end(), b.begin(), b.end());
  return out;
}

// n bytes that start a pickle (PROTO 4) and then go on with zeros.
Bytes pickle_start(std::size_t n) {
  Bytes b(n, 0);
  b[0] = 0x80;
  b[1] = 4;
  return b;
}

using ReaderBudgetTest = test::TraceFileTest;

// Without a look at the first bytes, 32 MiB of zeros would be decompressed whole (beyond the 1 MiB limit
// here) before "not a snapshot": the error would name the limit instead.
TEST_F(ReaderBudgetTest, CompressedDataThatIsNoTraceIsRefusedAfterItsFirstBytes) {
  TraceReadLimits limits;
  limits.max_bytes = 1 * kMiB;
  const Bytes zeros(32 * kMiB, 0);
  for (const std::string& path : {write("zeros.xz", fast_xz(zeros)), write("zeros.gz", small_gzip(zeros))}) {
    expect_trace_error([&] { read_trace(path, limits); }, path + ": not a PyTorch snapshot or RMM log");
  }
  // A raw file too (one larger than the limit is refused by its size before anything is read).
  expect_trace_error([&] { read_trace(write("zeros.raw", Bytes(512 * kKiB, 0)), limits); }, "not a PyTorch snapshot");
  expect_trace_error([&] { read_trace(write("zeros.big", Bytes(2 * kMiB, 0)), limits); },
                     "larger than the trace reader's limit (1 MiB)");
}

TEST_F(ReaderBudgetTest, DevZeroIsRefusedAtOnceAndNeverReadBeyondTheLimit) {
  expect_trace_error([] { read_trace("/dev/zero"); }, "/dev/zero: not a PyTorch snapshot or RMM log");
  TraceReadLimits limits;
  limits.max_bytes = 3 * kMiB;
  expect_trace_error([&] { read_decompressed("/dev/zero", limits); }, "larger than the trace reader's limit (3 MiB)");
}

// A pipe of exactly max_bytes is read; one byte more is refused (the off-by-one let a device grow the buffer
// to twice the limit before the check).
TEST_F(ReaderBudgetTest, APipeOfExactlyTheLimitIsReadAndOneByteMoreIsNot) {
  TraceReadLimits limits;
  limits.max_bytes = 2 * kMiB + 3;
  for (const std::size_t n : {limits.max_bytes, limits.max_bytes + 1}) {
    const std::string fifo = (dir_ / "fifo").string();
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    std::thread writer([&] {
      const Bytes data = pickle_start(n);
      const int fd = ::open(fifo.c_str(), O_WRONLY);
      std::size_t done = 0;
      while (fd >= 0 && done < data.size()) {
        const ssize_t w = ::write(fd, data.data() + done, data.size() - done);
        if (w <= 0) break;
        done += static_cast<std::size_t>(w);
      }
      if (fd >= 0) ::close(fd);
    });
    if (n == limits.max_bytes) {
      EXPECT_EQ(read_decompressed(fifo, limits).size(), n);
    } else {
      expect_trace_error([&] { read_decompressed(fifo, limits); }, "larger than the trace reader's limit");
    }
    writer.join();
    fs::remove(fifo);
  }
}

TEST_F(ReaderBudgetTest, ADecompressionBombIsStoppedAtTheRatioLimit) {
  TraceReadLimits limits;
  limits.ratio_free_bytes = 1 * kMiB;
  const Bytes bomb = pickle_start(64 * kMiB);  // starts as a pickle: passes the first look
  for (const Bytes& compressed : {fast_xz(bomb), small_gzip(bomb)}) {
    ASSERT_LT(compressed.size() * limits.max_ratio, bomb.size());
    const std::string path = write("bomb", compressed);
    expect_trace_error([&] { read_trace(path, limits); }, "more than 1000 times its compressed size");
  }
}

// Concatenated streams (each one small) must not grow the buffer past the limit.
TEST_F(ReaderBudgetTest, ConcatenatedStreamsStopAtMaxBytes) {
  TraceReadLimits limits;
  limits.max_bytes = 4 * kMiB;
  Bytes one = pickle_start(1 * kMiB);
  const Bytes xz_member = fast_xz(one);
  std::fill(one.begin(), one.end(), 0);
  const Bytes gz_first = small_gzip(pickle_start(1 * kMiB));
  Bytes gz_all = gz_first;
  const Bytes gz_rest = repeat(small_gzip(one), 7);
  gz_all.insert(gz_all.end(), gz_rest.begin(), gz_rest.end());
  for (const Bytes& data : {repeat(xz_member, 8), gz_all}) {
    const std::string path = write("many", data);
    expect_trace_error([&] { read_decompressed(path, limits); }, "more than the trace reader's limit (4 MiB)");
  }
}

// A pickle of nothing but EMPTY_LIST opcodes costs ~40 bytes per input byte; the budget stops it.
TEST_F(ReaderBudgetTest, ThePickleReaderStopsAtItsMemoryBudget) {
  Bytes empties(1 * kMiB, test::op::kEmptyList);
  empties[0] = 0x80;
  empties[1] = 4;
  empties.back() = test::op::kStop;
  TraceReadLimits limits;
  limits.pickle_slack_bytes = 1 * kMiB;
  expect_trace_error([&] { parse_snapshot_pickle(empties, "empties.pickle", limits); },
                     "would take more than");
  const std::uint64_t budget = trace_detail::pickle_budget(empties.size(), limits);
  expect_trace_error([&] { pickle::parse_pickle(empties, "empties.pickle", budget); }, "MiB of memory to read");
  // Within a larger budget the same pickle parses (and is refused only as no snapshot).
  const pickle::Document doc = pickle::parse_pickle(empties, "empties.pickle");
  EXPECT_GT(doc.counted_bytes(), budget);
}

// What real snapshots cost the pickle reader per input byte: the default budget must hold every shipped one with
// room: twice what the GPT-2 and ResNet-50 training snapshots need (4.3 bytes per byte), and 1.5 times what the
// costliest ones need (the calibration and small-batch generation traces: 6.0-6.1, whose many small strings and
// frames cost more per byte).
TEST_F(ReaderBudgetTest, RealSnapshotsFitTheDefaultBudget) {
  const TraceReadLimits limits;
  std::vector<std::string> paths;  // every trace shipped in traces/
  for (const auto& entry : fs::directory_iterator(GMLAKE_TRACES_DIR)) {
    if (entry.path().string().find(".snapshot.pickle") != std::string::npos) paths.push_back(entry.path().string());
  }
  EXPECT_GE(paths.size(), 12u);
  for (const std::string& path : paths) {
    const std::string name = fs::path(path).filename().string();
    const Bytes bytes = read_decompressed(path);
    const pickle::Document doc = pickle::parse_pickle(bytes, path);
    const double per_byte = static_cast<double>(doc.counted_bytes()) / static_cast<double>(bytes.size());
    std::printf("%s: %zu bytes of pickle, %llu bytes counted by the reader (%.2f per input byte)\n", name.c_str(),
                bytes.size(), static_cast<unsigned long long>(doc.counted_bytes()), per_byte);
    const bool training = name.starts_with("gpt2_varlen.") || name.starts_with("resnet50.");
    EXPECT_LT(per_byte * (training ? 2 : 1.5), static_cast<double>(limits.pickle_bytes_per_input_byte)) << name;
    EXPECT_FALSE(read_trace(path).devices.empty()) << name;
  }
}

}  // namespace
}  // namespace gmlake
