// What the host backend promises beyond the conformance suite (backend_test.cpp): real memory with the CUDA
// VMM semantics (aliasing, data living in the chunk, released memory given back), touched only by the caller.
#include "gmlake/host_backend.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gmlake/error.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

constexpr std::uint64_t kGranule = kPageBytes;

char* bytes_at(std::uintptr_t addr) { return reinterpret_cast<char*>(addr); }
void poke(std::uintptr_t addr) { *reinterpret_cast<volatile char*>(addr) = 1; }

// The resident set size of this process, from /proc/self/statm.
std::uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size_pages = 0, resident_pages = 0;
  statm >> size_pages >> resident_pages;
  return resident_pages * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

// The line of /proc/self/maps for the mapping that starts at `addr`, if any.
std::optional<std::string> maps_line_at(std::uintptr_t addr) {
  std::ifstream maps("/proc/self/maps");
  std::ostringstream prefix;
  prefix << std::hex << addr << '-';
  for (std::string line; std::getline(maps, line);) {
    if (line.rfind(prefix.str(), 0) == 0) return line;
  }
  return std::nullopt;
}

// The permissions ("rw-s", "---p") of the mapping of this process that covers `addr`, if any.
std::optional<std::string> perms_at(std::uintptr_t addr) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    std::uintptr_t start = 0, end = 0;
    char dash = 0;
    std::string perms;
    std::istringstream(line) >> std::hex >> start >> dash >> end >> perms;
    if (start <= addr && addr < end) return perms;
  }
  return std::nullopt;
}

// The memfd offset that the mapping starting at `addr` maps (the third field of its maps line).
std::uint64_t memfd_offset_at(std::uintptr_t addr) {
  const std::optional<std::string> line = maps_line_at(addr);
  EXPECT_TRUE(line.has_value()) << "nothing mapped at " << addr;
  if (!line) return 0;
  EXPECT_NE(line->find("memfd:"), std::string::npos) << *line;
  std::istringstream fields(*line);
  std::string range, perms;
  std::uint64_t offset = 0;
  fields >> range >> perms >> std::hex >> offset;
  return offset;
}

TEST(HostBackendTest, IsHostAccessibleAndRejectsAGranularityBelowThePageSize) {
  HostBackend b;
  EXPECT_TRUE(b.host_accessible());
  EXPECT_EQ(b.name(), "host");
  EXPECT_EQ(b.granularity_bytes(), kPageBytes);
  try {
    HostBackend small(static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE)) / 2);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

TEST(HostBackendTest, AChunkMappedTwiceShowsTheSameBytesAtBothAddresses) {
  HostBackend b;
  const std::uintptr_t addr = b.reserve(2 * kGranule);
  const ChunkHandle chunk = b.create(kGranule);
  const std::uintptr_t first = addr, second = addr + kGranule;
  b.map(first, kGranule, chunk);
  b.map(second, kGranule, chunk);
  b.set_access(first, 2 * kGranule);
  std::strcpy(bytes_at(first) + kGranule / 2, "written through the first view");
  EXPECT_STREQ(bytes_at(second) + kGranule / 2, "written through the first view");
  bytes_at(second)[kGranule - 1] = 'z';
  EXPECT_EQ(bytes_at(first)[kGranule - 1], 'z');
  b.unmap(first, kGranule);
  EXPECT_STREQ(bytes_at(second) + kGranule / 2, "written through the first view");  // the other view lives on
  b.unmap(second, kGranule);
  b.release(chunk);
  b.address_free(addr, 2 * kGranule);
}

TEST(HostBackendTest, DataLivesInTheChunkAcrossUnmapAndRemapElsewhere) {
  HostBackend b;
  const std::uintptr_t here = b.reserve(kGranule);
  const std::uintptr_t there = b.reserve(3 * kGranule);
  const ChunkHandle chunk = b.create(kGranule);
  b.map(here, kGranule, chunk);
  b.set_access(here, kGranule);
  std::strcpy(bytes_at(here), "kept by the chunk");
  b.unmap(here, kGranule);
  b.map(there + 2 * kGranule, kGranule, chunk);
  b.set_access(there + 2 * kGranule, kGranule);
  EXPECT_STREQ(bytes_at(there + 2 * kGranule), "kept by the chunk");
  b.unmap(there + 2 * kGranule, kGranule);
  b.release(chunk);
  b.address_free(here, kGranule);
  b.address_free(there, 3 * kGranule);
}

TEST(HostBackendTest, AReleasedChunksMemoryIsReusedAndReadsBackAsZeroes) {
  HostBackend b;
  const std::uintptr_t addr = b.reserve(kGranule);
  const ChunkHandle old_chunk = b.create(kGranule);
  b.map(addr, kGranule, old_chunk);
  const std::uint64_t old_offset = memfd_offset_at(addr);
  b.set_access(addr, kGranule);
  std::memset(bytes_at(addr), 0x5a, kGranule);
  b.unmap(addr, kGranule);
  b.release(old_chunk);

  const ChunkHandle new_chunk = b.create(kGranule);
  EXPECT_NE(new_chunk.value, old_chunk.value);
  b.map(addr, kGranule, new_chunk);
  EXPECT_EQ(memfd_offset_at(addr), old_offset);  // the same range of the memfd
  b.set_access(addr, kGranule);
  std::uint64_t nonzero_bytes = 0;
  for (std::uint64_t i = 0; i < kGranule; ++i) nonzero_bytes += bytes_at(addr)[i] != 0;
  EXPECT_EQ(nonzero_bytes, 0u);  // the hole was punched: the old bytes are gone
  b.unmap(addr, kGranule);
  b.release(new_chunk);
  b.address_free(addr, kGranule);
}

TEST(HostBackendTest, ReservingATebibyteAndMappingChunksTouchesNothing) {
  HostBackend b;
  const std::uint64_t before_bytes = resident_bytes();
  const std::uintptr_t addr = b.reserve(kTiB);
  constexpr int kChunks = 64;  // 128 MiB mapped with access, never touched
  ChunkHandle chunks[kChunks];
  for (int i = 0; i < kChunks; ++i) {
    chunks[i] = b.create(kGranule);
    b.map(addr + i * kGranule, kGranule, chunks[i]);
  }
  b.set_access(addr, kChunks * kGranule);
  EXPECT_LT(resident_bytes(), before_bytes + 4 * kMiB);
  b.unmap(addr, kChunks * kGranule);
  for (ChunkHandle c : chunks) b.release(c);
  b.address_free(addr, kTiB);
}

TEST(HostBackendTest, ReservingMoreAddressSpaceThanThereIsIsAnOutOfMemoryAndChangesNothing) {
  // mmap's ENOMEM: as cuMemAddressReserve's CUDA_ERROR_OUT_OF_MEMORY, an error the allocator recovers from by
  // giving address space back (other mmap failures stay BackendError naming the call).
  HostBackend b;
  const std::uint64_t too_big_bytes = std::uint64_t{1} << 62;  // more than any x86-64 or arm64 address space
  try {
    b.reserve(too_big_bytes);
    ADD_FAILURE() << "no error";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
  }
  EXPECT_EQ(b.live_reservations(), 0u);
  EXPECT_EQ(b.counters()[BackendCall::kReserve], 1u);
  const std::uintptr_t addr = b.reserve(kGranule);
  b.address_free(addr, kGranule);
}

TEST(HostBackendTest, TheDestructorFreesEverythingStillLive) {
  std::uintptr_t reserved = 0, mapped = 0;
  {
    HostBackend b;
    reserved = b.reserve(4 * kGranule);
    mapped = reserved + kGranule;
    const ChunkHandle chunk = b.create(kGranule);
    b.map(mapped, kGranule, chunk);
    b.set_access(mapped, kGranule);
    bytes_at(mapped)[0] = 1;
    EXPECT_TRUE(maps_line_at(mapped).has_value());
    EXPECT_TRUE(perms_at(reserved).has_value());
  }
  EXPECT_FALSE(perms_at(reserved).has_value());
  EXPECT_FALSE(perms_at(mapped).has_value());
}

TEST(HostBackendTest, UnmapPutsTheNoAccessPlaceholderBackInsteadOfLeavingAHole) {
  HostBackend b;
  const std::uintptr_t addr = b.reserve(3 * kGranule);
  EXPECT_EQ(perms_at(addr + kGranule), "---p");
  const ChunkHandle chunk = b.create(kGranule);
  b.map(addr + kGranule, kGranule, chunk);
  EXPECT_EQ(perms_at(addr + kGranule), "---s");  // shared memfd mapping, no access yet
  b.set_access(addr + kGranule, kGranule);
  EXPECT_EQ(perms_at(addr + kGranule), "rw-s");
  b.unmap(addr + kGranule, kGranule);
  EXPECT_EQ(perms_at(addr + kGranule), "---p");
  b.release(chunk);
  b.address_free(addr, 3 * kGranule);
  EXPECT_FALSE(perms_at(addr + kGranule).has_value());
}

TEST(HostBackendDeathTest, TouchingMemoryWithoutAccessFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  HostBackend b;
  const std::uintptr_t addr = b.reserve(kGranule);
  const ChunkHandle chunk = b.create(kGranule);
  b.map(addr, kGranule, chunk);
  EXPECT_DEATH(poke(addr), "");  // mapped, no set_access yet
  b.set_access(addr, kGranule);
  poke(addr);
  b.unmap(addr, kGranule);
  EXPECT_DEATH(poke(addr), "");  // the placeholder is back
  b.release(chunk);
  b.address_free(addr, kGranule);
}

TEST(HostBackendTest, NodesEachHoldTheirOwnLimitAndTheirChunksHoldRealBytes) {
  HostBackend b(kPageBytes, std::vector<std::uint64_t>{kPageBytes, 2 * kPageBytes});
  EXPECT_EQ(b.device_count(), 2u);
  EXPECT_EQ(b.physical_limit_bytes(), kPageBytes);
  const ChunkHandle own = b.create(kPageBytes);
  EXPECT_THROW(b.create(kPageBytes), OutOfMemoryError) << "node 0 is full";
  const ChunkHandle peer = b.create(2 * kPageBytes, 1);
  EXPECT_THROW(b.create(kPageBytes, 1), OutOfMemoryError) << "node 1 is full";
  EXPECT_EQ(b.chunk_device(peer), 1);
  EXPECT_EQ(b.live_chunk_bytes(1), 2 * kPageBytes);
  const std::uintptr_t at = b.reserve(2 * kPageBytes);
  b.map(at, 2 * kPageBytes, peer);
  b.set_access(at, 2 * kPageBytes);
  auto* bytes = reinterpret_cast<unsigned char*>(at);
  bytes[0] = 0x42;
  bytes[2 * kPageBytes - 1] = 0x24;
  EXPECT_EQ(bytes[0] + bytes[2 * kPageBytes - 1], 0x66);
  b.unmap(at, 2 * kPageBytes);
  b.address_free(at, 2 * kPageBytes);
  b.release(peer);
  b.release(own);
  EXPECT_EQ(b.live_chunk_bytes(1), 0u);
  EXPECT_THROW(HostBackend(kPageBytes, std::vector<std::uint64_t>{}), Error);
}

TEST(HostBackendTest, ScrubZeroesAnUnmappedChunkAndRefusesWhatItMayNotTouch) {
  HostBackend backend(kGranule);
  const ChunkHandle chunk = backend.create(2 * kGranule);
  const std::uintptr_t addr = backend.reserve(2 * kGranule);
  backend.map(addr, 2 * kGranule, chunk);
  backend.set_access(addr, 2 * kGranule);
  std::memset(bytes_at(addr), 0x77, 2 * kGranule);
  try {
    backend.scrub(chunk);
    ADD_FAILURE() << "a mapped chunk's bytes are in use";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("mapped"), std::string::npos) << e.what();
  }
  EXPECT_EQ(bytes_at(addr)[kGranule], 0x77) << "a refused scrub changed nothing";
  backend.unmap(addr, 2 * kGranule);
  backend.scrub(chunk);
  backend.map(addr, 2 * kGranule, chunk);
  backend.set_access(addr, 2 * kGranule);
  std::uint64_t non_zero = 0;
  for (std::uint64_t i = 0; i < 2 * kGranule; ++i) non_zero += bytes_at(addr)[i] != 0 ? 1 : 0;
  EXPECT_EQ(non_zero, 0u);
  backend.unmap(addr, 2 * kGranule);
  backend.address_free(addr, 2 * kGranule);
  // An imported chunk is another process's memory: only its exporter scrubs it.
  const ExportedChunk exported = backend.export_chunk(chunk);
  HostBackend importer(kGranule);
  const ChunkHandle imported = importer.import_chunk(::dup(exported.fd), exported.fd_offset_bytes, 2 * kGranule);
  EXPECT_THROW(importer.scrub(imported), Error);
  importer.release(imported);
  backend.release(chunk);
  EXPECT_THROW(backend.scrub(chunk), Error) << "not live";
  EXPECT_EQ(backend.live_chunks(), 0u);
}

TEST(HostBackendTest, ABackendWithoutBytesCannotScrub) {
  SimBackend sim(kGranule);
  const ChunkHandle chunk = sim.create(kGranule);
  try {
    sim.scrub(chunk);
    ADD_FAILURE() << "sim has no bytes to zero and lends nothing";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("cannot scrub"), std::string::npos) << e.what();
  }
  sim.release(chunk);
}

TEST(HostBackendTest, AScrubbedChunkIsExportedAsAFileOfItsOwnThatNoOneCanResize) {
  HostBackend backend(kGranule);
  const ChunkHandle secret = backend.create(kGranule);  // another chunk, with bytes an importer must not reach
  const std::uintptr_t at = backend.reserve(kGranule);
  backend.map(at, kGranule, secret);
  backend.set_access(at, kGranule);
  std::memset(bytes_at(at), 0x5E, kGranule);
  const ChunkHandle lent = backend.create(2 * kGranule);
  const ExportedChunk shared = backend.export_chunk(lent);
  EXPECT_NE(shared.fd_offset_bytes + 1, 0u);
  backend.scrub(lent);
  const ExportedChunk own = backend.export_chunk(lent);
  EXPECT_NE(own.fd, shared.fd) << "not the shared memfd any more";
  EXPECT_EQ(own.fd_offset_bytes, 0u);
  struct stat file {};
  ASSERT_EQ(::fstat(own.fd, &file), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(file.st_size), 2 * kGranule) << "the chunk and nothing else";
  EXPECT_NE(::ftruncate(own.fd, 0), 0) << "sealed: its size cannot change";
  EXPECT_NE(::ftruncate(shared.fd, 0), 0) << "the shared memfd cannot shrink either";
  // The chunk still works here, from its own file; its bytes are the importer's too.
  const std::uintptr_t addr = backend.reserve(2 * kGranule);
  backend.map(addr, 2 * kGranule, lent);
  backend.set_access(addr, 2 * kGranule);
  EXPECT_EQ(bytes_at(addr)[0], 0);
  bytes_at(addr)[1] = 7;
  HostBackend importer(kGranule);
  const ChunkHandle imported = importer.import_chunk(::dup(own.fd), 0, 2 * kGranule);
  const std::uintptr_t there = importer.reserve(2 * kGranule);
  importer.map(there, 2 * kGranule, imported);
  importer.set_access(there, 2 * kGranule);
  EXPECT_EQ(bytes_at(there)[1], 7);
  EXPECT_THROW(importer.import_chunk(::dup(own.fd), 2 * kGranule, kGranule), Error) << "past its end";
  importer.unmap(there, 2 * kGranule);
  importer.release(imported);
  importer.address_free(there, 2 * kGranule);
  backend.unmap(addr, 2 * kGranule);
  backend.address_free(addr, 2 * kGranule);
  backend.release(lent);
  EXPECT_EQ(bytes_at(at)[0], 0x5E) << "the other chunk kept its bytes";
  backend.unmap(at, kGranule);
  backend.address_free(at, kGranule);
  backend.release(secret);
  EXPECT_EQ(backend.live_chunks(), 0u);
}

TEST(HostBackendTest, ImportRefusesAFileItsOwnerCouldShrinkUnderTheMappings) {
  HostBackend importer(kGranule);
  const int unsealed = ::memfd_create("host-backend-test", MFD_CLOEXEC);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(::ftruncate(unsealed, 4 * kGranule), 0);
  try {
    importer.import_chunk(unsealed, 0, kGranule);  // takes the descriptor, closes it
    ADD_FAILURE() << "imported a file its owner may truncate: a later read of the mapping is SIGBUS";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("F_SEAL_SHRINK"), std::string::npos) << e.what();
  }
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  EXPECT_THROW(importer.import_chunk(pipe_fds[0], 0, kGranule), Error) << "not a file";
  ::close(pipe_fds[1]);
  EXPECT_EQ(importer.live_chunks(), 0u);
}

}  // namespace
}  // namespace gmlake
