// TraceFileTest: a temporary folder and xz / gzip encoders, for the tests of trace files (decompress_test.cpp,
// trace_test.cpp, reader_budget_test.cpp).
#pragma once

#include <gtest/gtest.h>
#include <lzma.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "pickle_builder.h"

namespace gmlake::test {

class TraceFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("gmlake_trace_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::vector<std::uint8_t>& bytes) const {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path;
  }

 public:
  // xz at `preset` (0..9), gzip at `level` (zlib's 0..9, Z_DEFAULT_COMPRESSION).
  static std::vector<std::uint8_t> xz(const std::vector<std::uint8_t>& in, std::uint32_t preset = 6) {
    std::vector<std::uint8_t> out(lzma_stream_buffer_bound(in.size()));
    std::size_t used = 0;
    EXPECT_EQ(lzma_easy_buffer_encode(preset, LZMA_CHECK_CRC64, nullptr, in.data(), in.size(), out.data(), &used,
                                      out.size()),
              LZMA_OK);
    out.resize(used);
    return out;
  }

  static std::vector<std::uint8_t> gzip(const std::vector<std::uint8_t>& in, int level = Z_DEFAULT_COMPRESSION) {
    z_stream z{};
    EXPECT_EQ(deflateInit2(&z, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    std::vector<std::uint8_t> out(deflateBound(&z, static_cast<uLong>(in.size())));
    z.next_in = const_cast<Bytef*>(in.data());
    z.avail_in = static_cast<uInt>(in.size());
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
    out.resize(z.total_out);
    deflateEnd(&z);
    return out;
  }

 protected:
  static std::vector<std::uint8_t> concat(std::vector<std::uint8_t> a, const std::vector<std::uint8_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  std::filesystem::path dir_;
  const std::vector<std::uint8_t> pickle_ = snapshot_pickle({{{"alloc", 1, 512}, {"free_requested", 1, 512}}});
};

}  // namespace gmlake::test
