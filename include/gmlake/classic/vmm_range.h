// VmmRange: one virtual address range reserved once on a Backend, backed by physical chunks mapped from its
// start onward and removed from its end. It is the layer every classic pool stands on (block pool, arena,
// growable buffer, layout cache): the pool decides how many bytes it needs, the range turns that into
// backend calls (reserve once; create + map + set_access per chunk; unmap + release per chunk; address_free
// once). Because it speaks only the Backend interface, a pool built on it runs on the host, sim and CUDA
// backends alike.
//
// Layout: [base(), base() + mapped_bytes()) is mapped with read/write access, made of chunk_count() chunks in
// address order; [base() + mapped_bytes(), base() + reserved_bytes()) is reserved, unmapped address space.
// base() is aligned to the backend's granularity and never changes while the range lives.
//
// What it does not do: place objects, count users, or lock. Thread safety: none (the Backend under it has
// none either); a pool serializes its calls.
#pragma once

#include <cstdint>
#include <vector>

#include "gmlake/backend.h"

namespace gmlake::classic {

class VmmRange {
 public:
  // An empty range: nothing reserved, base() == 0.
  VmmRange() = default;
  // Reserves reserve_bytes rounded up to backend.granularity_bytes(); nothing is mapped yet. `backend` must
  // outlive the range. Throws Error(kInvalidArgument) when reserve_bytes is 0 or rounding overflows, and
  // whatever backend.reserve throws (BackendError), leaving nothing behind.
  VmmRange(Backend& backend, std::uint64_t reserve_bytes);
  VmmRange(VmmRange&& other) noexcept;
  VmmRange& operator=(VmmRange&& other) noexcept;
  VmmRange(const VmmRange&) = delete;
  VmmRange& operator=(const VmmRange&) = delete;
  // Unmaps and releases every chunk and frees the reservation. Never throws (a failing backend call is
  // skipped: the destructor has no one to report it to).
  ~VmmRange();

  std::uintptr_t base() const { return base_; }
  void* data() const { return reinterpret_cast<void*>(base_); }
  std::uint64_t reserved_bytes() const { return reserved_bytes_; }
  std::uint64_t mapped_bytes() const { return mapped_bytes_; }
  std::uint64_t chunk_count() const { return chunks_.size(); }
  // The size of the last mapped chunk; 0 when none is mapped.
  std::uint64_t last_chunk_bytes() const { return chunks_.empty() ? 0 : chunks_.back().size_bytes; }
  // The backend's granularity; every chunk is a multiple of it. 0 for an empty range.
  std::uint64_t granularity_bytes() const { return backend_ ? backend_->granularity_bytes() : 0; }
  // True when the CPU may touch the mapped bytes (host backend).
  bool host_accessible() const { return backend_ && backend_->host_accessible(); }

  // Creates `count` chunks of chunk_bytes each, maps them one after the other at base() + mapped_bytes(), and
  // gives the whole run read/write access with one set_access. chunk_bytes: a non-zero multiple of the
  // granularity; count >= 1; the run must fit in the unmapped rest of the reservation (else
  // Error(kInvalidArgument)). Throws what the backend throws (OutOfMemoryError when it has no memory left,
  // BackendError); on any error every chunk of the run is unmapped and released again: the range is as it was.
  void map_chunks(std::uint64_t chunk_bytes, std::uint64_t count = 1);
  // Unmaps and releases the last chunk (Error(kInvalidArgument) when there is none). When the backend's
  // unmap throws, the range is as it was; when its release throws after the unmap, the chunk is gone from
  // the range and released again by the destructor.
  void unmap_last_chunk();

 private:
  struct Chunk {
    ChunkHandle handle;
    std::uint64_t size_bytes;
  };
  void destroy() noexcept;

  Backend* backend_ = nullptr;
  std::uintptr_t base_ = 0;
  std::uint64_t reserved_bytes_ = 0;
  std::uint64_t mapped_bytes_ = 0;
  std::vector<Chunk> chunks_;            // in address order from base_
  std::vector<ChunkHandle> unreleased_;  // unmapped chunks whose release failed; retried by the destructor
};

}  // namespace gmlake::classic
