// A valid snapshot whose frames hold integers wider than 64 bits (a real one had a line
// number of 2^64-1) is read; only the fields whose exact value the replay needs (addresses, sizes, devices,
// streams) must fit 64 bits, and refusing one names the field.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "expect_error.h"
#include "gmlake/error.h"
#include "gmlake/trace.h"
#include "pickle_builder.h"

namespace gmlake {
namespace {

using test::PickleBuilder;
namespace op = test::op;

// LONG1 of 2^64-1 (9 bytes: eight 0xff and a 0 sign byte), as Python writes it.
PickleBuilder& long1_2pow64_minus1(PickleBuilder& p) {
  p.raw(op::kLong1).raw(9);
  for (int i = 0; i < 8; ++i) p.raw(0xff);
  return p.raw(0);
}

// LONG4 of a 100-byte positive integer.
PickleBuilder& long4_huge(PickleBuilder& p) {
  p.raw(op::kLong4).le(100, 4);
  for (int i = 0; i < 99; ++i) p.raw(0x5a);
  return p.raw(0x01);
}

enum class Wide { kNone, kFrameLine, kAddr, kSize, kStream, kTime };

// A snapshot of one alloc whose frame holds wide integers; `where` puts one in a field the replay reads.
std::vector<std::uint8_t> snapshot(Wide where) {
  PickleBuilder p;
  p.proto().empty_dict().memoize().mark();
  p.str("device_traces").empty_list().mark().empty_list().mark();
  p.empty_dict().mark().key_str("action", "alloc");
  p.str("addr");
  if (where == Wide::kAddr) long1_2pow64_minus1(p); else p.integer(1 << 20);
  p.str("size");
  if (where == Wide::kSize) long4_huge(p); else p.integer(512);
  p.str("stream");
  if (where == Wide::kStream) long4_huge(p); else p.integer(0);
  p.str("time_us");
  if (where == Wide::kTime) long4_huge(p); else p.integer(7);
  p.str("frames").empty_list().mark();
  p.empty_dict().mark().key_str("filename", "train.py").str("line");
  long1_2pow64_minus1(p);
  p.str("name").str("step").str("column");
  long4_huge(p);
  p.str("offset").raw(0x4c).text("-123456789012345678901234567890L\n");  // LONG, protocol-0 text
  p.setitems().appends();
  p.setitems();  // the event
  p.appends().appends();
  p.setitems().stop();
  return p.bytes();
}

TEST(SnapshotWideIntTest, AFrameLineOf2Pow64Minus1AndOtherWideFieldsAreRead) {
  const Trace t = parse_snapshot_pickle(snapshot(Wide::kNone), "wide");
  ASSERT_EQ(t.devices.size(), 1u);
  ASSERT_EQ(t.devices[0].events.size(), 1u);
  EXPECT_EQ(t.devices[0].events[0].addr, 1u << 20);
  EXPECT_EQ(t.devices[0].events[0].size_bytes, 512u);
}

TEST(SnapshotWideIntTest, AWideTimeIsTakenAsTheNearest64BitValue) {
  const Trace t = parse_snapshot_pickle(snapshot(Wide::kTime), "wide");
  ASSERT_EQ(t.devices.size(), 1u);
  EXPECT_EQ(t.devices[0].events[0].time_us, INT64_MAX);
}

TEST(SnapshotWideIntTest, AddressesSizesAndStreamsMustFit64Bits) {
  test::expect_error([] { parse_snapshot_pickle(snapshot(Wide::kAddr), "wide"); }, ErrorCode::kTrace,
                     "device_traces[0][0]: addr is 2^63 or more");
  test::expect_error([] { parse_snapshot_pickle(snapshot(Wide::kSize), "wide"); }, ErrorCode::kTrace,
                     "size is 2^63 or more");
  test::expect_error([] { parse_snapshot_pickle(snapshot(Wide::kStream), "wide"); }, ErrorCode::kTrace,
                     "stream does not fit 64 bits");
}

}  // namespace
}  // namespace gmlake
