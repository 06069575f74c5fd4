// The IPC handle's encoding (include/gmlake/ipc.h): what encode_ipc_handle writes decodes to the same fields,
// and every handle it could not have written (a byte changed anywhere, cut short at any length, another
// allocator's handle, fields that do not add up) is refused with Error(kInvalidArgument) naming why.
#include <gtest/gtest.h>

#include <string>

#include "expect_error.h"
#include "gmlake/error.h"
#include "gmlake/ipc.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

IpcHandle sample() {
  IpcHandle h;
  h.backend = "host";
  h.pid = 4242;
  h.start_time_ticks = 123456789;
  h.block_offset_bytes = 512 * kKiB;
  h.block_size_bytes = 3 * kMiB;
  h.chunks = {IpcChunkRef{7, 0, 2 * kMiB}, IpcChunkRef{7, 6 * kMiB, 2 * kMiB}};
  return h;
}

TEST(IpcHandle, DecodesToWhatWasEncoded) {
  const IpcHandle h = sample();
  const IpcHandle back = decode_ipc_handle(encode_ipc_handle(h));
  EXPECT_EQ(back.backend, h.backend);
  EXPECT_EQ(back.pid, h.pid);
  EXPECT_EQ(back.start_time_ticks, h.start_time_ticks);
  EXPECT_EQ(back.block_offset_bytes, h.block_offset_bytes);
  EXPECT_EQ(back.block_size_bytes, h.block_size_bytes);
  ASSERT_EQ(back.chunks.size(), 2u);
  EXPECT_EQ(back.chunks[1].fd, 7);
  EXPECT_EQ(back.chunks[1].fd_offset_bytes, 6 * kMiB);
  EXPECT_EQ(back.chunks[1].size_bytes, 2 * kMiB);
}

TEST(IpcHandle, EveryChangedByteIsRefused) {
  const std::string bytes = encode_ipc_handle(sample());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x40);
    test::expect_error([&] { decode_ipc_handle(bad); }, ErrorCode::kInvalidArgument, "gmlake ipc:");
  }
}

TEST(IpcHandle, EveryTruncationIsRefused) {
  const std::string bytes = encode_ipc_handle(sample());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    test::expect_error([&] { decode_ipc_handle(bytes.substr(0, n)); }, ErrorCode::kInvalidArgument, "gmlake ipc:");
  }
  test::expect_error([&] { decode_ipc_handle(bytes + "x"); }, ErrorCode::kInvalidArgument, "checksum");
}

TEST(IpcHandle, AnotherAllocatorsHandleIsNamedSo) {
  // PyTorch's native handles start with a type byte ('c': cudaIpcMemHandle_t, 'e': expandable segment).
  test::expect_error([&] { decode_ipc_handle(std::string("c") + std::string(64, '\1')); },
                     ErrorCode::kInvalidArgument, "not a gmlake IPC handle");
}

TEST(IpcHandle, FieldsThatDoNotAddUpAreRefused) {
  IpcHandle h = sample();
  h.block_size_bytes = 4 * kMiB;  // 512 KiB + 4 MiB > the chunks' 4 MiB
  test::expect_error([&] { decode_ipc_handle(encode_ipc_handle(h)); }, ErrorCode::kInvalidArgument,
                     "does not lie inside its chunks");
  h = sample();
  h.chunks.clear();
  test::expect_error([&] { decode_ipc_handle(encode_ipc_handle(h)); }, ErrorCode::kInvalidArgument, "0 chunks");
  h = sample();
  h.chunks[0].size_bytes = 0;
  test::expect_error([&] { decode_ipc_handle(encode_ipc_handle(h)); }, ErrorCode::kInvalidArgument, "chunk 0");
  h = sample();
  h.pid = 0;
  test::expect_error([&] { decode_ipc_handle(encode_ipc_handle(h)); }, ErrorCode::kInvalidArgument, "process id");
}

}  // namespace
}  // namespace gmlake
