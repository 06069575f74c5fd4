// `gmlake lend` (lend_command.h): argument checks, the backend, the signal handlers, and the log on stderr.
#include "lend_command.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gmlake/backend_factory.h"
#include "gmlake/config.h"
#include "gmlake/error.h"
#include "gmlake/lake.h"
#include "gmlake/units.h"

namespace gmlake::cli {
namespace {

volatile std::sig_atomic_t g_stop = 0;

extern "C" void on_stop_signal(int) { g_stop = 1; }

[[noreturn]] void bad_option(const std::string& message) {
  std::fprintf(stderr, "gmlake lend: %s\n", message.c_str());
  std::exit(2);
}

void log_line(const std::string& line) {
  std::fprintf(stderr, "gmlake lend: %s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace

int run_lend(const LendOptions& options) {
  std::uint64_t budget_bytes = 0;
  try {
    check_lake_socket(options.socket);
    budget_bytes = parse_config("cap_bytes:" + options.budget).cap_bytes;  // the same byte-count syntax
  } catch (const Error& e) {
    bad_option(std::string(e.what()) + (options.socket == "none" ? "" : " (--socket, --budget)"));
  }
  if (options.socket == "none") bad_option("--socket: expected an absolute path or @name");
  if (budget_bytes % kPageBytes != 0) {
    bad_option("--budget: " + std::to_string(budget_bytes) + " bytes is not a multiple of the chunk size " +
               std::to_string(kPageBytes));
  }
  if (options.backend != "cuda" && options.backend != "host") bad_option("--backend: expected cuda or host");
  if (options.device < 0) bad_option("--device: expected a device ordinal 0, 1, ...");
  if (options.backend == "host" && options.device != 0) bad_option("--device: the host backend has device 0 only");
  const std::string backend_name = options.backend == "cuda" ? "cuda:" + std::to_string(options.device) : "host";
  std::unique_ptr<Backend> backend;
  try {
    backend = make_backend(backend_name, kPageBytes, /*exportable=*/true);
  } catch (const Error& e) {
    bad_option(std::string("--backend ") + backend_name + ": " + e.what());
  }
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  LakeLender lender(*backend, options.socket, budget_bytes, options.allow_uids, log_line);
  std::string uids = std::to_string(::geteuid());
  for (const std::uint32_t u : options.allow_uids) uids += "," + std::to_string(u);
  log_line("ready: lending up to " + (budget_bytes == 0 ? std::string("all free") : std::to_string(budget_bytes)) +
           " bytes of " + backend_name + " at " + options.socket + " to uids " + uids + " (pid " +
           std::to_string(::getpid()) + ")");
  const std::uint64_t kept_bytes = serve_until_stopped(lender, g_stop, options.recall_ms);
  if (kept_bytes != 0) {
    log_line("stopped: " + std::to_string(kept_bytes) + " bytes not returned within " +
             std::to_string(options.recall_ms) + " ms (their borrowers were cut off)");
    return 1;
  }
  log_line("stopped: every loan returned");
  return 0;
}

}  // namespace gmlake::cli
