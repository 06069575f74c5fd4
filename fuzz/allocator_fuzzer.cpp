// libFuzzer target: the Allocator API driven by a byte stream of operations, for every policy, over a
// FaultBackend on the sim backend. After every operation: check_invariants() (structure and stats against a
// recount), the blocks equal a model kept here, and reserved bytes equal what the backend holds. At the end:
// everything freed and emptied leaves no chunk, mapping or reservation behind.
//
// Input: byte 0 picks the configuration (policy, cross_stream_reuse, an idle-memory bound; bit 4: a second
// configuration byte follows, for the keys added since the first long run: the move budget
// (move_share_permille, move_burst_ms, move_headroom_permille), chunks_per_block, max_strand_bytes,
// memory_first_under_cap, headroom_permille, and peers: peer_devices:1 on a two-device sim whose devices hold
// 256 MiB each, with or without peer_budget_bytes); then each operation is an opcode byte and its argument bytes
// (missing bytes read as 0). The pool's clock is a manual one that moves 250 us per operation, so the move
// budget's wall-time rules run the same way on every run of an input:
//   alloc size(3 bytes: exponent, mantissa) stream    free i    begin_deferred i    end_deferred i
//   bad_free kind,i (double free, interior pointer, arbitrary value, never-allocated neighbour)
//   empty_cache    set_cap k (0: none, else reserved + k x 2 MiB)    arm_fault call,nth,error    reset_peak
// Allowed outcomes: OutOfMemoryError or BackendError from allocate (a cap, an injected fault), BackendError
// from empty_cache and set_cap (an injected fault), Error(kInvalidPointer) from bad_free; a free of a live block
// never throws. Anything else is a finding. At most one fault is armed at a time (count 1), so at most one
// backend call fails per operation (docs/reliability.md: the single-failure guarantee).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gmlake/allocator.h"
#include "gmlake/clock.h"
#include "gmlake/config.h"
#include "gmlake/error.h"
#include "backends/fault/fault_backend.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"

namespace gmlake::fuzz {
namespace {

// GMLAKE_FUZZ_TRACE=1 prints every operation to stderr (for a finding's input: allocator_fuzzer FILE).
const bool kTrace = std::getenv("GMLAKE_FUZZ_TRACE") != nullptr;

void trace(const char* format, unsigned long long a = 0, unsigned long long b = 0, unsigned long long c = 0) {
  if (!kTrace) return;
  std::fprintf(stderr, format, a, b, c);
  std::fputc('\n', stderr);
}

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "gmlake allocator fuzz finding: %s\n", what.c_str());
  std::abort();
}

class Bytes {
 public:
  Bytes(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  std::uint8_t next() { return pos_ < size_ ? data_[pos_++] : 0; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

struct Live {
  void* ptr;
  std::uint64_t requested_bytes;
  StreamId stream;
  bool pending;
};

enum Op : std::uint8_t { kAlloc, kFree, kBeginDeferred, kEndDeferred, kBadFree, kEmptyCache, kSetCap, kArmFault,
                         kResetPeak, kOps };

constexpr std::uint64_t kMaxSizeLog2 = 30;  // blocks up to 1 GiB keep page tables and checks small

class Driver {
 public:
  explicit Driver(Bytes& in) {
    const std::uint8_t config_byte = in.next();
    const std::uint8_t more = (config_byte & 0x10) != 0 ? in.next() : 0;
    trace("config bytes %llu %llu", config_byte, more);
    Config config;
    const Policy policies[] = {Policy::kGmlake, Policy::kCaching, Policy::kExpandable};
    config.policy = policies[config_byte % 3];
    config.cross_stream_reuse = (config_byte & 0x4) == 0;
    if ((config_byte & 0x8) != 0) config.max_idle_mapped_bytes = 8 * kMiB;
    switch (more & 0x3) {  // the move budget
      case 1: config.move_share_permille = 0; break;  // unbounded
      case 2: config.move_share_permille = 1; config.move_burst_ms = 0; config.move_headroom_permille = 0; break;
      case 3: config.move_share_permille = 1000; config.move_burst_ms = 0; config.move_headroom_permille = 1000; break;
      default: break;
    }
    const std::uint64_t chunks_per_block[] = {32, 0, 1, 4096};
    config.chunks_per_block = chunks_per_block[(more >> 2) & 0x3];
    if ((more & 0x10) != 0) config.max_strand_bytes = 0;
    if ((more & 0x20) != 0) config.memory_first_under_cap = false;
    const bool peers = (more & 0x40) != 0;
    if (peers) {
      config.peer_devices = "1";
      if ((more & 0x80) != 0) config.peer_budget_bytes = 64 * kMiB;
    } else if ((more & 0x80) != 0) {
      config.headroom_permille = 0;
    }
    config.validate();
    sim_ = peers ? std::make_unique<SimBackend>(kChunkBytes, std::vector<SimDevice>{{256 * kMiB, 0}, {256 * kMiB, 0}})
                 : std::make_unique<SimBackend>();
    fault_ = std::make_unique<FaultBackend>(*sim_);
    allocator_ = make_allocator(config, *fault_, nullptr, &clock_);
  }

  void step(Bytes& in) {
    clock_.advance_ns(250'000);
    switch (static_cast<Op>(in.next() % kOps)) {
      case kAlloc: alloc(in); break;
      case kFree: free_live(in, false); break;
      case kBeginDeferred: free_live(in, true); break;
      case kEndDeferred: end_deferred(in); break;
      case kBadFree: bad_free(in); break;
      case kEmptyCache:
        trace("empty_cache");
        guarded_backend_call([&] { allocator_->empty_cache(); });
        break;
      case kSetCap: set_cap(in); break;
      case kArmFault: arm(in); break;
      case kResetPeak: allocator_->reset_peak_stats(); break;
      case kOps: break;
    }
    check();
  }

  void finish() {
    fault_->disarm_all();
    for (const Live& b : live_) {
      if (b.pending) allocator_->end_deferred_free(b.ptr);
      else allocator_->deallocate(b.ptr);
    }
    live_.clear();
    allocator_->empty_cache();
    check();
    if (allocator_->stats().allocated_bytes.current != 0) finding("allocated bytes left after freeing everything");
    if (allocator_->stats().reserved_bytes.current != 0) {
      finding("reserved bytes left after empty_cache: " + std::to_string(allocator_->stats().reserved_bytes.current) +
              " (peer " + std::to_string(allocator_->stats().peer_reserved_bytes.current) + "; backend device 0 " +
              std::to_string(sim_->live_chunk_bytes(0)) + ", device 1 " +
              std::to_string(sim_->device_count() > 1 ? sim_->live_chunk_bytes(1) : 0) + ")");
    }
    allocator_.reset();
    if (sim_->live_chunks() + sim_->live_mappings() + sim_->live_reservations() != 0) finding("backend leak");
  }

 private:
  std::size_t pick(Bytes& in, std::size_t n) { return n == 0 ? 0 : in.next() % n; }

  void alloc(Bytes& in) {
    const std::uint64_t log2 = in.next() % (kMaxSizeLog2 + 1);
    const std::uint64_t mantissa = in.next();
    const std::uint64_t size = (std::uint64_t{1} << log2) + (mantissa << (log2 > 8 ? log2 - 8 : 0));
    const StreamId stream = in.next() % 4;
    const std::size_t blocks_before = live_.size();
    trace("alloc %llu bytes stream %llu", size, stream);
    try {
      void* p = allocator_->allocate(size, stream);
      trace("  -> %#llx", reinterpret_cast<std::uintptr_t>(p));
      if (p == nullptr) finding("allocate returned nullptr for a size above 0");
      live_.push_back({p, size, stream, false});
    } catch (const OutOfMemoryError&) {
      trace("  -> out of memory");
    } catch (const BackendError&) {
      trace("  -> backend error");
      if (fault_->injected_faults() == injected_seen_) finding("BackendError with no fault injected");
    } catch (const std::exception& e) {
      finding(std::string("allocate threw ") + e.what());
    }
    if (live_.size() < blocks_before) finding("a block vanished");
  }

  void free_live(Bytes& in, bool deferred) {
    if (live_.empty()) return;
    const std::size_t i = pick(in, live_.size());
    if (live_[i].pending) return;
    trace(deferred ? "begin_deferred_free %#llx" : "free %#llx", reinterpret_cast<std::uintptr_t>(live_[i].ptr));
    try {
      if (deferred) {
        allocator_->begin_deferred_free(live_[i].ptr);
        live_[i].pending = true;
        return;
      }
      allocator_->deallocate(live_[i].ptr);
    } catch (const std::exception& e) {
      finding(std::string("a free of a live block threw ") + e.what());
    }
    freed_.push_back(live_[i].ptr);
    live_[i] = live_.back();
    live_.pop_back();
  }

  void end_deferred(Bytes& in) {
    for (std::size_t n = 0, i = pick(in, live_.size()); n < live_.size(); ++n, i = (i + 1) % live_.size()) {
      if (!live_[i].pending) continue;
      trace("end_deferred_free %#llx", reinterpret_cast<std::uintptr_t>(live_[i].ptr));
      try {
        allocator_->end_deferred_free(live_[i].ptr);
      } catch (const std::exception& e) {
        finding(std::string("end_deferred_free of a pending block threw ") + e.what());
      }
      freed_.push_back(live_[i].ptr);
      live_[i] = live_.back();
      live_.pop_back();
      return;
    }
  }

  // A pointer that is not a live block's start, or nullptr when none can be made.
  void* bad_pointer(Bytes& in) {
    const std::uint8_t kind = in.next() % 4;
    if (kind == 0 && !freed_.empty()) {
      void* p = freed_[pick(in, freed_.size())];
      for (const Live& b : live_) {
        if (b.ptr == p) return nullptr;  // handed out again since: not a bad pointer any more
      }
      return p;
    }
    if (kind == 1 && !live_.empty()) {
      const Live& b = live_[pick(in, live_.size())];
      return static_cast<char*>(b.ptr) + 1 + in.next() % b.requested_bytes;
    }
    if (kind == 2) return reinterpret_cast<void*>((std::uintptr_t{in.next()} << 12) | 1);
    return reinterpret_cast<void*>(kSimBaseAddress - kRoundBytes);
  }

  void bad_free(Bytes& in) {
    void* p = bad_pointer(in);
    if (p == nullptr) return;
    for (const Live& b : live_) {
      if (b.ptr == p) return;
    }
    const std::uint64_t invalid_before = allocator_->stats().invalid_frees;
    const std::uint8_t call = in.next() % 3;
    trace("bad free %#llx (call %llu)", reinterpret_cast<std::uintptr_t>(p), call);
    try {
      if (call == 0) allocator_->deallocate(p);
      if (call == 1) allocator_->begin_deferred_free(p);
      if (call == 2) allocator_->end_deferred_free(p);
      finding("a bad pointer was accepted");
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kInvalidPointer) finding(std::string("a bad free threw ") + e.what());
    }
    if (allocator_->stats().invalid_frees != invalid_before + 1) finding("invalid_frees did not count a bad free");
  }

  void set_cap(Bytes& in) {
    const std::uint64_t k = in.next();
    const auto reserved = static_cast<std::uint64_t>(allocator_->stats().reserved_bytes.current);
    const std::uint64_t cap = k == 0 ? 0 : reserved + (k - 1) * 2 * kMiB;
    trace("set_cap_bytes %llu", cap);
    guarded_backend_call([&] { allocator_->set_cap_bytes(cap); });
  }

  void arm(Bytes& in) {
    const auto call = static_cast<BackendCall>(in.next() % kBackendCallKinds);
    const std::uint64_t nth = 1 + in.next() % 8;
    const FaultError error = in.next() % 2 == 0 ? FaultError::kBackendError : FaultError::kOutOfMemory;
    fault_->disarm_all();
    injected_seen_ = fault_->injected_faults();
    fault_->arm({call, nth, 1, error});
    trace("arm fault: call %llu nth %llu error %llu", static_cast<unsigned long long>(call), nth,
          static_cast<unsigned long long>(error));
  }

  // Runs a call that may fail only by an injected fault.
  template <typename Call>
  void guarded_backend_call(Call&& call) {
    try {
      call();
    } catch (const Error& e) {
      trace("  -> error");
      if (fault_->injected_faults() == injected_seen_) finding(std::string("no fault injected, yet ") + e.what());
    } catch (const std::exception& e) {
      finding(e.what());
    }
  }

  void check() {
    try {
      allocator_->check_invariants();
    } catch (const std::exception& e) {
      finding(e.what());
    }
    const Stats s = allocator_->stats();
    if (static_cast<std::uint64_t>(s.reserved_bytes.current) != sim_->live_chunk_bytes()) {
      finding("reserved bytes differ from the backend's live chunk bytes");
    }
    const std::vector<BlockInfo> blocks = allocator_->blocks();
    if (blocks.size() != live_.size()) finding("the allocator's blocks differ from the model's");
    std::int64_t requested = 0;
    for (const Live& b : live_) requested += b.pending ? 0 : static_cast<std::int64_t>(b.requested_bytes);
    if (s.requested_bytes.current != requested) finding("requested bytes differ from the model's");
    injected_seen_ = fault_->injected_faults();  // a fault that fired in this step is accounted for
  }

  ManualClock clock_;
  std::unique_ptr<SimBackend> sim_;
  std::unique_ptr<FaultBackend> fault_;
  std::unique_ptr<Allocator> allocator_;
  std::vector<Live> live_;
  std::vector<void*> freed_;
  std::uint64_t injected_seen_ = 0;
};

}  // namespace
}  // namespace gmlake::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gmlake::fuzz::Bytes in(data, size);
  gmlake::fuzz::Driver driver(in);
  while (!in.done()) driver.step(in);
  driver.finish();
  return 0;
}
