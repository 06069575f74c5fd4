// The host backend: real virtual memory on Linux, with the CUDA VMM calls played by their POSIX twins.
//
//   reserve       mmap(nullptr, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE), over-reserved and
//                 trimmed so the start is aligned to granularity_bytes()
//   address_free  munmap
//   create        a range of one memfd (memfd_create, MFD_CLOEXEC): a released range of the same size when
//                 there is one, else the file grows with ftruncate. Nothing is allocated yet.
//   release       fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE): the pages go back to the OS, and the
//                 range reads back as zeroes when a later create reuses it
//   map           mmap(addr, PROT_NONE, MAP_SHARED | MAP_FIXED, memfd, offset): one chunk mapped at two
//                 addresses shows the same bytes at both (aliasing)
//   unmap         mmap(addr, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED): puts the
//                 reservation's placeholder back, so no hole is left for another mmap to take
//   set_access    mprotect(PROT_READ | PROT_WRITE)
//
// IPC (include/gmlake/ipc.h): export_chunk gives the memfd and the chunk's offset in it (the whole file: an
// importer, which has ptrace access to this process anyway, can map any chunk of it); import_chunk keeps the
// descriptor it is given (another process's memfd, which must be sealed against shrinking, F_SEAL_SHRINK, as
// this backend's are: else Error(kInvalidArgument)) and maps the chunk's range of it, MAP_SHARED, so both
// processes see the same bytes; releasing an imported chunk closes that descriptor and never punches the
// exporter's file.
// The lake (scrub, before a chunk is lent): the chunk moves to a memfd of its own, new and therefore zero,
// sealed at its size (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), and its range of the shared memfd is punched
// and reused; export_chunk then gives that file alone, at offset 0: a borrower reaches the chunk lent to it and
// nothing else of this process. Such a chunk is mapped and released from its own file (release closes it). Unlike cuda, the memory is the exporter's range of its file: once the exporter releases the
// chunk (its pages are punched out) and reuses the range, an importer still mapping it sees the new contents.
//
// No call touches memory: a page is allocated only when the caller first touches it, so a trace of any size
// can be replayed (backend calls only) on a small machine as long as the caller does not write the memory.
//
// VMA limit: each live mapping is one kernel VMA (adjacent mappings of contiguous memfd offsets with the same
// protection may merge into one), and a reservation split by mappings adds placeholder VMAs between them. Linux
// allows vm.max_map_count VMAs per process (65530 by default, shared with the rest of the process), so
// somewhat fewer than 65530 live mappings that do not merge (128 GiB of separate 2 MiB chunks at best, half
// that when placeholders sit between them) is the ceiling; past it map, unmap or set_access fail with
// BackendError("mmap"/"mprotect", "Cannot allocate memory ..."). live_mappings() counts the mappings.
//
// Errors: a failing system call throws BackendError naming it ("mmap", "munmap", "ftruncate", "fallocate",
// "mprotect", "memfd_create") with the OS's error text, or OutOfMemoryError when create finds no memory
// (ENOMEM or ENOSPC from ftruncate, or the physical limit). What the call changed is undone first, except
// where the kernel gives no way back: a failing unmap may have removed part of the range's mappings already
// (the rest of it stays mapped), and a failing set_access may have given access to part of the range. In both
// cases the base class's tables still describe the range as it was before the call.
//
// Nodes (the lake, docs/design.md): constructed with a list of per-node limits, it models that many devices
// (device_count()), node 0 its own: create(size, n) counts the chunk against node n's limit. All nodes' chunks
// are ranges of the one memfd (the CPU has one memory); a node stands for a device's capacity, so the engine's
// peer chunks run, with real bytes, in CPU tests.
//
// Thread safety: none, like every Backend. After fork() the child shares the mapped memory (MAP_SHARED).
#pragma once

#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "gmlake/backend.h"
#include "gmlake/units.h"

namespace gmlake {

class HostBackend final : public Backend {
 public:
  // granularity_bytes: a power of two, at least the page size (else Error(kInvalidArgument)).
  // physical_limit_bytes: the most chunk bytes live at once, 0 for no limit. Throws BackendError when
  // memfd_create fails.
  explicit HostBackend(std::uint64_t granularity_bytes = kPageBytes, std::uint64_t physical_limit_bytes = 0);
  // Frees everything still live (every reservation, with whatever is mapped in it, and the memfd with every
  // chunk). Never throws.
  // `node_limit_bytes.size()` nodes (>= 1, else Error(kInvalidArgument)), node i holding at most
  // node_limit_bytes[i] chunk bytes (0: no limit); node 0 is the own device (physical_limit_bytes()).
  HostBackend(std::uint64_t granularity_bytes, std::vector<std::uint64_t> node_limit_bytes);
  ~HostBackend() override;

  std::string_view name() const override { return "host"; }
  bool host_accessible() const override { return true; }
  bool imports_chunks() const override { return true; }
  // The limit create() enforces on live_chunk_bytes(), 0 for none. The OutOfMemoryError it throws carries
  // requested = the chunk's size, reserved = live_chunk_bytes(), allocated = 0, cap = this limit.
  std::uint64_t physical_limit_bytes() const { return node_limit_bytes_[0]; }
  std::uint32_t device_count() const override { return static_cast<std::uint32_t>(node_limit_bytes_.size()); }

 protected:
  std::uintptr_t do_reserve(std::uint64_t size_bytes) override;
  void do_address_free(std::uintptr_t addr, std::uint64_t size_bytes) override;
  ChunkHandle do_create(std::uint64_t size_bytes) override;
  ChunkHandle do_create_on(std::uint64_t size_bytes, DeviceId node) override;
  void do_release(ChunkHandle chunk, std::uint64_t size_bytes) override;
  void do_map(std::uintptr_t addr, std::uint64_t size_bytes, ChunkHandle chunk) override;
  void do_unmap(std::uintptr_t addr, std::uint64_t size_bytes) override;
  void do_set_access(std::uintptr_t addr, std::uint64_t size_bytes) override;
  ExportedChunk do_export_chunk(ChunkHandle chunk) override;
  ChunkHandle do_import_chunk(int fd, std::uint64_t fd_offset_bytes, std::uint64_t size_bytes) override;
  // The chunk moved to a new sealed memfd of its own (zero), its old range punched and reused (see "The lake"
  // above); a chunk that has its own file already: that file punched.
  void do_scrub(ChunkHandle chunk, std::uint64_t size_bytes) override;

 private:
  struct ImportedChunk {
    int fd;
    std::uint64_t fd_offset_bytes;
  };

  std::uint64_t take_offset(std::uint64_t size_bytes);

  int memfd_;
  std::vector<std::uint64_t> node_limit_bytes_;  // by node; [0] is physical_limit_bytes
  std::uint64_t memfd_bytes_ = 0;  // the memfd's size: every chunk offset lies below it
  std::uint64_t next_handle_ = 1;
  std::map<std::uint64_t, std::uint64_t> chunk_offsets_;              // handle -> offset in the memfd
  std::map<std::uint64_t, std::vector<std::uint64_t>> free_offsets_;  // size -> offsets of released ranges
  std::map<std::uintptr_t, std::uint64_t> reservations_;              // start -> size, for the destructor
  std::map<std::uint64_t, ImportedChunk> imported_;                   // handle -> another process's memfd
  std::map<std::uint64_t, int> own_files_;  // handle -> the memfd of its own that scrub gave it (lent chunks)
};

}  // namespace gmlake
