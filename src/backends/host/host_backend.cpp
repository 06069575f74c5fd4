// The host backend: see host_backend.h for which system call plays which CUDA VMM call. Each do_* makes its
// system call(s) and keeps its own small tables (chunk offsets, released offsets, reservations) in step,
// undoing the system call when a table update fails.
#include "gmlake/host_backend.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <limits>
#include <string>
#include <system_error>

#include "gmlake/error.h"

namespace gmlake {
namespace {

constexpr int kPlaceholderFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
constexpr std::uint64_t kMaxFileBytes = static_cast<std::uint64_t>(std::numeric_limits<off_t>::max());

std::string os_error_text(int error_number) {
  std::string text = std::generic_category().message(error_number);
  if (error_number == ENOMEM) text += " (out of memory, or past vm.max_map_count VMAs: see host_backend.h)";
  return text;
}

[[noreturn]] void throw_os_error(const char* call, int error_number) {
  throw BackendError(call, os_error_text(error_number));
}

void* as_pointer(std::uintptr_t addr) { return reinterpret_cast<void*>(addr); }

std::uint64_t page_bytes() { return static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE)); }

// Puts a no-access, nothing-committed placeholder over [addr, addr+size_bytes). Returns errno, 0 on success.
int place_placeholder(std::uintptr_t addr, std::uint64_t size_bytes) {
  void* p = mmap(as_pointer(addr), size_bytes, PROT_NONE, kPlaceholderFlags | MAP_FIXED, -1, 0);
  return p == MAP_FAILED ? errno : 0;
}

// Maps a placeholder of `size_bytes` whose start is aligned to `alignment_bytes`. mmap aligns to pages only:
// map alignment - page more, then trim the unaligned head and the tail. Throws BackendError, leaving nothing.
std::uintptr_t map_aligned_placeholder(std::uint64_t size_bytes, std::uint64_t alignment_bytes) {
  const std::uint64_t slack_bytes = alignment_bytes - page_bytes();
  if (size_bytes > std::numeric_limits<std::size_t>::max() - slack_bytes) throw_os_error("mmap", ENOMEM);
  const std::uint64_t mapped_bytes = size_bytes + slack_bytes;
  void* p = mmap(nullptr, mapped_bytes, PROT_NONE, kPlaceholderFlags, -1, 0);
  if (p == MAP_FAILED && errno == ENOMEM) {
    // No address space left (cuMemAddressReserve answers CUDA_ERROR_OUT_OF_MEMORY alike): an out-of-memory,
    // which the caller can recover from by giving address space back.
    throw OutOfMemoryError(size_bytes, 0, 0, 0, "host: no virtual address space left for a reservation");
  }
  if (p == MAP_FAILED) throw_os_error("mmap", errno);
  const auto raw = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t addr = round_up(raw, alignment_bytes);
  const std::uint64_t head_bytes = addr - raw;
  const std::uint64_t tail_bytes = mapped_bytes - head_bytes - size_bytes;
  // On failure, unmap only what is still ours: a trimmed piece may already belong to another thread's mmap.
  if (head_bytes != 0 && munmap(p, head_bytes) != 0) {
    const int error_number = errno;
    munmap(p, mapped_bytes);
    throw_os_error("munmap", error_number);
  }
  if (tail_bytes != 0 && munmap(as_pointer(addr + size_bytes), tail_bytes) != 0) {
    const int error_number = errno;
    munmap(as_pointer(addr), size_bytes + tail_bytes);
    throw_os_error("munmap", error_number);
  }
  return addr;
}

// A memfd that takes seals; sealed against shrinking at once when `seal_shrink` (else the caller seals it once it
// has its size). An importer maps a sealed file without fearing that the exporter cuts it under its mappings (a
// read past the end of a file is SIGBUS).
int open_memfd(const char* name, bool seal_shrink) {
  const int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) throw_os_error("memfd_create", errno);
  if (seal_shrink && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    const int error_number = errno;
    close(fd);
    throw_os_error("fcntl", error_number);
  }
  return fd;
}

std::uint64_t checked_granularity(std::uint64_t granularity_bytes) {
  if (granularity_bytes % page_bytes() != 0) {
    throw Error(ErrorCode::kInvalidArgument, "HostBackend: granularity_bytes " + std::to_string(granularity_bytes) +
                                                 " is not a multiple of the page size " + std::to_string(page_bytes()));
  }
  return granularity_bytes;
}

}  // namespace

HostBackend::HostBackend(std::uint64_t granularity_bytes, std::uint64_t physical_limit_bytes)
    : HostBackend(granularity_bytes, std::vector<std::uint64_t>{physical_limit_bytes}) {}

HostBackend::HostBackend(std::uint64_t granularity_bytes, std::vector<std::uint64_t> node_limit_bytes)
    : Backend(checked_granularity(granularity_bytes)), memfd_(-1), node_limit_bytes_(std::move(node_limit_bytes)) {
  if (node_limit_bytes_.empty()) throw Error(ErrorCode::kInvalidArgument, "HostBackend: at least one node is needed");
  memfd_ = open_memfd("gmlake-host-backend", true);
}

HostBackend::~HostBackend() {
  for (const auto& [addr, size_bytes] : reservations_) munmap(as_pointer(addr), size_bytes);
  for (const auto& [handle, imported] : imported_) close(imported.fd);
  for (const auto& [handle, fd] : own_files_) close(fd);
  close(memfd_);
}

std::uintptr_t HostBackend::do_reserve(std::uint64_t size_bytes) {
  const std::uintptr_t addr = map_aligned_placeholder(size_bytes, granularity_bytes());
  try {
    reservations_.emplace(addr, size_bytes);
  } catch (...) {
    munmap(as_pointer(addr), size_bytes);
    throw;
  }
  return addr;
}

void HostBackend::do_address_free(std::uintptr_t addr, std::uint64_t size_bytes) {
  if (munmap(as_pointer(addr), size_bytes) != 0) throw_os_error("munmap", errno);
  reservations_.erase(addr);
}

// A released range of exactly `size_bytes` when there is one, else a new range at the end of the memfd.
std::uint64_t HostBackend::take_offset(std::uint64_t size_bytes) {
  const auto released = free_offsets_.find(size_bytes);
  if (released != free_offsets_.end() && !released->second.empty()) {
    const std::uint64_t offset = released->second.back();
    released->second.pop_back();
    return offset;
  }
  const std::uint64_t reserved_bytes = live_chunk_bytes();
  if (size_bytes > kMaxFileBytes - memfd_bytes_) {
    throw OutOfMemoryError(size_bytes, reserved_bytes, 0, physical_limit_bytes(), "host backend memfd is full");
  }
  if (ftruncate(memfd_, static_cast<off_t>(memfd_bytes_ + size_bytes)) != 0) {
    const int error_number = errno;
    if (error_number == ENOMEM || error_number == ENOSPC) {
      throw OutOfMemoryError(size_bytes, reserved_bytes, 0, physical_limit_bytes(),
                             "ftruncate: " + std::generic_category().message(error_number));
    }
    throw_os_error("ftruncate", error_number);
  }
  const std::uint64_t offset = memfd_bytes_;
  memfd_bytes_ += size_bytes;
  return offset;
}

ChunkHandle HostBackend::do_create(std::uint64_t size_bytes) { return do_create_on(size_bytes, 0); }

ChunkHandle HostBackend::do_create_on(std::uint64_t size_bytes, DeviceId node) {
  const std::uint64_t live_bytes = live_chunk_bytes(node);
  const std::uint64_t limit = node_limit_bytes_[static_cast<std::size_t>(node)];
  if (limit != 0 && size_bytes > limit - live_bytes) {
    throw OutOfMemoryError(size_bytes, live_bytes, 0, limit,
                           node == 0 ? "host backend physical limit"
                                     : "host backend physical limit of node " + std::to_string(node));
  }
  const ChunkHandle chunk{next_handle_};
  const auto entry = chunk_offsets_.emplace(chunk.value, 0).first;  // bad_alloc here leaves nothing behind
  try {
    entry->second = take_offset(size_bytes);
  } catch (...) {
    chunk_offsets_.erase(entry);
    throw;
  }
  ++next_handle_;
  return chunk;
}

void HostBackend::do_release(ChunkHandle chunk, std::uint64_t size_bytes) {
  if (const auto imported = imported_.find(chunk.value); imported != imported_.end()) {
    close(imported->second.fd);  // the exporter's file is left as it is
    imported_.erase(imported);
    return;
  }
  if (const auto own = own_files_.find(chunk.value); own != own_files_.end()) {
    close(own->second);  // its pages go once no importer holds the file either
    own_files_.erase(own);
    return;
  }
  const auto entry = chunk_offsets_.find(chunk.value);
  std::vector<std::uint64_t>& released = free_offsets_[size_bytes];
  released.push_back(entry->second);  // before the hole is punched: bad_alloc here leaves nothing behind
  if (fallocate(memfd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(entry->second),
                static_cast<off_t>(size_bytes)) != 0) {
    const int error_number = errno;
    released.pop_back();
    throw_os_error("fallocate", error_number);
  }
  chunk_offsets_.erase(entry);
}

void HostBackend::do_map(std::uintptr_t addr, std::uint64_t size_bytes, ChunkHandle chunk) {
  int fd = memfd_;
  off_t offset = 0;
  if (const auto imported = imported_.find(chunk.value); imported != imported_.end()) {
    fd = imported->second.fd;
    offset = static_cast<off_t>(imported->second.fd_offset_bytes);
  } else if (const auto own = own_files_.find(chunk.value); own != own_files_.end()) {
    fd = own->second;
  } else {
    offset = static_cast<off_t>(chunk_offsets_.at(chunk.value));
  }
  void* p = mmap(as_pointer(addr), size_bytes, PROT_NONE, MAP_SHARED | MAP_FIXED, fd, offset);
  if (p == MAP_FAILED) {
    const int error_number = errno;
    place_placeholder(addr, size_bytes);  // in case the kernel removed the old placeholder before failing
    throw_os_error("mmap", error_number);
  }
}

void HostBackend::do_unmap(std::uintptr_t addr, std::uint64_t size_bytes) {
  const int error_number = place_placeholder(addr, size_bytes);
  if (error_number != 0) throw_os_error("mmap", error_number);
}

void HostBackend::do_set_access(std::uintptr_t addr, std::uint64_t size_bytes) {
  if (mprotect(as_pointer(addr), size_bytes, PROT_READ | PROT_WRITE) != 0) throw_os_error("mprotect", errno);
}

ExportedChunk HostBackend::do_export_chunk(ChunkHandle chunk) {
  if (const auto imported = imported_.find(chunk.value); imported != imported_.end()) {
    throw Error(ErrorCode::kInvalidArgument, "HostBackend: chunk " + std::to_string(chunk.value) +
                                                 " was imported from another process: only its exporter exports it");
  }
  if (const auto own = own_files_.find(chunk.value); own != own_files_.end()) return ExportedChunk{own->second, 0};
  return ExportedChunk{memfd_, chunk_offsets_.at(chunk.value)};
}

void HostBackend::do_scrub(ChunkHandle chunk, std::uint64_t size_bytes) {
  if (const auto own = own_files_.find(chunk.value); own != own_files_.end()) {
    if (fallocate(own->second, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(size_bytes)) != 0) {
      throw_os_error("fallocate", errno);
    }
    return;
  }
  // A file of its own, new (zero), sealed at its size: what an importer gets is this chunk and nothing else.
  const int fd = open_memfd("gmlake-host-chunk", false);
  if (ftruncate(fd, static_cast<off_t>(size_bytes)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int error_number = errno;
    close(fd);
    if (error_number == ENOMEM || error_number == ENOSPC) {
      throw OutOfMemoryError(size_bytes, live_chunk_bytes(), 0, physical_limit_bytes(), "scrub: ftruncate");
    }
    throw_os_error("ftruncate", error_number);
  }
  const auto entry = chunk_offsets_.find(chunk.value);
  try {
    own_files_.emplace(chunk.value, fd);
    free_offsets_[size_bytes].reserve(free_offsets_[size_bytes].size() + 1);
  } catch (...) {
    own_files_.erase(chunk.value);
    close(fd);
    throw;
  }
  // The range it had in the shared memfd goes back, punched (zero), for a later create of that size.
  if (fallocate(memfd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(entry->second),
                static_cast<off_t>(size_bytes)) != 0) {
    const int error_number = errno;
    own_files_.erase(chunk.value);
    close(fd);
    throw_os_error("fallocate", error_number);
  }
  free_offsets_[size_bytes].push_back(entry->second);
  chunk_offsets_.erase(entry);
}

ChunkHandle HostBackend::do_import_chunk(int fd, std::uint64_t fd_offset_bytes, std::uint64_t size_bytes) {
  struct stat file {};
  if (fstat(fd, &file) != 0) {
    const int error_number = errno;
    close(fd);
    throw_os_error("fstat", error_number);
  }
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    close(fd);
    throw Error(ErrorCode::kInvalidArgument,
                "HostBackend: import_chunk: the descriptor is not a memfd sealed against shrinking (F_SEAL_SHRINK): "
                "its owner could cut the file under this process's mappings");
  }
  if (!S_ISREG(file.st_mode) || fd_offset_bytes % page_bytes() != 0 ||
      fd_offset_bytes > static_cast<std::uint64_t>(file.st_size) ||
      size_bytes > static_cast<std::uint64_t>(file.st_size) - fd_offset_bytes) {
    close(fd);
    throw Error(ErrorCode::kInvalidArgument,
                "HostBackend: import_chunk: [" + std::to_string(fd_offset_bytes) + ", +" + std::to_string(size_bytes) +
                    " bytes) is not a page-aligned range of the exported file (" +
                    std::to_string(file.st_size) + " bytes)");
  }
  const ChunkHandle chunk{next_handle_};
  try {
    imported_.emplace(chunk.value, ImportedChunk{fd, fd_offset_bytes});
  } catch (...) {
    close(fd);
    throw;
  }
  ++next_handle_;
  return chunk;
}

}  // namespace gmlake
