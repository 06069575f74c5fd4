// An engine made without the lake: this program links the policies' and backends' libraries only (not
// gmlake_lake, not the Pool's layer), so it builds only while the engine needs no lake code. It makes the gmlake
// policy on the sim backend, with and without peer devices, allocates past the own device into a peer and frees,
// and checks the invariants; a config that names a lender is refused, since no lake was given. Exit 0: passed.
#include <cstdio>
#include <string>

#include "gmlake/allocator.h"
#include "gmlake/error.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"

namespace {

int fail(const char* what) {
  std::fprintf(stderr, "engine_without_lake: %s\n", what);
  return 1;
}

}  // namespace

int main() {
  using namespace gmlake;
  try {
    SimBackend sim(kPageBytes, {SimDevice{8 * kMiB, 0}, SimDevice{8 * kMiB, 0}});
    const auto engine = make_allocator(parse_config("peer_devices:1"), sim);
    void* own = engine->allocate(8 * kMiB, 0);
    void* lent = engine->allocate(4 * kMiB, 0);  // the own device is full: from the peer
    engine->check_invariants();
    if (engine->stats().peer_reserved_bytes.current != static_cast<std::int64_t>(4 * kMiB)) {
      return fail("the peer device did not back the block past the own device");
    }
    engine->deallocate(lent);
    engine->deallocate(own);
    engine->check_invariants();
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  try {
    SimBackend sim;
    make_allocator(parse_config("lake_socket:@nobody"), sim);
    return fail("a lake_socket with no lake given was accepted");
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kConfig || std::string(e.what()).find("lake_socket") == std::string::npos) {
      return fail(e.what());
    }
  }
  std::puts("ok: the gmlake engine runs without the lake's library");
  return 0;
}
