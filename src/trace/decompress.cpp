// read_decompressed: a file's bytes, through liblzma or zlib when they start with the xz or gzip magic.
// Compressed data is decoded in one pass into a buffer that doubles as needed, up to kMaxTraceBytes.
#include <fcntl.h>
#include <lzma.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

#include "gmlake/error.h"
#include "gmlake/trace.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

constexpr std::array<std::uint8_t, 6> kXzMagic = {0xFD, 0x37, 0x7A, 0x58, 0x5A, 0x00};
constexpr std::array<std::uint8_t, 2> kGzipMagic = {0x1F, 0x8B};

// First guess of decompressed size per compressed byte (snapshots compress about 20x), and bounds on it.
constexpr std::size_t kExpectedRatio = 16;
constexpr std::size_t kMinOutputBytes = 1 * kMiB;
constexpr std::size_t kReadChunkBytes = 1 * kMiB;
// zlib counts in 32-bit uInt: feed it at most this much at a time.
constexpr std::size_t kZlibStepBytes = 1 * kGiB;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error(ErrorCode::kTrace, "gmlake trace: " + path + ": " + what);
}

[[noreturn]] void fail_errno(const std::string& verb, const std::string& path, int err) {
  throw Error(ErrorCode::kTrace, "gmlake trace: cannot " + verb + " " + path + ": " +
                                     std::system_category().message(err));
}

template <std::size_t N>
bool starts_with(const std::vector<std::uint8_t>& bytes, const std::array<std::uint8_t, N>& magic) {
  return bytes.size() >= N && std::equal(magic.begin(), magic.end(), bytes.begin());
}

// Closes a file descriptor when it goes out of scope.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { ::close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

std::vector<std::uint8_t> read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_errno("open", path, errno);
  const FdCloser closer(fd);
  struct stat st {};
  std::size_t expected_bytes = 0;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    if (static_cast<std::uint64_t>(st.st_size) > kMaxTraceBytes) fail(path, "larger than kMaxTraceBytes (16 GiB)");
    expected_bytes = static_cast<std::size_t>(st.st_size);
  }
  std::vector<std::uint8_t> bytes(std::max(expected_bytes + 1, kReadChunkBytes));  // +1: EOF shows at once
  std::size_t used = 0;
  for (;;) {
    if (used == bytes.size()) {
      if (used > kMaxTraceBytes) fail(path, "larger than kMaxTraceBytes (16 GiB)");
      bytes.resize(2 * used);
    }
    const ssize_t n = ::read(fd, bytes.data() + used, bytes.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_errno("read", path, errno);
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  bytes.resize(used);
  return bytes;
}

// Makes room in `out` past `used` bytes: doubles it, never past kMaxTraceBytes.
void grow(std::vector<std::uint8_t>* out, std::size_t used, const std::string& path) {
  if (used < out->size()) return;
  if (used >= kMaxTraceBytes) fail(path, "decompresses to more than kMaxTraceBytes (16 GiB)");
  out->resize(std::min<std::size_t>(std::max(2 * out->size(), kMinOutputBytes), kMaxTraceBytes));
}

std::size_t first_output_size(std::size_t input_bytes) {
  return std::min<std::size_t>(std::max(input_bytes * kExpectedRatio, kMinOutputBytes), kMaxTraceBytes);
}

std::vector<std::uint8_t> decode_xz(const std::vector<std::uint8_t>& in, const std::string& path) {
  lzma_stream s = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&s, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK) fail(path, "cannot start the xz decoder");
  struct End {
    lzma_stream* s;
    ~End() { lzma_end(s); }
  } end{&s};
  std::vector<std::uint8_t> out(first_output_size(in.size()));
  s.next_in = in.data();
  s.avail_in = in.size();
  for (;;) {
    const std::size_t used = static_cast<std::size_t>(s.total_out);
    grow(&out, used, path);
    s.next_out = out.data() + used;
    s.avail_out = out.size() - used;
    const lzma_ret r = lzma_code(&s, LZMA_FINISH);  // all input is given at once
    if (r == LZMA_STREAM_END) break;
    if (r == LZMA_OK) continue;
    if (r == LZMA_MEM_ERROR) fail(path, "out of memory decoding xz data");
    fail(path, "truncated or corrupt xz data (liblzma error " + std::to_string(static_cast<int>(r)) + ")");
  }
  out.resize(static_cast<std::size_t>(s.total_out));
  return out;
}

std::vector<std::uint8_t> decode_gzip(const std::vector<std::uint8_t>& in, const std::string& path) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) fail(path, "cannot start the gzip decoder");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  std::vector<std::uint8_t> out(first_output_size(in.size()));
  std::size_t in_pos = 0;
  std::size_t used = 0;
  for (;;) {
    grow(&out, used, path);
    const std::size_t in_step = std::min(in.size() - in_pos, kZlibStepBytes);
    const std::size_t out_step = std::min(out.size() - used, kZlibStepBytes);
    z.next_in = const_cast<Bytef*>(in.data() + in_pos);
    z.avail_in = static_cast<uInt>(in_step);
    z.next_out = out.data() + used;
    z.avail_out = static_cast<uInt>(out_step);
    const int r = inflate(&z, Z_NO_FLUSH);
    in_pos += in_step - z.avail_in;
    used += out_step - z.avail_out;
    if (r == Z_OK || (r == Z_BUF_ERROR && z.avail_out == 0)) continue;
    if (r != Z_STREAM_END) {
      fail(path, "truncated or corrupt gzip data" + (z.msg != nullptr ? " (" + std::string(z.msg) + ")" : ""));
    }
    if (in_pos == in.size()) break;
    // Another member follows (gzip files may be concatenated); anything else is trailing garbage.
    if (in.size() - in_pos < kGzipMagic.size() ||
        !std::equal(kGzipMagic.begin(), kGzipMagic.end(), in.begin() + static_cast<std::ptrdiff_t>(in_pos))) {
      fail(path, "corrupt gzip data (trailing bytes after the last member)");
    }
    inflateReset(&z);
  }
  out.resize(used);
  return out;
}

}  // namespace

std::vector<std::uint8_t> read_decompressed(const std::string& path) {
  std::vector<std::uint8_t> bytes = read_file(path);
  if (starts_with(bytes, kXzMagic)) return decode_xz(bytes, path);
  if (starts_with(bytes, kGzipMagic)) return decode_gzip(bytes, path);
  return bytes;
}

}  // namespace gmlake
