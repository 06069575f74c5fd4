// ChunkProvider: chunks of memory from beyond the own device that a policy may borrow and must give back when
// their owner asks: the lake between processes (src/lake/lake_peers.h: chunks lent by another process over a
// Unix socket, include/gmlake/lake.h). The gmlake engine borrows through one when it is given one, as it is
// given its backend (make_allocator's `lake`): the Pool makes it when config.lake_socket is set, so an engine
// made without it (and the library gmlake_policies) holds no lake code and opens no socket.
//
// What the engine does with a provider (src/policies/gmlake/provided_chunks.h): once its own device is full,
// create() a chunk of the size a run needs (halving on OutOfMemoryError), map it like a chunk of its own,
// release() it as soon as no block uses it, and give back the chunks recalled() names once no block uses them.
// Chunks are the backend's: create() imports each into the backend the provider was made for, which the engine
// also uses; Backend::live_imported_bytes counts them.
// Sizes are bytes. Thread safety: none; a provider is used by one engine, under its lock.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "gmlake/backend.h"

namespace gmlake {

class ChunkProvider {
 public:
  ChunkProvider() = default;
  virtual ~ChunkProvider() = default;  // releases the chunks still held (each must be mapped nowhere by then)
  ChunkProvider(const ChunkProvider&) = delete;
  ChunkProvider& operator=(const ChunkProvider&) = delete;

  // True while create() may still give chunks: false for good once the provider has gone (its process exited,
  // it cut this process off, or it refused this process).
  virtual bool available() const = 0;
  // A new chunk of `size_bytes` (a non-zero multiple of the backend's granularity), imported into the backend:
  // mapped whole, as a chunk the backend created. Waits for the provider's answer. Returns nullopt once the
  // provider has gone (available() is false from then on). Throws OutOfMemoryError when it has no room for this
  // size (a smaller one may fit), BackendError when it refuses the size (its granularity does not divide it) or
  // the import or the link fails. Nothing changed on either side when it throws or returns nullopt.
  virtual std::optional<ChunkHandle> create(std::uint64_t size_bytes) = 0;
  // Releases `chunk` (created here and mapped nowhere) from the backend and tells the provider, if it is still
  // there. Throws Error(kInvalidArgument) for a chunk not created here or one still mapped: nothing changed.
  virtual void release(ChunkHandle chunk) = 0;
  // True when recalled() may find something (chunks are out, or an answer is late): the caller's cheap test
  // before it asks.
  virtual bool may_recall() const = 0;
  // The chunks whose owner asked for them back since the last call, each once; once the provider has gone,
  // every chunk still held (nobody else accounts for that memory any more). The caller releases each as soon as
  // no block uses it. Never blocks; never throws (a link that fails reads as a provider gone).
  virtual std::vector<ChunkHandle> recalled() = 0;
  // Bytes of the chunks created here and not yet released.
  virtual std::uint64_t live_bytes() const = 0;
  // 1 once the provider refused this process (Stats::lake_refusals), else 0.
  virtual std::uint64_t refusals() const = 0;
};

}  // namespace gmlake
