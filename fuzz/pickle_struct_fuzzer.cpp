// libFuzzer target, structure-aware: the same property as pickle_fuzzer (parse_snapshot_pickle gives a Trace
// or Error(kTrace), and what it gives replays), but the inputs are mutated as pickles, opcode by opcode, not
// byte by byte. Seeded from real snapshots (fuzz/corpus/pickle: pieces of the ResNet-50 snapshot and
// synthetic ones), whose structure (dicts of events, lists of frames, the memo) a byte mutator almost always
// breaks at the first byte it touches. Mutations (LLVMFuzzerCustomMutator):
//   - delete, duplicate (up to 64 times: containers that grow, the memory budget), or move one opcode;
//   - insert an opcode from the table below with arguments of interesting widths (LONG1/LONG4 of 0..300
//     bytes, memo indexes near the memo's size, lengths beyond the input);
//   - replace an integer opcode's argument with an edge value (0, -1, 2^31, 2^63, 2^64-1, a 300-byte LONG4);
//   - or hand the bytes to libFuzzer's own mutator (LLVMFuzzerMutate), one time in four.
// It also crosses over two inputs at opcode boundaries (LLVMFuzzerCustomCrossOver).
// Memory: run with -rss_limit_mb (scripts/ci-fuzz.sh: 2048): the reader's budget (TraceReadLimits) must keep
// every input far below it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "fuzz_replay.h"
#include "gmlake/error.h"
#include "gmlake/trace.h"

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);

namespace {

using Bytes = std::vector<std::uint8_t>;

// How many argument bytes follow opcode `op` at `p` (end of input: `end`); SIZE_MAX for an unknown opcode or
// a truncated argument. Protocol-0 opcodes take a line.
std::size_t arg_len(const std::uint8_t* p, const std::uint8_t* end) {
  const std::size_t left = static_cast<std::size_t>(end - p) - 1;
  const auto le = [&](std::size_t width) -> std::size_t {
    if (left < width) return SIZE_MAX;
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < width; ++i) n |= std::uint64_t{p[1 + i]} << (8 * i);
    if (n > left - width) return SIZE_MAX;
    return width + static_cast<std::size_t>(n);
  };
  const auto line = [&]() -> std::size_t {
    const void* nl = std::memchr(p + 1, '\n', left);
    return nl == nullptr ? SIZE_MAX : static_cast<std::size_t>(static_cast<const std::uint8_t*>(nl) - p);
  };
  switch (*p) {
    case 0x80: case 0x4b: case 0x68: case 0x71: return left >= 1 ? 1 : SIZE_MAX;  // PROTO BININT1 BINGET BINPUT
    case 0x4d: return left >= 2 ? 2 : SIZE_MAX;                                      // BININT2
    case 0x4a: case 0x6a: case 0x72: return left >= 4 ? 4 : SIZE_MAX;               // BININT LONG_BINGET/PUT
    case 0x47: case 0x95: return left >= 8 ? 8 : SIZE_MAX;                           // BINFLOAT FRAME
    case 0x8a: case 0x8c: case 0x43: return le(1);                                   // LONG1 SHORT_BIN*
    case 0x8b: case 0x58: case 0x42: return le(4);                                   // LONG4 BINUNICODE BINBYTES
    case 0x8d: case 0x8e: return le(8);                                              // BINUNICODE8 BINBYTES8
    case 0x49: case 0x4c: case 0x46: case 0x56: case 0x70: case 0x67: return line(); // INT LONG FLOAT UNICODE PUT GET
    default: return 0;
  }
}

// The opcode boundaries of `b` (offsets of each opcode, then b.size()); stops at the first byte that does
// not parse as an opcode with its argument (the rest is one token).
std::vector<std::size_t> tokens(const Bytes& b) {
  std::vector<std::size_t> at;
  std::size_t i = 0;
  while (i < b.size()) {
    at.push_back(i);
    const std::size_t n = arg_len(b.data() + i, b.data() + b.size());
    if (n == SIZE_MAX) {
      i = b.size();
      break;
    }
    i += 1 + n;
  }
  at.push_back(b.size());
  return at;
}

void put_le(Bytes* out, std::uint64_t v, int width) {
  for (int i = 0; i < width; ++i) out->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

// One opcode with arguments, picked for what readers get wrong: widths, memo indexes, containers, marks.
Bytes random_op(std::mt19937_64& rng, std::size_t memo_hint) {
  Bytes op;
  const auto any = [&](std::uint64_t n) { return rng() % n; };
  switch (any(16)) {
    case 0: {  // LONG1 / LONG4 of 0..300 bytes, sometimes all 0xff (2^k - 1) as a real snapshot's line number
      const std::size_t n = any(4) == 0 ? 9 : any(301);
      const bool four = n > 255 || any(2) == 0;
      op.push_back(four ? 0x8b : 0x8a);
      put_le(&op, n, four ? 4 : 1);
      const bool ones = any(2) == 0;
      for (std::size_t i = 0; i < n; ++i) op.push_back(ones ? (i + 1 == n ? 0 : 0xff) : static_cast<std::uint8_t>(rng()));
      break;
    }
    case 1: op = {0x5d}; break;  // EMPTY_LIST
    case 2: op = {0x7d}; break;  // EMPTY_DICT
    case 3: op = {0x28}; break;  // MARK
    case 4: op = {static_cast<std::uint8_t>(any(2) ? 0x65 : 0x75)}; break;  // APPENDS / SETITEMS
    case 5: op = {0x94}; break;  // MEMOIZE
    case 6: op = {0x68, static_cast<std::uint8_t>(memo_hint == 0 ? 0 : any(memo_hint + 2))}; break;  // BINGET
    case 7: op = {0x6a}; put_le(&op, any(2) ? memo_hint : rng(), 4); break;                         // LONG_BINGET
    case 8: op = {0x72}; put_le(&op, any(2) ? memo_hint : rng(), 4); break;                         // LONG_BINPUT
    case 9: {  // a key the snapshot reader looks for
      static constexpr const char* kKeys[] = {"device_traces", "segments", "action", "addr", "size", "stream",
                                              "time_us", "alloc", "free_requested", "free_completed",
                                              "segment_alloc", "segment_map", "blocks", "total_size", "address",
                                              "state", "active_allocated", "requested_size", "device", "frames"};
      const char* k = kKeys[any(std::size(kKeys))];
      op = {0x8c, static_cast<std::uint8_t>(std::strlen(k))};
      op.insert(op.end(), k, k + std::strlen(k));
      break;
    }
    case 10: op = {0x4a}; put_le(&op, rng(), 4); break;                         // BININT
    case 11: op = {0x8a, 8}; put_le(&op, rng() >> any(64), 8); break;          // LONG1 of 8 bytes
    case 12: op = {static_cast<std::uint8_t>(0x85 + any(3))}; break;            // TUPLE1..3
    case 13: op = {0x4e}; break;                                                // NONE
    case 14: op = {0x58}; put_le(&op, any(2) ? rng() : 1u << 30, 4); break;     // BINUNICODE, length beyond the input
    default: op = {static_cast<std::uint8_t>(any(2) ? 0x30 : 0x32)}; break;     // POP / DUP
  }
  return op;
}

// An integer opcode's argument replaced with an edge value; false when token [a, b) is no integer opcode.
bool edge_integer(Bytes* out, const Bytes& in, std::size_t a, std::size_t b, std::mt19937_64& rng) {
  const std::uint8_t code = in[a];
  if (code != 0x4a && code != 0x4b && code != 0x4d && code != 0x8a && code != 0x8b) return false;
  static constexpr std::uint64_t kEdges[] = {0, ~std::uint64_t{0}, std::uint64_t{1} << 31, std::uint64_t{1} << 63,
                                             (std::uint64_t{1} << 63) - 1, 1u << 30, 512, 1};
  Bytes op;
  if (rng() % 4 == 0) {  // a 300-byte LONG4
    op = {0x8b};
    put_le(&op, 300, 4);
    for (int i = 0; i < 300; ++i) op.push_back(i == 299 ? 0x01 : 0xff);
  } else {
    const std::uint64_t v = kEdges[rng() % std::size(kEdges)];
    op = {0x8a, 9};
    put_le(&op, v, 8);
    op.push_back(0);  // sign byte: non-negative
  }
  out->insert(out->end(), in.begin(), in.begin() + static_cast<std::ptrdiff_t>(a));
  out->insert(out->end(), op.begin(), op.end());
  out->insert(out->end(), in.begin() + static_cast<std::ptrdiff_t>(b), in.end());
  return true;
}

std::size_t emit(const Bytes& out, std::uint8_t* data, std::size_t max_size) {
  const std::size_t n = std::min(out.size(), max_size);
  if (n != 0) std::memcpy(data, out.data(), n);  // an empty vector's data() may be null
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return gmlake::fuzz::fuzz_snapshot_pickle(data, size);
}

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size,
                                               unsigned int seed) {
  std::mt19937_64 rng(seed);
  if (size == 0 || rng() % 4 == 0) return LLVMFuzzerMutate(data, size, max_size);
  const Bytes in(data, data + size);
  const std::vector<std::size_t> at = tokens(in);
  const std::size_t count = at.size() - 1;
  const std::size_t t = rng() % count;
  const std::size_t a = at[t], b = at[t + 1];
  std::size_t memo_hint = 0;
  for (std::size_t i = 0; i + 1 < at.size(); ++i) memo_hint += in[at[i]] == 0x94 || in[at[i]] == 0x71;
  Bytes out;
  switch (rng() % 5) {
    case 0:  // delete token t
      out.insert(out.end(), in.begin(), in.begin() + static_cast<std::ptrdiff_t>(a));
      out.insert(out.end(), in.begin() + static_cast<std::ptrdiff_t>(b), in.end());
      break;
    case 1: {  // duplicate a run of tokens t .. t+k up to 64 times
      const std::size_t last = std::min(count, t + 1 + rng() % 4);
      const std::size_t times = 1 + rng() % 64;
      out.insert(out.end(), in.begin(), in.begin() + static_cast<std::ptrdiff_t>(at[last]));
      for (std::size_t i = 0; i < times && out.size() < max_size; ++i) {
        out.insert(out.end(), in.begin() + static_cast<std::ptrdiff_t>(a), in.begin() + static_cast<std::ptrdiff_t>(at[last]));
      }
      out.insert(out.end(), in.begin() + static_cast<std::ptrdiff_t>(at[last]), in.end());
      break;
    }
    case 2: {  // move token t before token u
      const std::size_t u = rng() % count;
      const Bytes tok(in.begin() + static_cast<std::ptrdiff_t>(a), in.begin() + static_cast<std::ptrdiff_t>(b));
      Bytes rest(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(a));
      rest.insert(rest.end(), in.begin() + static_cast<std::ptrdiff_t>(b), in.end());
      const std::size_t where = std::min(at[u] <= a ? at[u] : at[u] - (b - a), rest.size());
      out.assign(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(where));
      out.insert(out.end(), tok.begin(), tok.end());
      out.insert(out.end(), rest.begin() + static_cast<std::ptrdiff_t>(where), rest.end());
      break;
    }
    case 3:
      if (edge_integer(&out, in, a, b, rng)) break;
      [[fallthrough]];
    default: {  // insert a new opcode before token t
      const Bytes op = random_op(rng, memo_hint);
      out.insert(out.end(), in.begin(), in.begin() + static_cast<std::ptrdiff_t>(a));
      out.insert(out.end(), op.begin(), op.end());
      out.insert(out.end(), in.begin() + static_cast<std::ptrdiff_t>(a), in.end());
      break;
    }
  }
  if (out.empty()) return LLVMFuzzerMutate(data, size, max_size);
  return emit(out, data, max_size);
}

extern "C" std::size_t LLVMFuzzerCustomCrossOver(const std::uint8_t* data1, std::size_t size1,
                                                 const std::uint8_t* data2, std::size_t size2, std::uint8_t* out,
                                                 std::size_t max_out_size, unsigned int seed) {
  std::mt19937_64 rng(seed);
  const Bytes a(data1, data1 + size1), b(data2, data2 + size2);
  const std::vector<std::size_t> ta = tokens(a), tb = tokens(b);
  // a's opcodes up to a boundary, then b's from a boundary: structure from both.
  const std::size_t cut_a = ta[rng() % ta.size()], cut_b = tb[rng() % tb.size()];
  Bytes c(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(cut_a));
  c.insert(c.end(), b.begin() + static_cast<std::ptrdiff_t>(cut_b), b.end());
  return emit(c, out, max_out_size);
}
