// IPC: sharing a live block of one process's Pool with another process (torch.multiprocessing, the C API's
// gmlake_ipc_export / gmlake_ipc_import / gmlake_ipc_close), through exportable physical chunks.
//
// Protocol. The exporter describes the block in a self-describing byte string, the handle: the backend's
// name, its process id and start time, the block's size and offset, and for each physical chunk behind the
// block (whole chunks: the driver maps handles whole, never at an offset) a file descriptor number in the
// exporter's process, the chunk's offset in that file and its size. On cuda the descriptor is
// cuMemExportToShareableHandle(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) of the chunk (needs chunks created with
// that handle type: Config::ipc_handles); on host it is the backend's memfd. The importer opens the exporter
// with pidfd_open(2), checks that it is the same process (start time, so a reused pid is refused), takes each
// descriptor into its own process with pidfd_getfd(2) (Linux >= 5.6; the importer needs ptrace access to the
// exporter, PTRACE_MODE_ATTACH_REALCREDS: same user and Yama's kernel.yama.ptrace_scope 0, or CAP_SYS_PTRACE;
// PyTorch's expandable segments share memory the same way), imports the chunks
// (cuMemImportFromShareableHandle on cuda), reserves one range for all of them, maps each whole chunk in order,
// gives access, and returns the range's start plus the block's offset. The descriptors it took are closed once
// imported (cuda) or when the import is closed (host).
// Sources: CUDA driver API, Virtual Memory Management (cuMemExportToShareableHandle,
// cuMemImportFromShareableHandle): https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html;
// pidfd_open(2), pidfd_getfd(2): https://man7.org/linux/man-pages/man2/pidfd_getfd.2.html
//
// Lifetime. The exporter's descriptors stay open while the chunk lives (cuda: until the chunk is released;
// host: the memfd, for the backend's life), so an importer can open a handle while the exported block is live.
// The exporter must keep the block alive until every importer has opened it (torch.multiprocessing does: the
// sent storage lives until the receivers release it). An opened import holds its own reference on cuda: the
// memory stays until the importer closes it, even if the exporter frees the block or exits. On host the import
// maps the exporter's file: it stays readable, but once the exporter reuses the range the importer sees the new
// bytes. Bytes written by one process are seen by the other (the same physical memory); ordering between them
// is the caller's (CUDA events, as torch.multiprocessing does).
//
// Errors: a handle that is not one (wrong magic, version, length, checksum, sizes that do not add up) throws
// Error(kInvalidArgument) "gmlake ipc: not a gmlake IPC handle ..." / "corrupt handle ..."; a handle of
// another backend, likewise; a handle whose exporter has exited (or whose pid is now another process's) throws
// Error(kInvalidArgument) "... exporting process <pid> has exited"; a descriptor no longer open in the
// exporter (the block was freed and its chunk released) throws Error(kInvalidArgument); pidfd_getfd refused
// (EPERM) throws BackendError("pidfd_getfd", ... ptrace ...); a kernel without pidfd_getfd throws
// BackendError("pidfd_open"|"pidfd_getfd", "... Linux >= 5.6 ..."). Every failure leaves nothing behind: no
// descriptor, mapping, reservation or imported chunk; the pool and earlier imports are unchanged.
//
// Thread safety: none; the C API calls these under the device's lock.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "gmlake/backend.h"
#include "gmlake/pool.h"

namespace gmlake {

// One chunk of a handle: a descriptor number in the exporter's process, where the chunk starts in its file, and
// its size (bytes).
struct IpcChunkRef {
  std::int32_t fd = -1;
  std::uint64_t fd_offset_bytes = 0;
  std::uint64_t size_bytes = 0;
};

// A handle's contents. Chunks are in address order: the importer maps them back to back.
struct IpcHandle {
  std::string backend;                  // the exporter's backend name ("host", "cuda")
  std::int32_t pid = 0;                 // the exporting process
  std::uint64_t start_time_ticks = 0;   // its start time (/proc/<pid>/stat field 22), against pid reuse
  std::uint64_t block_offset_bytes = 0; // where the block starts, from the first chunk's start
  std::uint64_t block_size_bytes = 0;   // the block's size as placed
  std::vector<IpcChunkRef> chunks;
};

// The handle's bytes: "GMLKIPC1", then the fields in little-endian fixed widths, then an FNV-1a 64 checksum of
// everything before it. Never fails (but bad_alloc).
std::string encode_ipc_handle(const IpcHandle& handle);
// The handle `bytes` encode. Throws Error(kInvalidArgument) for anything encode_ipc_handle could not have made
// (wrong magic or length, bad checksum, no chunks, more than 2^20 chunks, chunk sizes 0, the block not inside
// its chunks), naming what is wrong.
IpcHandle decode_ipc_handle(std::string_view bytes);

// What ipc_export gives: the handle, and where `ptr` lies in the block (bytes from the block's start, which is
// where ipc_import's pointer points).
struct IpcExport {
  std::string handle;
  std::uint64_t offset_bytes = 0;
};

// Exports the live block of `pool` that contains `ptr` (its start or any byte of it). O(n) in the pool's
// blocks and chunks (one Pool::segments()). Throws Error(kInvalidPointer) when `ptr` lies in no live allocated
// block, Error(kInvalidArgument) when the backend cannot export (sim), BackendError when the driver refuses
// (chunks made without ipc_handles). Changes nothing in the pool; on cuda each chunk's descriptor is made once
// and kept until the chunk is released.
IpcExport ipc_export(Pool& pool, const void* ptr);

// The importer's side: the blocks of other processes mapped into this one, through `backend` (which the caller
// owns, which must outlive this, and which is used for nothing else: a pool's backend would fail the policy's
// invariants, which count its mappings).
class IpcImports {
 public:
  explicit IpcImports(Backend& backend) : backend_(backend) {}
  // Closes every import still open. Never throws.
  ~IpcImports();
  IpcImports(const IpcImports&) = delete;
  IpcImports& operator=(const IpcImports&) = delete;

  // Maps the block `handle` describes into this process and returns its start (valid until close). Each call
  // maps anew: opening one handle twice gives two pointers to the same memory. Errors: see the file comment.
  void* open(std::string_view handle);
  // Unmaps an import open returned. Throws Error(kInvalidPointer) for anything else (closed already, an
  // interior pointer), changing nothing; BackendError when the backend fails (the import stays open).
  void close(void* ptr);
  std::size_t open_count() const { return imports_.size(); }
  Backend& backend() { return backend_; }

 private:
  struct Import {
    std::uintptr_t base;
    std::uint64_t span_bytes;
    std::vector<ChunkHandle> chunks;
  };
  Backend& backend_;
  std::map<std::uintptr_t, Import> imports_;  // returned pointer -> its mapping
};

// This process's start time in clock ticks since boot (/proc/self/stat field 22), as handles carry it.
std::uint64_t process_start_time_ticks(int pid);

}  // namespace gmlake
