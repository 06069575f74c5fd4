// libFuzzer target: the Allocator API driven by a byte stream of operations, for every policy, over a
// FaultBackend on the sim backend (or the host backend, for the lake). After every operation: check_invariants()
// (structure and stats against a recount), the blocks equal a model kept here, and reserved bytes equal what the
// backend holds. At the end: everything freed and emptied leaves no chunk, mapping or reservation behind.
//
// Input: byte 0 picks the configuration (policy, cross_stream_reuse, an idle-memory bound; bit 4: a second
// configuration byte follows, for the keys added since the first long run: the move budget
// (move_share_permille, move_burst_ms, move_headroom_permille; bounded, with assume_device_waits, since the share
// charges only moves made while the device waits), chunks_per_block, max_strand_bytes,
// memory_first_under_cap, headroom_permille, and peers: peer_devices:1 on a two-device sim whose devices hold
// 256 MiB each, with or without peer_budget_bytes; bit 5: a third configuration byte follows, and the target
// drives a whole Pool (StreamUses and TracingAllocator over the policy) with five more operations, below; its bit
// 0 turns on the lake between processes: a gmlake pool over the host backend (own device 32 or 128 MiB) whose
// lake_socket is a LakeLender of this process, served by a thread of the target (LakeSide, below), with
// lake_answer_timeout_ms 1 or 10 and the lender's budget none, 2, 8 or 32 MiB); then each operation is an opcode
// byte and its argument bytes (missing bytes read as 0). The pool's clock is a manual one that moves 250 us per
// operation, so the move budget's wall-time rules run the same way on every run of an input:
//   alloc size(3 bytes: exponent, mantissa) stream    free i    begin_deferred i    end_deferred i
//   bad_free kind,i (double free, interior pointer, arbitrary value, never-allocated neighbour)
//   empty_cache    set_cap k (0: none, else reserved + k x 2 MiB)    arm_fault call,nth,error    reset_peak
// and with a Pool (bit 5):
//   save mutation,i   the live blocks, as Pool::restore takes them, kept; mutated (a block left out, moved,
//                     grown, asking 0 or more than its size, pending) or not
//   restore           Pool::restore of what was saved: it must make exactly those blocks (caching), or refuse with
//                     Error(kInvalidArgument) and change nothing (any other policy, a pending free, a bad block)
//   record_stream k,i,stream   a live block's start (must be taken), a bad pointer (Error(kInvalidPointer))
//   tracing k,n       set_tracing(0 or n), drain_trace (all, or at most n)
//   lake k            the lender: pause (at most 2 per input: each costs a borrow lake_answer_timeout_ms once),
//                     resume, recall every loan, let the recall deadlines pass (cuts the pool off), stop lending,
//                     close (the lender gone)
// and with a device (the third configuration byte's bit 7, without the lake): the pool takes StreamEvents whose
// work finishes only when the input says so (tests/manual_events.h), so that gmlake's fence runs: marks, waits,
// lag growth (lag_grow_pages 64, 0, 1 or 8: bits 1-2; with bit 3, lag_grow_covered off: covered chunks waited
// for; with bit 4, lag growth bounded at 20 permille above the highest allocated bytes, lag_headroom_permille),
// with bit 5, a new arena for every new stream (arena_handover off: else a new stream takes over an empty
// arena once its stream's work finished, or one that keeps blocks of a stream quiet for 1 ms, four operations:
// handover_quiet_ms 1, whose kept blocks' frees then wait for their stream) and, with bit 6, moves in stream order (in_order_moves);
// cross_stream_reuse is off, as on a GPU, and record_stream does nothing (its deferred frees would need a model
// of the events). One more operation:
//   device k          finish the work queued on stream k, or on every stream, or mark stream k busy or idle
//                     (whether the device waits for the host there)
// Allowed outcomes: OutOfMemoryError or BackendError from allocate (a cap, an injected fault), BackendError
// from empty_cache and set_cap (an injected fault), Error(kInvalidPointer) from bad_free; a free of a live block
// never throws. Anything else is a finding. At most one fault is armed at a time (count 1), so at most one
// backend call fails per operation (docs/reliability.md: the single-failure guarantee). With the lake, the end
// also checks the lender: every loan back (or stranded, for a pool it cut off), its backend holding nothing once
// it is gone, and this process holding exactly the descriptors it held before the input.
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fuzz_descriptors.h"
#include "gmlake/allocator.h"
#include "gmlake/clock.h"
#include "gmlake/config.h"
#include "gmlake/error.h"
#include "backends/fault/fault_backend.h"
#include "gmlake/host_backend.h"
#include "gmlake/lake.h"
#include "gmlake/pool.h"
#include "gmlake/sim_backend.h"
#include "../tests/manual_events.h"
#include "gmlake/snapshot_writer.h"
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

void trace_line(const std::string& line) {
  if (kTrace) std::fprintf(stderr, "%s\n", line.c_str());
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

// Opcodes: the first kOps for the bare policy (byte 0 bit 5 clear: the seeds of before keep their meaning), all
// kPoolOps for a Pool.
enum Op : std::uint8_t { kAlloc, kFree, kBeginDeferred, kEndDeferred, kBadFree, kEmptyCache, kSetCap, kArmFault,
                         kResetPeak, kOps, kSave = kOps, kRestore, kRecordStream, kTracing, kLake, kPoolOps,
                         kDevice = kPoolOps, kDeviceOps };

constexpr std::uint64_t kMaxSizeLog2 = 30;  // blocks up to 1 GiB keep page tables and checks small
constexpr std::uint64_t kLenderDeviceBytes = 64 * kMiB;
constexpr int kMaxPauses = 2;  // each pause costs a borrow lake_answer_timeout_ms once: bounds an input's time

// The lake between processes inside this one: a LakeLender over a host backend of its own, served by a thread of
// this target (poll, 1 ms at a time, so a borrow's request is answered at once), which the input commands. Every
// command runs on that thread, the only one that touches the lender, and the caller waits until it is done; the
// commands that look at loans first read everything already sent to the lender (the pool's RETURNs), so an input
// replays the same way as long as the thread answers each request within lake_answer_timeout_ms (1 ms on a busy
// machine may not: the request then times out as with a slow lender, which is allowed).
class LakeSide {
 public:
  enum class Command { kNone, kPause, kResume, kRecall, kExpire, kStop, kClose, kFinish };

  LakeSide(const LakeAddress& address, std::uint64_t budget_bytes, bool start_paused)
      : lender_(std::make_unique<LakeLender>(backend_, address, budget_bytes, std::vector<std::uint32_t>{},
                                             [](const std::string& line) { trace_line("  lender: " + line); })),
        paused_(start_paused),
        thread_([this] { serve(); }) {}
  ~LakeSide() {
    if (thread_.joinable()) run(Command::kFinish);
  }
  LakeSide(const LakeSide&) = delete;
  LakeSide& operator=(const LakeSide&) = delete;

  // Has the lender's thread do `c`, and waits until it did. kFinish (once the pool is gone): every loan is back
  // or stranded, the lender closes, its backend holds nothing; the thread ends.
  void run(Command c) {
    std::unique_lock<std::mutex> lock(mutex_);
    command_ = c;
    changed_.notify_all();
    changed_.wait(lock, [&] { return command_ == Command::kNone; });
    if (c == Command::kFinish) {
      lock.unlock();
      thread_.join();
    }
  }

 private:
  void serve() {
    for (;;) {
      Command c;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (paused_ || lender_ == nullptr) changed_.wait(lock, [&] { return command_ != Command::kNone; });
        c = command_;
      }
      if (c == Command::kNone) {
        lender_->poll(1, now_ns_);
        continue;
      }
      execute(c);
      {
        const std::lock_guard<std::mutex> lock(mutex_);
        command_ = Command::kNone;
      }
      changed_.notify_all();
      if (c == Command::kFinish) return;
    }
  }

  // What has been sent to the lender, read and answered.
  void drain() {
    if (lender_ == nullptr) return;
    while (lender_->poll(0, now_ns_) != 0) {
    }
  }

  void execute(Command c) {
    switch (c) {
      case Command::kPause: paused_ = true; break;  // what comes stays unread: the pool's requests time out
      case Command::kResume: paused_ = false; break;
      case Command::kRecall:
        drain();
        if (lender_ != nullptr) lender_->recall_all(now_ns_ + 1000);
        break;
      case Command::kExpire:  // a recall not answered by now cuts the pool off (its loans stranded here)
        drain();
        now_ns_ += 2000;
        drain();
        break;
      case Command::kStop:
        if (lender_ != nullptr) lender_->stop_lending();
        break;
      case Command::kClose: lender_.reset(); break;
      case Command::kFinish: finish(); break;
      case Command::kNone: break;
    }
  }

  void finish() {
    if (lender_ != nullptr) {
      // The pool closed its connection: its end of file, and any RETURN before it, are waiting.
      for (int n = 0; n < 1000 && lender_->borrowers() != 0; ++n) lender_->poll(1, now_ns_);
      if (lender_->borrowers() != 0) finding("the lender still sees the closed pool as a borrower");
      if (lender_->lent_bytes() != 0) finding("the lender holds loans of a borrower that closed");
      if (backend_.live_chunk_bytes() != lender_->stranded_bytes()) {
        finding("the lender's backend holds " + std::to_string(backend_.live_chunk_bytes()) + " bytes, " +
                std::to_string(lender_->stranded_bytes()) + " of them stranded");
      }
      lender_.reset();
    }
    if (backend_.live_chunks() + backend_.live_mappings() + backend_.live_reservations() != 0) {
      finding("the lender's backend leaked");
    }
  }

  HostBackend backend_{kPageBytes, kLenderDeviceBytes};
  std::unique_ptr<LakeLender> lender_;  // the lender thread's alone while it runs; null once closed
  bool paused_;                         // the lender thread's
  std::uint64_t now_ns_ = 0;            // the lender's clock (recall deadlines): the lender thread's
  std::mutex mutex_;
  std::condition_variable changed_;
  Command command_ = Command::kNone;  // guarded by mutex_
  std::thread thread_;
};

// A lake address no other input or process uses.
LakeAddress next_lake_address() {
  static std::uint64_t inputs = 0;
  return "@gmlake-allocator-fuzz-" + std::to_string(::getpid()) + "-" + std::to_string(inputs++);
}

class Driver {
 public:
  explicit Driver(Bytes& in) {
    const std::uint8_t config_byte = in.next();
    const std::uint8_t more = (config_byte & 0x10) != 0 ? in.next() : 0;
    const bool whole_pool = (config_byte & 0x20) != 0;
    const std::uint8_t pool_byte = whole_pool ? in.next() : 0;
    const bool lake = (pool_byte & 0x1) != 0;
    trace("config bytes %llu %llu %llu", config_byte, more, pool_byte);
    Config config;
    const Policy policies[] = {Policy::kGmlake, Policy::kCaching, Policy::kExpandable};
    config.policy = lake ? Policy::kGmlake : policies[config_byte % 3];  // only gmlake borrows
    config.cross_stream_reuse = (config_byte & 0x4) == 0;
    if ((config_byte & 0x8) != 0) config.max_idle_mapped_bytes = 8 * kMiB;
    switch (more & 0x3) {  // the move budget
      case 1: config.move_share_permille = 0; break;  // unbounded
      // Bounded: the device assumed to wait for the host where no stream can be asked, so that the share
      // charges and refuses moves (with a device, the streams' busy or idle answers decide).
      case 2:
        config.move_share_permille = 1; config.move_burst_ms = 0; config.move_headroom_permille = 0;
        config.assume_device_waits = true;
        break;
      case 3:
        config.move_share_permille = 1000; config.move_burst_ms = 0; config.move_headroom_permille = 1000;
        config.assume_device_waits = true;
        break;
      default: break;
    }
    const std::uint64_t chunks_per_block[] = {32, 0, 1, 4096};
    config.chunks_per_block = chunks_per_block[(more >> 2) & 0x3];
    if ((more & 0x10) != 0) config.max_strand_bytes = 0;
    if ((more & 0x20) != 0) config.memory_first_under_cap = false;
    const bool peers = (more & 0x40) != 0 && !lake;  // one source of peer memory per pool
    if (peers) {
      config.peer_devices = "1";
      if ((more & 0x80) != 0) config.peer_budget_bytes = 64 * kMiB;
    } else if ((more & 0x80) != 0) {
      config.headroom_permille = 0;
    }
    if (lake) {
      config.lake_socket = next_lake_address();
      config.lake_answer_timeout_ms = (pool_byte & 0x2) != 0 ? 10 : 1;
      if ((pool_byte & 0x40) != 0) config.peer_budget_bytes = 8 * kMiB;
      const std::uint64_t lender_budget_bytes[] = {0, 2 * kMiB, 8 * kMiB, 32 * kMiB};
      const bool absent = (pool_byte & 0x4) != 0;  // paused from the start: it never accepts until resumed
      pauses_left_ = absent ? kMaxPauses - 1 : kMaxPauses;
      lake_ = std::make_unique<LakeSide>(config.lake_socket, lender_budget_bytes[(pool_byte >> 3) & 0x3], absent);
    }
    const bool device = whole_pool && !lake && (pool_byte & 0x80) != 0;
    if (device) {
      events_ = std::make_unique<test::ManualEvents>();
      config.cross_stream_reuse = false;
      config.in_order_moves = (pool_byte & 0x40) != 0;
      const std::uint64_t lag_grow_pages[] = {64, 0, 1, 8};
      config.lag_grow_pages = lag_grow_pages[(pool_byte >> 1) & 0x3];
      config.lag_grow_covered = (pool_byte & 0x08) == 0;
      if ((pool_byte & 0x10) != 0) config.lag_headroom_permille = 20;
      config.arena_handover = (pool_byte & 0x20) == 0;
      config.handover_quiet_ms = 1;
    }
    config.validate();
    if (lake) {
      inner_ = std::make_unique<HostBackend>(kPageBytes, (pool_byte & 0x20) != 0 ? 128 * kMiB : 32 * kMiB);
    } else if (peers) {
      inner_ = std::make_unique<SimBackend>(kPageBytes, std::vector<SimDevice>{{256 * kMiB, 0}, {256 * kMiB, 0}});
    } else {
      inner_ = std::make_unique<SimBackend>();
    }
    fault_ = std::make_unique<FaultBackend>(*inner_);
    if (whole_pool) {
      auto pool = std::make_unique<Pool>(config, *fault_, events_.get(), &clock_);
      pool_ = pool.get();
      allocator_ = std::move(pool);
    } else {
      allocator_ = make_allocator(config, *fault_, nullptr, &clock_);
    }
    ops_ = device ? kDeviceOps : whole_pool ? kPoolOps : kOps;
  }

  void step(Bytes& in) {
    clock_.advance_ns(250'000);
    switch (static_cast<Op>(in.next() % ops_)) {
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
      case kSave: save(in); break;
      case kRestore: restore(); break;
      case kRecordStream: record_stream(in); break;
      case kTracing: tracing(in); break;
      case kLake: lake(in); break;
      case kDevice: device_step(in); break;
      case kDeviceOps: break;
    }
    check();
  }

  void finish() {
    fault_->disarm_all();
    if (events_ != nullptr) {
      trace("device: %llu fence waits, %llu moves in stream order, %llu evictions",
            allocator_->stats().fence_waits, allocator_->stats().in_order_evictions, allocator_->stats().evictions);
    }
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
              std::to_string(inner_->live_chunk_bytes(0)) + ", device 1 " +
              std::to_string(inner_->device_count() > 1 ? inner_->live_chunk_bytes(1) : 0) + ", imported " +
              std::to_string(inner_->live_imported_bytes()) + ")");
    }
    allocator_.reset();
    pool_ = nullptr;
    if (inner_->live_chunks() + inner_->live_mappings() + inner_->live_reservations() != 0) finding("backend leak");
    if (lake_ != nullptr) lake_->run(LakeSide::Command::kFinish);
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
    } catch (const BackendError& e) {
      trace("  -> backend error");
      if (fault_->injected_faults() == injected_seen_) {
        finding(std::string("BackendError with no fault injected: ") + e.what());
      }
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
    void* p = reinterpret_cast<void*>(kSimBaseAddress - kRoundBytes);  // kind 3, and 0 or 1 when none is made
    if (kind == 0 && !freed_.empty()) {
      p = freed_[pick(in, freed_.size())];
    } else if (kind == 1 && !live_.empty()) {
      const Live& b = live_[pick(in, live_.size())];
      p = static_cast<char*>(b.ptr) + 1 + in.next() % b.requested_bytes;
    } else if (kind == 2) {
      p = reinterpret_cast<void*>((std::uintptr_t{in.next()} << 12) | 1);
    }
    for (const Live& b : live_) {
      if (b.ptr == p) return nullptr;  // handed out again since: not a bad pointer any more
    }
    return p;
  }

  void bad_free(Bytes& in) {
    void* p = bad_pointer(in);
    if (p == nullptr) return;
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

  // Keeps the live blocks as Pool::restore takes them, mutated or not (a mutated list may be refused).
  void save(Bytes& in) {
    saved_ = pool_->blocks();
    std::vector<BlockInfo>& s = *saved_;
    const std::uint8_t mutation = in.next() % 8;
    const std::size_t i = pick(in, s.size());
    trace("save %llu blocks, mutation %llu of block %llu", s.size(), mutation, i);
    if (s.empty() || mutation < 3) return;
    BlockInfo& b = s[i];
    switch (mutation) {
      case 3: s.erase(s.begin() + static_cast<std::ptrdiff_t>(i)); break;  // made again without it: allowed
      case 4: b.address += kRoundBytes * (1 + in.next() % 4); break;        // may overlap, or leave its segment
      case 5: b.size_bytes += kRoundBytes; break;
      case 6: b.requested_bytes = in.next() % 2 == 0 ? 0 : b.size_bytes + 1; break;  // refused
      case 7: b.pending_free = true; break;                                          // refused
      default: break;
    }
  }

  void restore() {
    if (!saved_) return;
    const std::vector<BlockInfo> before = pool_->blocks();
    const Stats stats_before = pool_->stats();
    trace("restore %llu blocks over %llu live", saved_->size(), before.size());
    try {
      pool_->restore(*saved_);
    } catch (const Error& e) {
      trace("  -> refused");
      if (e.code() != ErrorCode::kInvalidArgument) finding(std::string("restore threw ") + e.what());
      if (!same_blocks(pool_->blocks(), before)) finding("a refused restore changed the blocks");
      const Stats s = pool_->stats();
      if (s.allocated_bytes.current != stats_before.allocated_bytes.current ||
          s.reserved_bytes.current != stats_before.reserved_bytes.current || s.num_frees != stats_before.num_frees) {
        finding("a refused restore changed the stats");
      }
      return;
    } catch (const std::exception& e) {
      finding(std::string("restore threw ") + e.what());
    }
    if (pool_->policy() != Policy::kCaching) finding("restore made blocks on a policy that places none by address");
    std::vector<BlockInfo> wanted = *saved_;
    std::sort(wanted.begin(), wanted.end(),
              [](const BlockInfo& x, const BlockInfo& y) { return x.address < y.address; });
    const std::vector<BlockInfo> made = pool_->blocks();
    if (made.size() != wanted.size()) finding("restore made another number of blocks than asked");
    for (std::size_t k = 0; k < made.size(); ++k) {
      if (made[k].address != wanted[k].address || made[k].size_bytes != wanted[k].size_bytes ||
          made[k].requested_bytes != wanted[k].requested_bytes || made[k].pending_free) {
        finding("restore made a block other than asked at " + std::to_string(wanted[k].address));
      }
    }
    for (const Live& b : live_) freed_.push_back(b.ptr);
    live_.clear();
    for (const BlockInfo& b : made) {
      live_.push_back({reinterpret_cast<void*>(b.address), b.requested_bytes, b.stream, false});
    }
  }

  static bool same_blocks(const std::vector<BlockInfo>& x, const std::vector<BlockInfo>& y) {
    return std::equal(x.begin(), x.end(), y.begin(), y.end(), [](const BlockInfo& a, const BlockInfo& b) {
      return a.address == b.address && a.size_bytes == b.size_bytes && a.requested_bytes == b.requested_bytes &&
             a.stream == b.stream && a.pending_free == b.pending_free;
    });
  }

  void record_stream(Bytes& in) {
    const std::uint8_t kind = in.next() % 4;
    const StreamId stream = in.next() % 4;
    if (events_ != nullptr) return;  // with a device its deferred frees would need a model of the events
    if (kind == 0) {  // a bad pointer: refused, nothing changed
      void* p = bad_pointer(in);
      if (p == nullptr) return;
      trace("record_stream %#llx (bad) stream %llu", reinterpret_cast<std::uintptr_t>(p), stream);
      try {
        pool_->record_stream(p, stream);
        finding("record_stream took a bad pointer");
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kInvalidPointer) finding(std::string("record_stream threw ") + e.what());
      }
      return;
    }
    if (live_.empty()) return;
    const Live& b = live_[pick(in, live_.size())];
    trace("record_stream %#llx stream %llu", reinterpret_cast<std::uintptr_t>(b.ptr), stream);
    try {
      pool_->record_stream(b.ptr, stream);
    } catch (const Error& e) {
      // A pending free is no block to use any more; a live one must be taken.
      if (!b.pending || e.code() != ErrorCode::kInvalidPointer) finding(std::string("record_stream threw ") + e.what());
    }
  }

  void tracing(Bytes& in) {
    const std::uint8_t kind = in.next() % 4;
    const std::uint64_t n = in.next() % 64;
    trace("tracing %llu %llu", kind, n);
    if (kind == 0) pool_->set_tracing(0);
    if (kind == 1) pool_->set_tracing(1 + n);
    if (kind >= 2) {
      std::vector<SnapshotEvent> events;
      const std::size_t max = kind == 2 ? SIZE_MAX : n;
      pool_->drain_trace(&events, max);
      if (events.size() > max) finding("drain_trace gave more entries than asked");
    }
  }

  // The device's queued work (a device only): finishes a stream's, or all of it; or turns a stream busy or idle.
  void device_step(Bytes& in) {
    const std::uint8_t b = in.next();
    const StreamId stream = (b >> 2) % 4;
    trace("device %llu stream %llu", b % 4, stream);
    switch (b % 4) {
      case 0: events_->finish(stream); break;
      case 1: events_->finish_all(); break;
      case 2: events_->busy_streams.insert(stream); break;
      default: events_->busy_streams.erase(stream); break;
    }
  }

  void lake(Bytes& in) {
    const std::uint8_t kind = in.next() % 6;
    if (lake_ == nullptr) return;
    using C = LakeSide::Command;
    const C commands[] = {C::kPause, C::kResume, C::kRecall, C::kExpire, C::kStop, C::kClose};
    if (commands[kind] == C::kPause && pauses_left_-- <= 0) return;
    trace("lake command %llu", kind);
    lake_->run(commands[kind]);
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
    if (static_cast<std::uint64_t>(s.reserved_bytes.current) != inner_->live_chunk_bytes()) {
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
  std::unique_ptr<test::ManualEvents> events_;  // with a device (third configuration byte, bit 7); outlives the pool
  std::unique_ptr<LakeSide> lake_;      // the lender, with the lake; outlives the pool
  std::unique_ptr<Backend> inner_;      // sim, or host with the lake
  std::unique_ptr<FaultBackend> fault_;
  std::unique_ptr<Allocator> allocator_;  // the bare policy, or a Pool (byte 0 bit 5)
  Pool* pool_ = nullptr;                  // allocator_ when it is a Pool
  std::uint8_t ops_ = kOps;
  int pauses_left_ = 0;
  std::vector<Live> live_;
  std::vector<void*> freed_;
  std::optional<std::vector<BlockInfo>> saved_;
  std::uint64_t injected_seen_ = 0;
};

}  // namespace
}  // namespace gmlake::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // With the lake (the third configuration byte's bit 0), every descriptor of the input (sockets, memfds, pidfds)
  // must be closed at its end.
  const std::size_t pool_byte = (size > 0 && (data[0] & 0x10) != 0) ? 2 : 1;
  const bool lake = size > pool_byte && (data[0] & 0x20) != 0 && (data[pool_byte] & 0x1) != 0;
  const int descriptors = lake ? gmlake::fuzz::open_descriptors() : 0;
  {
    gmlake::fuzz::Bytes in(data, size);
    gmlake::fuzz::Driver driver(in);
    while (!in.done()) driver.step(in);
    driver.finish();
  }
  if (lake && gmlake::fuzz::open_descriptors() != descriptors) gmlake::fuzz::finding("a descriptor leaked");
  return 0;
}
