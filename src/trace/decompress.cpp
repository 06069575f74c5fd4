// read_decompressed: a file's bytes, through liblzma or zlib when they start with the xz or gzip magic.
//
// Everything is bounded by TraceReadLimits (trace.h): the file's own bytes and the decompressed bytes by
// max_bytes (a buffer never grows past max_bytes + 1, the one byte that shows the file is too large, also for
// a pipe or a device that never ends), the decompressed bytes also by max_ratio per compressed byte. When a
// caller gives a `looks_like` check (read_trace does), the first kPeekBytes (decompressed) are shown to it
// before the rest is read or decompressed, so that a file that is no trace costs kPeekBytes, not gigabytes.
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
#include "trace_parsers.h"

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

using trace_detail::LooksLike;
using trace_detail::kPeekBytes;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error(ErrorCode::kTrace, "gmlake trace: " + path + ": " + what);
}

[[noreturn]] void fail_errno(const std::string& verb, const std::string& path, int err) {
  throw Error(ErrorCode::kTrace, "gmlake trace: cannot " + verb + " " + path + ": " +
                                     std::system_category().message(err));
}

std::string bytes_text(std::uint64_t n) {
  if (n >= kGiB && n % kGiB == 0) return std::to_string(n / kGiB) + " GiB";
  if (n >= kMiB && n % kMiB == 0) return std::to_string(n / kMiB) + " MiB";
  return std::to_string(n) + " bytes";
}

template <std::size_t N>
bool starts_with(std::span<const std::uint8_t> bytes, const std::array<std::uint8_t, N>& magic) {
  return bytes.size() >= N && std::equal(magic.begin(), magic.end(), bytes.begin());
}

bool compressed(std::span<const std::uint8_t> bytes, bool complete) {
  // A prefix of a magic that the file may still complete counts as compressed (looked at again later).
  const auto prefix_of = [&](const auto& magic) {
    const std::size_t n = std::min(bytes.size(), magic.size());
    return std::equal(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n), magic.begin()) &&
           (n == magic.size() || !complete);
  };
  return !bytes.empty() && (prefix_of(kXzMagic) || prefix_of(kGzipMagic));
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

// Refuses the input when `looks_like` says its first bytes are no trace.
void check_prefix(const LooksLike* looks_like, std::span<const std::uint8_t> prefix, bool complete,
                  const std::string& path) {
  if (looks_like != nullptr && !(*looks_like)(prefix, complete)) fail(path, "not a PyTorch snapshot or RMM log");
}

std::vector<std::uint8_t> read_file(const std::string& path, const TraceReadLimits& limits,
                                    const LooksLike* looks_like) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_errno("open", path, errno);
  const FdCloser closer(fd);
  const std::uint64_t max_bytes = std::min<std::uint64_t>(limits.max_bytes, SIZE_MAX - 1);
  const std::string too_large = "larger than the trace reader's limit (" + bytes_text(max_bytes) + ")";
  struct stat st {};
  std::size_t expected_bytes = 0;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    if (static_cast<std::uint64_t>(st.st_size) > max_bytes) fail(path, too_large);
    expected_bytes = static_cast<std::size_t>(st.st_size);
  }
  // The buffer never holds more than max_bytes + 1 bytes: one past the limit shows the file is too large.
  const std::size_t cap = static_cast<std::size_t>(max_bytes) + 1;
  std::vector<std::uint8_t> bytes(std::min(std::max(expected_bytes + 1, kReadChunkBytes), cap));
  std::size_t used = 0;
  bool peeked = looks_like == nullptr;
  for (;;) {
    if (used == bytes.size()) {
      if (used >= cap) fail(path, too_large);
      bytes.resize(std::min(2 * used, cap));
    }
    // Until the first bytes were looked at, read no further than them.
    const std::size_t want = peeked ? bytes.size() - used : std::min(bytes.size(), kPeekBytes) - used;
    const ssize_t n = ::read(fd, bytes.data() + used, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_errno("read", path, errno);
    used += static_cast<std::size_t>(n);
    if (!peeked && (n == 0 || used >= kPeekBytes)) {
      const std::span<const std::uint8_t> prefix(bytes.data(), used);
      if (!compressed(prefix, n == 0)) check_prefix(looks_like, prefix, n == 0, path);
      peeked = true;
    }
    if (n == 0) break;
  }
  if (used > max_bytes) fail(path, too_large);
  bytes.resize(used);
  return bytes;
}

// The decompressed bytes, in a buffer that doubles as needed but never past the limit (+1), with a look at
// the first kPeekBytes before more is decompressed.
class Output {
 public:
  Output(std::size_t input_bytes, const TraceReadLimits& limits, const LooksLike* looks_like, const std::string& path)
      : looks_like_(looks_like), path_(path) {
    std::uint64_t limit = std::min<std::uint64_t>(limits.max_bytes, SIZE_MAX - 1);
    const std::uint64_t by_ratio =
        input_bytes > UINT64_MAX / std::max<std::uint64_t>(limits.max_ratio, 1) ? UINT64_MAX
                                                                                : input_bytes * limits.max_ratio;
    const std::uint64_t ratio_limit = std::max(by_ratio, limits.ratio_free_bytes);
    if (ratio_limit < limit) {
      limit = ratio_limit;
      why_ = "more than " + std::to_string(limits.max_ratio) + " times its compressed size (" +
             bytes_text(limit) + "): not a snapshot (a decompression bomb?)";
    } else {
      why_ = "more than the trace reader's limit (" + bytes_text(limit) + ")";
    }
    cap_ = static_cast<std::size_t>(limit) + 1;
    const std::size_t first = std::max(input_bytes > SIZE_MAX / kExpectedRatio ? SIZE_MAX : input_bytes * kExpectedRatio,
                                       kMinOutputBytes);
    out_.resize(std::min(first, cap_));
  }

  // Room past the `used` bytes decoded so far: grows the buffer when full; before the first bytes were looked
  // at, no room beyond them.
  std::span<std::uint8_t> room(std::size_t used) {
    if (used >= cap_) fail(path_, "decompresses to " + why_);
    if (used == out_.size()) out_.resize(std::min(std::max(2 * out_.size(), kMinOutputBytes), cap_));
    const std::size_t end = peeked() ? out_.size() : std::min(out_.size(), kPeekBytes);
    return {out_.data() + used, end - used};
  }

  // Called after each decoder step with the bytes decoded so far; `complete` at the end of the data.
  void decoded(std::size_t used, bool complete) {
    if (!peeked() && (used >= kPeekBytes || complete)) {
      check_prefix(looks_like_, {out_.data(), std::min(used, kPeekBytes)}, complete, path_);
      looks_like_ = nullptr;
    }
    if (used >= cap_) fail(path_, "decompresses to " + why_);
  }

  std::vector<std::uint8_t> take(std::size_t used) {
    out_.resize(used);
    return std::move(out_);
  }

 private:
  bool peeked() const { return looks_like_ == nullptr; }

  const LooksLike* looks_like_;
  const std::string& path_;
  std::string why_;
  std::size_t cap_ = 0;
  std::vector<std::uint8_t> out_;
};

std::vector<std::uint8_t> decode_xz(const std::vector<std::uint8_t>& in, const std::string& path,
                                    const TraceReadLimits& limits, const LooksLike* looks_like) {
  lzma_stream s = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&s, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK) fail(path, "cannot start the xz decoder");
  struct End {
    lzma_stream* s;
    ~End() { lzma_end(s); }
  } end{&s};
  Output out(in.size(), limits, looks_like, path);
  s.next_in = in.data();
  s.avail_in = in.size();
  for (;;) {
    const std::size_t used = static_cast<std::size_t>(s.total_out);
    const std::span<std::uint8_t> room = out.room(used);
    s.next_out = room.data();
    s.avail_out = room.size();
    const lzma_ret r = lzma_code(&s, LZMA_FINISH);  // all input is given at once
    out.decoded(static_cast<std::size_t>(s.total_out), r == LZMA_STREAM_END);
    if (r == LZMA_STREAM_END) break;
    if (r == LZMA_OK) continue;
    if (r == LZMA_MEM_ERROR) fail(path, "out of memory decoding xz data");
    if (r == LZMA_BUF_ERROR && s.avail_out == 0) continue;  // the look at the first bytes limited the room
    fail(path, "truncated or corrupt xz data (liblzma error " + std::to_string(static_cast<int>(r)) + ")");
  }
  return out.take(static_cast<std::size_t>(s.total_out));
}

std::vector<std::uint8_t> decode_gzip(const std::vector<std::uint8_t>& in, const std::string& path,
                                      const TraceReadLimits& limits, const LooksLike* looks_like) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) fail(path, "cannot start the gzip decoder");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  Output out(in.size(), limits, looks_like, path);
  std::size_t in_pos = 0;
  std::size_t used = 0;
  for (;;) {
    const std::span<std::uint8_t> room = out.room(used);
    const std::size_t in_step = std::min(in.size() - in_pos, kZlibStepBytes);
    const std::size_t out_step = std::min(room.size(), kZlibStepBytes);
    z.next_in = const_cast<Bytef*>(in.data() + in_pos);
    z.avail_in = static_cast<uInt>(in_step);
    z.next_out = room.data();
    z.avail_out = static_cast<uInt>(out_step);
    const int r = inflate(&z, Z_NO_FLUSH);
    in_pos += in_step - z.avail_in;
    used += out_step - z.avail_out;
    const bool last = r == Z_STREAM_END && in_pos == in.size();
    out.decoded(used, last);
    if (r == Z_OK || (r == Z_BUF_ERROR && z.avail_out == 0)) continue;
    if (r != Z_STREAM_END) {
      fail(path, "truncated or corrupt gzip data" + (z.msg != nullptr ? " (" + std::string(z.msg) + ")" : ""));
    }
    if (last) break;
    // Another member follows (gzip files may be concatenated); anything else is trailing garbage.
    if (in.size() - in_pos < kGzipMagic.size() ||
        !std::equal(kGzipMagic.begin(), kGzipMagic.end(), in.begin() + static_cast<std::ptrdiff_t>(in_pos))) {
      fail(path, "corrupt gzip data (trailing bytes after the last member)");
    }
    inflateReset(&z);
  }
  return out.take(used);
}

}  // namespace

namespace trace_detail {

std::vector<std::uint8_t> read_input(const std::string& path, const TraceReadLimits& limits,
                                     const LooksLike* looks_like) {
  std::vector<std::uint8_t> bytes = read_file(path, limits, looks_like);
  if (starts_with(bytes, kXzMagic)) return decode_xz(bytes, path, limits, looks_like);
  if (starts_with(bytes, kGzipMagic)) return decode_gzip(bytes, path, limits, looks_like);
  return bytes;
}

}  // namespace trace_detail

std::vector<std::uint8_t> read_decompressed(const std::string& path, const TraceReadLimits& limits) {
  return trace_detail::read_input(path, limits, nullptr);
}

}  // namespace gmlake
