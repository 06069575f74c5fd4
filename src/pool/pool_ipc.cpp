// IPC (include/gmlake/ipc.h): the handle's encoding, the export of a Pool's block, and the importer's mappings.
#include "gmlake/ipc.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>

#include "gmlake/error.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

namespace gmlake {
namespace {

constexpr std::string_view kMagic = "GMLKIPC1";
constexpr std::uint32_t kMaxChunks = 1u << 20;
constexpr std::uint32_t kMaxBackendNameBytes = 64;

std::string hex(const void* ptr) {
  std::ostringstream text;
  text << ptr;
  return text.str();
}

[[noreturn]] void corrupt(const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, "gmlake ipc: corrupt handle: " + why);
}

std::uint64_t fnv1a(std::string_view bytes) {
  std::uint64_t hash = 14695981039346656037ull;
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

void put(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// Reads little-endian fields off a byte string, throwing corrupt() when it runs out.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  std::uint64_t get(int bytes) {
    if (bytes_.size() - at_ < static_cast<std::size_t>(bytes)) corrupt("it ends early (truncated?)");
    std::uint64_t value = 0;
    for (int i = 0; i < bytes; ++i) value |= std::uint64_t{static_cast<unsigned char>(bytes_[at_ + i])} << (8 * i);
    at_ += static_cast<std::size_t>(bytes);
    return value;
  }
  std::string_view take(std::size_t n) {
    if (bytes_.size() - at_ < n) corrupt("it ends early (truncated?)");
    const std::string_view part = bytes_.substr(at_, n);
    at_ += n;
    return part;
  }
  std::size_t at() const { return at_; }

 private:
  std::string_view bytes_;
  std::size_t at_ = 0;
};

// Closes a descriptor at the end of a scope unless released.
class OwnedFd {
 public:
  explicit OwnedFd(int fd = -1) : fd_(fd) {}
  ~OwnedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  OwnedFd(OwnedFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

std::string os_text(int error_number) { return std::generic_category().message(error_number); }

// A descriptor of process `pid` that the exporter named in its handle; see ipc.h for each failure.
OwnedFd open_process(const IpcHandle& handle) {
  const long pidfd = syscall(SYS_pidfd_open, handle.pid, 0);
  if (pidfd < 0) {
    const int error_number = errno;
    if (error_number == ESRCH) {
      throw Error(ErrorCode::kInvalidArgument, "gmlake ipc: the exporting process " + std::to_string(handle.pid) +
                                                   " has exited: its handle can no longer be opened");
    }
    if (error_number == ENOSYS) {
      throw BackendError("pidfd_open", "not supported by this kernel (gmlake IPC needs Linux >= 5.6)");
    }
    throw BackendError("pidfd_open", os_text(error_number));
  }
  OwnedFd process(static_cast<int>(pidfd));
  // The pidfd pins the process: if it is the one that exported, its start time matches, and stays so.
  std::uint64_t start_time = 0;
  try {
    start_time = process_start_time_ticks(handle.pid);
  } catch (const Error&) {
    start_time = 0;  // exited between the two calls
  }
  if (start_time != handle.start_time_ticks) {
    throw Error(ErrorCode::kInvalidArgument, "gmlake ipc: the exporting process " + std::to_string(handle.pid) +
                                                 " has exited (its pid now names another process)");
  }
  return process;
}

OwnedFd take_fd(int pidfd, const IpcHandle& handle, std::int32_t remote_fd) {
  const long fd = syscall(SYS_pidfd_getfd, pidfd, remote_fd, 0);
  if (fd >= 0) return OwnedFd(static_cast<int>(fd));
  const int error_number = errno;
  const std::string who = "process " + std::to_string(handle.pid) + "'s descriptor " + std::to_string(remote_fd);
  switch (error_number) {
    case EBADF:
      throw Error(ErrorCode::kInvalidArgument, "gmlake ipc: " + who +
                                                   " is not open: the exported block was freed and its memory "
                                                   "released before this import (keep it alive until opened)");
    case EPERM:
      throw BackendError("pidfd_getfd", "taking " + who + " was refused (EPERM): the importer needs ptrace access to "
                                        "the exporter (same user, kernel.yama.ptrace_scope 0, or CAP_SYS_PTRACE)");
    case ESRCH:
      throw Error(ErrorCode::kInvalidArgument, "gmlake ipc: the exporting process " + std::to_string(handle.pid) +
                                                   " has exited: its handle can no longer be opened");
    case ENOSYS:
      throw BackendError("pidfd_getfd", "not supported by this kernel (gmlake IPC needs Linux >= 5.6)");
    default:
      throw BackendError("pidfd_getfd", "taking " + who + ": " + os_text(error_number));
  }
}

}  // namespace

std::uint64_t process_start_time_ticks(int pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const std::size_t comm_end = text.rfind(')');  // the command name may hold spaces and parentheses
  if (!file.good() && text.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "gmlake ipc: no process " + std::to_string(pid));
  }
  if (comm_end == std::string::npos) {
    throw Error(ErrorCode::kInvalidArgument, "gmlake ipc: cannot read /proc/" + std::to_string(pid) + "/stat");
  }
  std::istringstream fields(text.substr(comm_end + 1));
  std::string field;
  // After the name: field 3 (state) ... field 22 (starttime): skip 19, read the 20th.
  for (int i = 3; i < 22; ++i) fields >> field;
  std::uint64_t start_time = 0;
  if (!(fields >> start_time)) {
    throw Error(ErrorCode::kInvalidArgument, "gmlake ipc: cannot read /proc/" + std::to_string(pid) + "/stat");
  }
  return start_time;
}

std::string encode_ipc_handle(const IpcHandle& handle) {
  std::string out(kMagic);
  put(out, handle.backend.size(), 4);
  out += handle.backend;
  put(out, static_cast<std::uint32_t>(handle.pid), 4);
  put(out, handle.start_time_ticks, 8);
  put(out, handle.block_offset_bytes, 8);
  put(out, handle.block_size_bytes, 8);
  put(out, handle.chunks.size(), 4);
  for (const IpcChunkRef& chunk : handle.chunks) {
    put(out, static_cast<std::uint32_t>(chunk.fd), 4);
    put(out, chunk.fd_offset_bytes, 8);
    put(out, chunk.size_bytes, 8);
  }
  put(out, fnv1a(out), 8);
  return out;
}

IpcHandle decode_ipc_handle(std::string_view bytes) {
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic) {
    throw Error(ErrorCode::kInvalidArgument,
                "gmlake ipc: not a gmlake IPC handle (it does not start with \"GMLKIPC1\"; made by another "
                "allocator, or by another version of gmlake?)");
  }
  if (bytes.size() < kMagic.size() + 8) corrupt("it ends early (truncated?)");
  const std::string_view body = bytes.substr(0, bytes.size() - 8);
  Reader checksum(bytes.substr(bytes.size() - 8));
  if (checksum.get(8) != fnv1a(body)) corrupt("its checksum does not match (changed or truncated in transit?)");
  Reader in(body);
  in.take(kMagic.size());
  IpcHandle handle;
  const auto name_bytes = static_cast<std::uint32_t>(in.get(4));
  if (name_bytes == 0 || name_bytes > kMaxBackendNameBytes) corrupt("backend name of " + std::to_string(name_bytes) + " bytes");
  handle.backend = std::string(in.take(name_bytes));
  handle.pid = static_cast<std::int32_t>(in.get(4));
  handle.start_time_ticks = in.get(8);
  handle.block_offset_bytes = in.get(8);
  handle.block_size_bytes = in.get(8);
  const auto count = static_cast<std::uint32_t>(in.get(4));
  if (handle.pid <= 0) corrupt("process id " + std::to_string(handle.pid));
  if (count == 0 || count > kMaxChunks) corrupt(std::to_string(count) + " chunks");
  std::uint64_t span_bytes = 0;
  handle.chunks.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    IpcChunkRef chunk;
    chunk.fd = static_cast<std::int32_t>(in.get(4));
    chunk.fd_offset_bytes = in.get(8);
    chunk.size_bytes = in.get(8);
    if (chunk.fd < 0 || chunk.size_bytes == 0 || chunk.size_bytes > UINT64_MAX - span_bytes) {
      corrupt("chunk " + std::to_string(i) + " (fd " + std::to_string(chunk.fd) + ", " +
              std::to_string(chunk.size_bytes) + " bytes)");
    }
    span_bytes += chunk.size_bytes;
    handle.chunks.push_back(chunk);
  }
  if (in.at() != body.size()) corrupt(std::to_string(body.size() - in.at()) + " bytes too many");
  if (handle.block_size_bytes == 0 || handle.block_offset_bytes > span_bytes ||
      handle.block_size_bytes > span_bytes - handle.block_offset_bytes) {
    corrupt("the block [" + std::to_string(handle.block_offset_bytes) + ", +" +
            std::to_string(handle.block_size_bytes) + " bytes) does not lie inside its chunks (" +
            std::to_string(span_bytes) + " bytes)");
  }
  return handle;
}

IpcExport ipc_export(Pool& pool, const void* ptr) {
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  for (const SegmentInfo& segment : pool.segments()) {
    if (addr < segment.address || addr - segment.address >= segment.size_bytes) continue;
    for (const SegmentBlock& block : segment.blocks) {
      if (addr < block.address || addr - block.address >= block.size_bytes) continue;
      if (block.state != SegmentBlockState::kActiveAllocated) break;
      const std::uint64_t begin = block.address - segment.address;  // the block, from the segment's start
      const std::uint64_t end = begin + block.size_bytes;
      IpcHandle handle;
      handle.backend = std::string(pool.backend().name());
      handle.pid = static_cast<std::int32_t>(getpid());
      handle.start_time_ticks = process_start_time_ticks(handle.pid);
      handle.block_size_bytes = block.size_bytes;
      bool first = true;
      for (const SegmentChunk& chunk : segment.chunks) {
        if (chunk.offset_bytes + chunk.size_bytes <= begin || chunk.offset_bytes >= end) continue;
        if (first) handle.block_offset_bytes = begin - chunk.offset_bytes;
        first = false;
        const ExportedChunk exported = pool.mutable_backend().export_chunk(ChunkHandle{chunk.handle});
        handle.chunks.push_back(IpcChunkRef{exported.fd, exported.fd_offset_bytes, chunk.size_bytes});
      }
      return IpcExport{encode_ipc_handle(handle), addr - block.address};
    }
    break;
  }
  throw Error(ErrorCode::kInvalidPointer,
              "gmlake_ipc_export: " + hex(ptr) + " lies in no live allocated block of this pool");
}

IpcImports::~IpcImports() {
  for (const auto& [ptr, import] : imports_) {
    try {
      backend_.unmap(import.base, import.span_bytes);
      for (const ChunkHandle chunk : import.chunks) backend_.release(chunk);
      backend_.address_free(import.base, import.span_bytes);
    } catch (...) {
      // The backend's own destructor gives back what is left.
    }
  }
}

void* IpcImports::open(std::string_view handle_bytes) {
  const IpcHandle handle = decode_ipc_handle(handle_bytes);
  if (handle.backend != backend_.name()) {
    throw Error(ErrorCode::kInvalidArgument, "gmlake ipc: the handle is of a " + handle.backend +
                                                 " backend's memory; this process imports through " +
                                                 std::string(backend_.name()));
  }
  std::uint64_t span_bytes = 0;
  for (const IpcChunkRef& chunk : handle.chunks) {
    if (chunk.size_bytes % backend_.granularity_bytes() != 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  "gmlake ipc: a chunk of " + std::to_string(chunk.size_bytes) +
                      " bytes is not a multiple of this backend's granularity " +
                      std::to_string(backend_.granularity_bytes()) + " (both processes need the same page_bytes)");
    }
    span_bytes += chunk.size_bytes;
  }
  // Take every descriptor first: nothing is mapped while one of them may still be refused.
  std::vector<OwnedFd> fds;
  fds.reserve(handle.chunks.size());
  {
    const OwnedFd process = open_process(handle);
    for (const IpcChunkRef& chunk : handle.chunks) fds.push_back(take_fd(process.get(), handle, chunk.fd));
  }
  Import import{backend_.reserve(span_bytes), span_bytes, {}};
  import.chunks.reserve(handle.chunks.size());
  std::vector<std::pair<std::uintptr_t, std::uint64_t>> mapped;
  try {
    mapped.reserve(handle.chunks.size());
    std::uint64_t offset = 0;
    for (std::size_t i = 0; i < handle.chunks.size(); ++i) {
      const IpcChunkRef& chunk = handle.chunks[i];
      import.chunks.push_back(backend_.import_chunk(fds[i].release(), chunk.fd_offset_bytes, chunk.size_bytes));
      backend_.map(import.base + offset, chunk.size_bytes, import.chunks.back());
      mapped.emplace_back(import.base + offset, chunk.size_bytes);
      offset += chunk.size_bytes;
    }
    backend_.set_access(import.base, span_bytes);
    void* ptr = reinterpret_cast<void*>(import.base + handle.block_offset_bytes);
    imports_.emplace(reinterpret_cast<std::uintptr_t>(ptr), std::move(import));
    return ptr;
  } catch (...) {
    try {
      for (const auto& [addr, size_bytes] : mapped) backend_.unmap(addr, size_bytes);
      for (const ChunkHandle chunk : import.chunks) backend_.release(chunk);
      backend_.address_free(import.base, span_bytes);
    } catch (...) {
      // The first error is the one to report; the backend's destructor gives back anything left.
    }
    throw;
  }
}

void IpcImports::close(void* ptr) {
  const auto it = imports_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == imports_.end()) {
    throw Error(ErrorCode::kInvalidPointer, "gmlake_ipc_close: " + hex(ptr) +
                                                " is not an open import (closed already, or not returned by "
                                                "gmlake_ipc_import)");
  }
  const Import& import = it->second;
  backend_.unmap(import.base, import.span_bytes);  // throws before anything changed, else all is unmapped
  for (const ChunkHandle chunk : import.chunks) {
    try {
      backend_.release(chunk);
    } catch (...) {
      // Mapped nowhere now: the backend's destructor releases it.
    }
  }
  try {
    backend_.address_free(import.base, import.span_bytes);
  } catch (...) {
  }
  imports_.erase(it);
}

}  // namespace gmlake
