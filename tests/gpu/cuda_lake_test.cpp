// The lake on GPUs (docs/design.md, "The lake"): a gmlake pool on device 0 past its cap holds blocks on device 1
// (cuMemCreate at device 1, mapped in device 0's arena, cuMemSetAccess for device 0), and device 0 reads and
// writes them over the peer link; and a process on device 1 lends a chunk to this process on device 0
// (include/gmlake/lake.h: exported as a POSIX fd, sent by SCM_RIGHTS, imported and mapped here), both sides
// seeing each other's bytes. The lender is a fresh run of this binary (fork, then exec, as cuda_ipc_test.cpp:
// CUDA does not survive a fork). Needs two devices with peer access; skipped otherwise. The lending path
// itself (export, SCM_RIGHTS, import, map, the pool's `lake_socket`, RETURN) is also run with lender and
// borrower on the same device (CudaLakeSameDeviceTest), which one GPU suffices for.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_stream_events.h"
#include "gmlake/allocator.h"
#include "gmlake/config.h"
#include "gmlake/error.h"
#include "gmlake/lake.h"
#include "gmlake/units.h"
#include "gpu/cuda_test_support.h"
#include "lake/lake_peers.h"
#include "policies/gmlake/stitching_allocator.h"
#include "ipc_test_support.h"

namespace gmlake {
namespace {

class CudaLakeTest : public gpu_test::CudaTest {
 protected:
  void SetUp() override {
    gpu_test::CudaTest::SetUp();
    if (IsSkipped()) return;
    const cuda::DriverApi& api = cuda::driver();
    int count = 0;
    cuda::check("cuDeviceGetCount", api.cuDeviceGetCount(&count));
    if (count < 2) GTEST_SKIP() << "one CUDA device: the lake needs a peer";
    CUdevice d0 = 0, d1 = 0;
    cuda::check("cuDeviceGet", api.cuDeviceGet(&d0, 0));
    cuda::check("cuDeviceGet", api.cuDeviceGet(&d1, 1));
    int can_access = 0;
    cuda::check("cuDeviceCanAccessPeer", api.cuDeviceCanAccessPeer(&can_access, d0, d1));
    if (can_access == 0) GTEST_SKIP() << "device 0 cannot access device 1's memory (no P2P path)";
  }
};

TEST_F(CudaLakeTest, APoolPastItsCapHoldsBlocksOnThePeerThatDevice0ReadsAndWrites) {
  constexpr std::uint64_t kCapBytes = 64 * kMiB;
  CudaBackend backend(CudaBackendOptions{});
  std::unique_ptr<Allocator> allocator =
      make_allocator(parse_config("cap_bytes:64M,peer_devices:1,peer_budget_bytes:256M"), backend);
  void* local = allocator->allocate(kCapBytes, 0);
  void* peer = allocator->allocate(32 * kMiB, 0);  // past the cap: on device 1
  allocator->check_invariants();
  EXPECT_EQ(allocator->stats().peer_reserved_bytes.current, static_cast<std::int64_t>(32 * kMiB));
  EXPECT_EQ(backend.live_chunk_bytes(1), 32 * kMiB);
  EXPECT_EQ(backend.live_chunk_bytes(0), kCapBytes);
  const auto at = reinterpret_cast<std::uintptr_t>(peer);
  gpu_test::fill_bytes(at, 0x5A, 32 * kMiB);  // device 0 writes device 1's memory
  gpu_test::synchronize();
  const std::vector<std::uint8_t> back = gpu_test::read_bytes(at, 32 * kMiB);
  EXPECT_EQ(std::count(back.begin(), back.end(), 0x5A), static_cast<std::ptrdiff_t>(back.size()));
  allocator->deallocate(peer);
  allocator->deallocate(local);
  allocator->empty_cache();
  allocator->check_invariants();
  EXPECT_EQ(backend.live_chunks(), 0u);
}

TEST_F(CudaLakeTest, ThePeersBudgetBoundsWhatIsBorrowed) {
  CudaBackend backend(CudaBackendOptions{});
  std::unique_ptr<Allocator> allocator =
      make_allocator(parse_config("cap_bytes:64M,peer_devices:1,peer_budget_bytes:32M"), backend);
  void* local = allocator->allocate(64 * kMiB, 0);
  void* peer = allocator->allocate(32 * kMiB, 0);
  EXPECT_THROW(allocator->allocate(2 * kMiB, 0), OutOfMemoryError);
  allocator->check_invariants();
  allocator->deallocate(peer);
  allocator->deallocate(local);
}

constexpr std::uint64_t kLoanBytes = 32 * kMiB;

// The lender's process (on `device`): lends chunks, and once one is out answers the parent's message (a loan
// id, or "all") with whether that loan (every loan) holds 0x5A, serves until the borrower has gone, and exits 0
// when every chunk came back.
int cuda_lender(int to_parent, int from_parent, const std::string& address, int device) {
  try {
    CudaBackendOptions options;
    options.device = device;
    options.exportable = true;
    CudaBackend backend(options);
    cuda::check("cuCtxPushCurrent", cuda::driver().cuCtxPushCurrent(static_cast<CUcontext>(backend.context())));
    if (std::getenv("GMLAKE_LAKE_DIRTY") != nullptr) {
      // This process's earlier use of its memory: 64 chunks of the loan's size written with 0xA5 and released,
      // so that the driver has them at hand for the loans' cuMemCreate.
      std::vector<ChunkHandle> used;
      for (int i = 0; i < 64; ++i) used.push_back(backend.create(kLoanBytes));
      for (const ChunkHandle c : used) {
        const std::uintptr_t at = backend.reserve(kLoanBytes);
        backend.map(at, kLoanBytes, c);
        backend.set_access(at, kLoanBytes);
        gpu_test::fill_bytes(at, 0xA5, kLoanBytes);
        gpu_test::synchronize();
        backend.unmap(at, kLoanBytes);
        backend.address_free(at, kLoanBytes);
      }
      for (const ChunkHandle c : used) backend.release(c);
    }
    LakeLender lender(backend, address, 0);
    test::send_message(to_parent, "ready");
    // Serve until the loans the parent asks for before its message are out (GMLAKE_LAKE_LOANS, default 1): the
    // parent's message is read with a blocking read, during which no loan is served.
    const char* loans_wanted = std::getenv("GMLAKE_LAKE_LOANS");
    const std::size_t wanted = loans_wanted != nullptr ? std::strtoull(loans_wanted, nullptr, 10) : 1;
    while (lender.lent_bytes() == 0 || lender.loans().size() < wanted) lender.poll(-1, 0);
    const std::string which = test::receive_message(from_parent);
    if (which == "recall") {  // every loan asked back; answers once they all came back, or after 20 s
      lender.recall_all(UINT64_MAX);
      for (int i = 0; i < 2000 && lender.lent_bytes() != 0; ++i) lender.poll(10, 0);
      test::send_message(to_parent, lender.lent_bytes() == 0 ? "returned" : "kept");
      while (lender.borrowers() != 0) lender.poll(-1, 0);
      return backend.live_chunks() == 0 ? 0 : 10;
    }
    std::vector<std::pair<std::uint64_t, std::uint64_t>> loans;  // id, bytes
    if (which == "all") {
      for (const auto& [id, bytes] : lender.loans()) loans.emplace_back(id, bytes);
    } else {
      loans.emplace_back(std::stoull(which), kLoanBytes);
    }
    bool all = !loans.empty();
    for (const auto& [id, size_bytes] : loans) {
      const std::uintptr_t at = backend.reserve(size_bytes);
      backend.map(at, size_bytes, lender.loan_chunk(id));
      backend.set_access(at, size_bytes);
      const std::vector<std::uint8_t> bytes = gpu_test::read_bytes(at, size_bytes);
      backend.unmap(at, size_bytes);
      backend.address_free(at, size_bytes);
      all = all && std::count(bytes.begin(), bytes.end(), 0x5A) == static_cast<std::ptrdiff_t>(bytes.size());
    }
    test::send_message(to_parent, all ? "ok" : "bad");
    while (lender.borrowers() != 0) lender.poll(-1, 0);
    return backend.live_chunks() == 0 ? 0 : 10;
  } catch (const std::exception& e) {
    test::send_message(to_parent, std::string("error: ") + e.what());
    return 2;
  }
}

// The lender's half: runs only when started by the test below.
TEST(CudaLakeLender, Run) {
  const char* up = std::getenv("GMLAKE_LAKE_UP");
  const char* down = std::getenv("GMLAKE_LAKE_DOWN");
  const char* address = std::getenv("GMLAKE_LAKE_ADDRESS");
  const char* device = std::getenv("GMLAKE_LAKE_DEVICE");
  if (up == nullptr || down == nullptr || address == nullptr || device == nullptr) {
    GTEST_SKIP() << "the lender half of CudaLakeTest";
  }
  std::fflush(stdout);
  _exit(cuda_lender(std::atoi(up), std::atoi(down), address, std::atoi(device)));
}

// Starts the lender's process on `device`, serving at `address`; with `visible_devices`, the lender runs under
// CUDA_VISIBLE_DEVICES=visible_devices (as a launcher that gives each process one GPU starts it), so `device`
// counts within what it sees.
// `dirty`: the lender writes 0xA5 over chunks of its own and releases them before it lends (GMLAKE_LAKE_DIRTY).
// `loans`: how many loans the parent takes before its message (GMLAKE_LAKE_LOANS).
std::unique_ptr<test::ForkedChild> start_lender(const std::string& address, int device,
                                                const std::string& visible_devices = "", bool dirty = false,
                                                int loans = 1) {
  return std::make_unique<test::ForkedChild>([address, device, visible_devices, dirty, loans](int up, int down) {
    if (!visible_devices.empty()) setenv("CUDA_VISIBLE_DEVICES", visible_devices.c_str(), 1);
    if (dirty) setenv("GMLAKE_LAKE_DIRTY", "1", 1);
    setenv("GMLAKE_LAKE_LOANS", std::to_string(loans).c_str(), 1);
    setenv("GMLAKE_LAKE_UP", std::to_string(up).c_str(), 1);
    setenv("GMLAKE_LAKE_DOWN", std::to_string(down).c_str(), 1);
    setenv("GMLAKE_LAKE_ADDRESS", address.c_str(), 1);
    setenv("GMLAKE_LAKE_DEVICE", std::to_string(device).c_str(), 1);
    execl("/proc/self/exe", "gmlake_gpu_tests", "--gtest_filter=CudaLakeLender.Run", static_cast<char*>(nullptr));
    return 97;
  });
}

// A raw loan: borrowed, mapped, written here, read by the lender, given back.
void lend_write_and_check(int lender_device) {
  const std::string address = "@gmlake-cuda-lake-" + std::to_string(::getpid());
  std::unique_ptr<test::ForkedChild> child = start_lender(address, lender_device);
  ASSERT_EQ(child->receive(), "ready");
  CudaBackend backend(CudaBackendOptions{});
  {
    LakeBorrower borrower(backend, address);
    const Loan loan = borrower.borrow(kLoanBytes);
    const std::uintptr_t at = backend.reserve(kLoanBytes);
    backend.map(at, kLoanBytes, loan.chunk);
    backend.set_access(at, kLoanBytes);  // device 0 reaches the lender's memory
    gpu_test::fill_bytes(at, 0x5A, kLoanBytes);
    gpu_test::synchronize();
    ASSERT_TRUE(child->send(std::to_string(loan.id)));
    EXPECT_EQ(child->receive(), "ok") << "the lender sees the borrower's bytes";
    backend.unmap(at, kLoanBytes);
    backend.address_free(at, kLoanBytes);
    borrower.give_back(loan.id);
  }
  EXPECT_EQ(child->wait(), 0) << "the lender got its chunk back";
  EXPECT_EQ(backend.live_chunks(), 0u);
}

class CudaLakeSameDeviceTest : public gpu_test::CudaTest {};

TEST_F(CudaLakeSameDeviceTest, AChunkLentByAnotherProcessOnThisDeviceIsWrittenHereAndSeenThere) {
  lend_write_and_check(0);
}

// Issue 25: a loan holds none of the lender's earlier bytes. The lender (another process on this device) wrote
// 0xA5 over 64 chunks of the loan's size and released them before lending; the loans read here are all zero
// (Backend::scrub: cuMemsetD8 before export). Then the usual round trip (0x5A written here, seen there).
TEST_F(CudaLakeSameDeviceTest, AChunkLentHoldsNoneOfTheLendersEarlierBytes) {
  const std::string address = "@gmlake-cuda-lake-dirty-" + std::to_string(::getpid());
  std::unique_ptr<test::ForkedChild> child = start_lender(address, 0, "", /*dirty=*/true, /*loans=*/8);
  ASSERT_EQ(child->receive(), "ready");
  CudaBackend backend(CudaBackendOptions{});
  {
    LakeBorrower borrower(backend, address);
    std::vector<Loan> loans;
    for (int i = 0; i < 8; ++i) loans.push_back(borrower.borrow(kLoanBytes));
    std::uint64_t pattern = 0, non_zero = 0;
    for (const Loan& loan : loans) {
      const std::uintptr_t at = backend.reserve(kLoanBytes);
      backend.map(at, kLoanBytes, loan.chunk);
      backend.set_access(at, kLoanBytes);
      const std::vector<std::uint8_t> bytes = gpu_test::read_bytes(at, kLoanBytes);
      pattern += static_cast<std::uint64_t>(std::count(bytes.begin(), bytes.end(), 0xA5));
      non_zero += static_cast<std::uint64_t>(bytes.size() - std::count(bytes.begin(), bytes.end(), 0));
      gpu_test::fill_bytes(at, 0x5A, kLoanBytes);
      gpu_test::synchronize();
      backend.unmap(at, kLoanBytes);
      backend.address_free(at, kLoanBytes);
    }
    EXPECT_EQ(pattern, 0u) << "bytes of the lender's earlier chunks in 8 loans";
    EXPECT_EQ(non_zero, 0u);
    ASSERT_TRUE(child->send("all"));
    EXPECT_EQ(child->receive(), "ok") << "the lender sees the borrower's bytes";
    for (const Loan& loan : loans) borrower.give_back(loan.id);
  }
  EXPECT_EQ(child->wait(), 0) << "the lender got its chunks back";
  EXPECT_EQ(backend.live_chunks(), 0u);
}

// A gmlake pool on device 0 with `cap_bytes:64M,lake_socket:...` borrows the 32 MiB past its cap from a lender
// process on `lender_device` (under `visible_devices`, see start_lender); the lender sees the block's bytes in
// what it lent, and gets every chunk back at empty_cache.
void pool_borrows_past_its_cap(int lender_device, const std::string& visible_devices = "") {
  const std::string address = "@gmlake-cuda-lake-pool-" + std::to_string(::getpid());
  std::unique_ptr<test::ForkedChild> child = start_lender(address, lender_device, visible_devices);
  ASSERT_EQ(child->receive(), "ready");
  CudaBackend backend(CudaBackendOptions{});
  {
    const Config config = parse_config("cap_bytes:64M,lake_socket:" + address + ",peer_budget_bytes:256M");
    const std::unique_ptr<ChunkProvider> lake = make_lake_peers(config, backend);  // outlives the allocator
    std::unique_ptr<Allocator> allocator = make_allocator(config, backend, nullptr, nullptr, lake.get());
    void* local = allocator->allocate(64 * kMiB, 0);
    void* borrowed = allocator->allocate(kLoanBytes, 0);  // past the cap: from the lender
    allocator->check_invariants();
    EXPECT_EQ(allocator->stats().peer_reserved_bytes.current, static_cast<std::int64_t>(kLoanBytes));
    const auto at = reinterpret_cast<std::uintptr_t>(borrowed);
    gpu_test::fill_bytes(at, 0x5A, kLoanBytes);
    gpu_test::synchronize();
    ASSERT_TRUE(child->send("all"));
    EXPECT_EQ(child->receive(), "ok") << "the lender sees the block's bytes in what it lent";
    allocator->deallocate(borrowed);
    allocator->deallocate(local);
    allocator->empty_cache();  // the loan goes back
    allocator->check_invariants();
    EXPECT_EQ(allocator->stats().peer_reserved_bytes.current, 0);
  }
  EXPECT_EQ(child->wait(), 0) << "the lender got every chunk back";
  EXPECT_EQ(backend.live_chunks(), 0u);
}

TEST_F(CudaLakeSameDeviceTest, APoolPastItsCapBorrowsFromALenderProcessAndTheLenderSeesTheBlocksBytes) {
  pool_borrows_past_its_cap(0);
}

// One GPU per process, as a launcher that sets CUDA_VISIBLE_DEVICES per rank runs them: the lender sees only the
// GPU named by GMLAKE_TEST_LENDER_VISIBLE_DEVICES (its device 0). Run it with this process limited too, e.g.
//   CUDA_VISIBLE_DEVICES=0 GMLAKE_TEST_LENDER_VISIBLE_DEVICES=1 gmlake_gpu_tests --gtest_filter='*SeesOnlyItsOwn*'
// so that neither process can name the other's device. Skipped without that variable.
TEST_F(CudaLakeSameDeviceTest, APoolBorrowsFromALenderThatSeesOnlyItsOwnGpu) {
  const char* visible = std::getenv("GMLAKE_TEST_LENDER_VISIBLE_DEVICES");
  if (visible == nullptr || *visible == '\0') GTEST_SKIP() << "set GMLAKE_TEST_LENDER_VISIBLE_DEVICES";
  pool_borrows_past_its_cap(0, visible);
}

TEST_F(CudaLakeTest, AChunkLentByTheProcessOnDevice1IsWrittenHereAndSeenThere) { lend_write_and_check(1); }

TEST_F(CudaLakeTest, APoolOnDevice0PastItsCapBorrowsFromALenderProcessOnDevice1) { pool_borrows_past_its_cap(1); }

// The config of a gmlake engine with asynchronous streams, a 64 MiB cap and the lender at `address` past it.
Config streamed_lake_config(const std::string& address) {
  return parse_config("cap_bytes:64M,cross_stream_reuse:false,peer_budget_bytes:256M,lake_socket:" + address);
}

// Queues `n` writes of the whole block on `stream` (each over the peer link: ~0.1 ms per 32 MiB on H200s).
void queue_writes(void* block, std::uint64_t size_bytes, int n, CUstream stream) {
  for (int i = 0; i < n; ++i) {
    cuda::check("cuMemsetD32Async", cuda::driver().cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(block),
                                                                    0x5A5A5A5Au, size_bytes / 4, stream));
  }
}

// A recall that comes while the pool's stream still writes the loan: the loan goes back only once that work
// has finished (cuMemUnmap does not wait for it), at the first call after it, with no fault; the lender on
// device 1 gets it back. (That it goes back with no further free on its stream is LakePeersTest's
// ARecalledLoanUnderQueuedWorkGoesBackOnceThatWorkFinished, on the CPU.)
TEST_F(CudaLakeTest, ARecalledLoanUnderQueuedWorkGoesBackOnlyOnceThatWorkFinished) {
  const std::string address = "@gmlake-cuda-lake-recall-" + std::to_string(::getpid());
  std::unique_ptr<test::ForkedChild> child = start_lender(address, 1);
  ASSERT_EQ(child->receive(), "ready");
  CudaBackend backend(CudaBackendOptions{});
  CudaStreamEvents events(backend);
  const CUstream a = gpu_test::make_stream();
  const auto sa = reinterpret_cast<StreamId>(a);
  {
    const Config config = streamed_lake_config(address);
    const std::unique_ptr<ChunkProvider> lake = make_lake_peers(config, backend);  // outlives the engine
    engine::StitchingAllocator alloc(config, backend, &events, nullptr, lake.get());
    void* local = alloc.allocate(64 * kMiB, sa);
    void* borrowed = alloc.allocate(kLoanBytes, sa);  // past the cap: the loan
    EXPECT_EQ(alloc.stats().peer_reserved_bytes.current, static_cast<std::int64_t>(kLoanBytes));
    queue_writes(borrowed, kLoanBytes, 2000, a);  // about 0.2 s of writes over the link
    const StreamEvents::Token writes_done = events.record(sa);
    alloc.deallocate(local);     // the stream's first mark
    alloc.deallocate(borrowed);  // between marks: none of its own
    ASSERT_TRUE(child->send("recall"));
    // Calls while the writes run: each serves the recall, none may give the loan back yet.
    for (int i = 0; i < 20 && !events.done(writes_done); ++i) {
      ::usleep(2000);
      void* p = alloc.allocate(2 * kMiB, sa);  // in local's pages: no backend call
      const bool running = !events.done(writes_done);
      if (running) {
        EXPECT_EQ(alloc.stats().peer_reserved_bytes.current, static_cast<std::int64_t>(kLoanBytes))
            << "the loan went back while the stream still wrote it";
      }
      alloc.deallocate(p);
    }
    events.wait(writes_done);
    events.release(writes_done);
    void* q = alloc.allocate(2 * kMiB, sa);  // after the writes: this call gives the loan back
    alloc.check_invariants();
    EXPECT_EQ(alloc.stats().peer_reserved_bytes.current, 0);
    EXPECT_EQ(child->receive(), "returned");
    gpu_test::synchronize();  // any write into an unmapped range would fault here
    alloc.deallocate(q);
    alloc.empty_cache();
  }
  EXPECT_EQ(child->wait(), 0) << "the lender got its chunk back";
  EXPECT_EQ(backend.live_chunks(), 0u);
  cuda::driver().cuStreamDestroy(a);
}

// The lender killed while the pool's stream writes its loan: the memory stays (an import holds its own
// reference), the writes complete with no fault and their bytes are there; the pool goes on on its own device,
// gives the loan up once its block is freed, and cannot borrow any more.
TEST_F(CudaLakeTest, ALenderKilledWhileTheStreamWritesItsLoanLeavesTheBytesAndThePoolIntact) {
  const std::string address = "@gmlake-cuda-lake-kill-" + std::to_string(::getpid());
  std::unique_ptr<test::ForkedChild> child = start_lender(address, 1);
  ASSERT_EQ(child->receive(), "ready");
  CudaBackend backend(CudaBackendOptions{});
  CudaStreamEvents events(backend);
  const CUstream a = gpu_test::make_stream();
  const auto sa = reinterpret_cast<StreamId>(a);
  {
    const Config config = streamed_lake_config(address);
    const std::unique_ptr<ChunkProvider> lake = make_lake_peers(config, backend);  // outlives the engine
    engine::StitchingAllocator alloc(config, backend, &events, nullptr, lake.get());
    void* local = alloc.allocate(64 * kMiB, sa);
    void* borrowed = alloc.allocate(kLoanBytes, sa);
    queue_writes(borrowed, kLoanBytes, 1000, a);
    ::kill(child->pid(), SIGKILL);
    EXPECT_EQ(child->wait(), -1) << "killed";
    gpu_test::synchronize();  // the writes complete with no fault
    const std::vector<std::uint8_t> bytes = gpu_test::read_bytes(reinterpret_cast<std::uintptr_t>(borrowed), kLoanBytes);
    EXPECT_EQ(std::count(bytes.begin(), bytes.end(), 0x5A), static_cast<std::ptrdiff_t>(bytes.size()));
    alloc.deallocate(borrowed);  // the lender is gone: released here
    alloc.check_invariants();
    EXPECT_EQ(alloc.stats().peer_reserved_bytes.current, 0);
    EXPECT_THROW(alloc.allocate(kLoanBytes, sa), OutOfMemoryError) << "no lender: nothing past the cap";
    alloc.check_invariants();
    alloc.deallocate(local);
    alloc.empty_cache();
  }
  EXPECT_EQ(backend.live_chunks(), 0u);
  cuda::driver().cuStreamDestroy(a);
}


}  // namespace
}  // namespace gmlake
