// The `async` policy: see async_allocator.h. Bookkeeping only; the pool (stream_ordered_pool.h) does the work.
#include "async_allocator.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "gmlake/error.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

std::int64_t as_gauge(std::uint64_t bytes) { return static_cast<std::int64_t>(bytes); }

// The backend's pool, or Error(kConfig) saying why there is none.
std::unique_ptr<StreamOrderedPool> pool_of(const Config& config, Backend& backend) {
  config.validate();
  std::unique_ptr<StreamOrderedPool> pool = backend.make_stream_ordered_pool();
  if (pool == nullptr) {
    throw Error(ErrorCode::kConfig,
                fmt::format("gmlake config: policy: async replays through cudaMallocAsync's stream-ordered pool of "
                            "a GPU, which backend {} has none of: use --backend cuda",
                            backend.name()));
  }
  return pool;
}

}  // namespace

AsyncAllocator::AsyncAllocator(const Config& config, Backend& backend)
    : AsyncAllocator(config, backend, pool_of(config, backend)) {}

AsyncAllocator::AsyncAllocator(const Config& config, Backend& backend, std::unique_ptr<StreamOrderedPool> pool)
    : backend_(backend),
      pool_(std::move(pool)),
      cap_bytes_(config.cap_bytes),
      table_(policy::InvalidFreeWords::reference(to_string(Policy::kAsync)), stats_) {
  config.validate();
  if (pool_ == nullptr) throw Error(ErrorCode::kInvalidArgument, "gmlake async: no stream-ordered pool given");
  pool_->reset_high_marks();  // the peak is this allocator's from here on
}

AsyncAllocator::~AsyncAllocator() {
  for (const auto& [address, block] : table_) {
    try {
      pool_->free_async(address, block.stream);
    } catch (...) {
      // The pool's destruction gives back what it can.
    }
  }
  pool_.reset();
}

void* AsyncAllocator::allocate(std::uint64_t size_bytes, StreamId stream) {
  if (size_bytes == 0) return nullptr;
  std::uint64_t rounded = 0;
  if (!checked_round_up(size_bytes, kRoundBytes, &rounded) || rounded > kMaxRequestBytes) {
    throw_oom(size_bytes, "larger than any request served (256 TiB)");
  }
  const std::uint64_t active = static_cast<std::uint64_t>(stats_.active_bytes.current);
  if (cap_bytes_ != 0 && rounded > cap_bytes_ - std::min(active, cap_bytes_)) {
    throw_oom(size_bytes, fmt::format("the cap ({} bytes) would be passed: {} bytes active", cap_bytes_, active));
  }
  std::uintptr_t address = 0;
  try {
    address = pool_->allocate_async(size_bytes, stream);
  } catch (const OutOfMemoryError&) {
    ++stats_.num_ooms;
    throw;
  }
  // A live block's address again: the pool is broken; its memory is the live block's, so nothing is freed.
  if (table_.find(address) != nullptr) {
    throw std::logic_error(fmt::format("gmlake async: the pool returned live address {:#x}", address));
  }
  try {
    table_.insert(address, rounded, size_bytes, stream, NoRecord{});
  } catch (...) {  // no memory for the table: the allocation goes back
    pool_->free_async(address, stream);
    throw;
  }
  return reinterpret_cast<void*>(address);
}

void AsyncAllocator::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  table_.release(ptr, policy::FreeCall::kDeallocate,
                 [&](std::uintptr_t address, const Table::Block& b) { pool_->free_async(address, b.stream); });
}

void AsyncAllocator::begin_deferred_free(void* ptr) { table_.begin_deferred_free(ptr); }

void AsyncAllocator::end_deferred_free(void* ptr) {
  table_.release(ptr, policy::FreeCall::kEndDeferredFree,
                 [&](std::uintptr_t address, const Table::Block& b) { pool_->free_async(address, b.stream); });
}

void AsyncAllocator::empty_cache() {
  pool_->synchronize();
  pool_->trim_to(0);
}

Stats AsyncAllocator::stats() const {
  Stats s = stats_;
  s.reserved_bytes.current = as_gauge(pool_->reserved_bytes());
  s.reserved_bytes.peak = as_gauge(pool_->reserved_high_bytes());
  s.backend_calls = backend_.counters();
  return s;
}

void AsyncAllocator::reset_peak_stats() {
  pool_->reset_high_marks();
  stats_.reset_peaks();
}

std::vector<BlockInfo> AsyncAllocator::blocks() const {
  std::vector<BlockInfo> out;
  out.reserve(table_.size());
  for (const auto& [address, b] : table_) {
    out.push_back({address, b.size_bytes, b.requested_bytes, b.stream, b.pending_free});
  }
  std::sort(out.begin(), out.end(), [](const BlockInfo& x, const BlockInfo& y) { return x.address < y.address; });
  return out;
}

std::optional<BlockInfo> AsyncAllocator::find_block(const void* ptr) const {
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  const Table::Block* b = table_.find(address);
  if (b == nullptr) return std::nullopt;
  return BlockInfo{address, b->size_bytes, b->requested_bytes, b->stream, b->pending_free};
}

void AsyncAllocator::check_invariants() const {
  table_.check_invariants();
  for (const auto& [address, b] : table_) {
    if (address == 0) throw std::logic_error("gmlake async: a block at address 0");
    if (b.size_bytes != round_up(b.requested_bytes, kRoundBytes)) {
      throw std::logic_error(fmt::format("gmlake async: block {:#x}: size {} is not its request {} rounded to 512 B",
                                         address, b.size_bytes, b.requested_bytes));
    }
  }
  const std::uint64_t reserved = pool_->reserved_bytes();
  const std::uint64_t high = pool_->reserved_high_bytes();
  if (high < reserved) {
    throw std::logic_error(fmt::format("gmlake async: the pool's reserved high mark {} is below its reserved bytes {}",
                                       high, reserved));
  }
}

void AsyncAllocator::throw_oom(std::uint64_t requested_bytes, const std::string& reason) {
  ++stats_.num_ooms;
  std::uint64_t reserved = 0;
  try {
    reserved = pool_->reserved_bytes();
  } catch (const Error&) {
    // The figure stays 0: the out-of-memory is what the caller must learn.
  }
  throw OutOfMemoryError(requested_bytes, reserved, static_cast<std::uint64_t>(stats_.allocated_bytes.current),
                         cap_bytes_, "gmlake async: " + reason);
}

}  // namespace gmlake
