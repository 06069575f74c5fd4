// A growable buffer: append data without ever copying it or changing its address. Only the virtual address
// range is reserved up front; physical memory is mapped as the buffer grows.
//
// Build and run: cmake --build build && build/examples/example_growable_buffer
#include "gmlake/classic/growable_buffer.h"

#include <cstdio>
#include <cstring>

#include "gmlake/host_backend.h"
#include "gmlake/units.h"

int main() {
  gmlake::HostBackend backend;
  // Up to 64 GiB of address space (costs nothing until mapped), growing 2 MiB at a time.
  gmlake::classic::GrowableBuffer log(backend, {.max_bytes = 64 * gmlake::kGiB});
  char* const start = static_cast<char*>(log.data());

  // Append 100 records of 100 KiB: each resize maps only the chunks it needs; nothing moves.
  constexpr std::uint64_t kRecordBytes = 100 * gmlake::kKiB;
  for (int i = 0; i < 100; ++i) {
    const std::uint64_t at = log.size_bytes();
    log.resize(at + kRecordBytes);
    std::memset(start + at, 'a' + i % 26, kRecordBytes);
  }
  std::printf("size %llu bytes, mapped %llu bytes, address unchanged: %s\n",
              static_cast<unsigned long long>(log.size_bytes()), static_cast<unsigned long long>(log.capacity_bytes()),
              log.data() == start ? "yes" : "no");

  // Drop the second half and give its memory back (whole chunks past the new size are unmapped).
  log.resize(log.size_bytes() / 2);
  log.shrink_to_fit();
  std::printf("after shrinking: size %llu bytes, mapped %llu bytes, first byte '%c'\n",
              static_cast<unsigned long long>(log.size_bytes()), static_cast<unsigned long long>(log.capacity_bytes()),
              start[0]);
  return log.data() == start && start[0] == 'a' ? 0 : 1;
}
