// The lake between processes: a process whose GPU has memory to spare lends physical chunks to a neighbour
// process (one process per GPU, as torchrun runs them), and can ask for them back.
//
// Protocol (docs/design.md, "The lake"). The lender listens on a Unix domain socket (SOCK_SEQPACKET: one message
// per packet, and end-of-file when the other side's process exits); a borrower connects to it. Messages are
// fixed 40-byte records (src/lake/lake_wire.h):
//   borrower -> lender   REQUEST(size)            lend me a chunk of size bytes
//   lender -> borrower   GRANT(loan, size, off)   + the chunk's file descriptor (SCM_RIGHTS): cuda, the
//                                                 cuMemExportToShareableHandle fd; host, the memfd and the offset
//                        REFUSE(reason)           out of memory, over the lender's budget, a bad size
//   lender -> borrower   RECALL(loan)             give it back: unmap it, release it, then RETURN
//   borrower -> lender   RETURN(loan)             released here; the lender releases its chunk
// The lender makes each loan a chunk of its own backend (Backend::create, then export_chunk); the borrower
// imports it into its backend (Backend::import_chunk) and maps it where it wants. Fds travel with SCM_RIGHTS,
// so no ptrace access is needed (unlike include/gmlake/ipc.h's pidfd_getfd).
//
// Failure handling:
//   - The borrower exits or crashes holding loans: its socket closes; the lender's next poll() releases those
//     chunks (the borrower's mappings died with it; on cuda the memory is freed once the last handle goes).
//   - The lender exits or crashes while loans are out: the borrower's next poll() sees the socket close and
//     marks itself orphaned (lender_gone()). Its loans stay valid: an imported chunk holds its own reference
//     (cuda: the memory lives until every importer released it; host: the borrower's descriptor keeps the
//     lender's memfd alive). No recall can come any more and no new loan is granted; the borrower gives each
//     loan back (give_back releases it locally) when it no longer needs it.
//   - A recall not answered by its deadline: memory mapped in another live process cannot be taken from it.
//     The lender cuts that borrower off (closes its connection: no more loans; the borrower sees the lender as
//     gone) and keeps the chunks as stranded, released once the borrower process exits (watched through a
//     pidfd): never reused while a live process may still map them. The caller may kill the borrower.
//   - Out of memory: a lender that cannot create the chunk (or is at its budget) answers REFUSE; borrow() then
//     throws OutOfMemoryError and nothing changed on either side.
// Trust (docs/reliability.md, "The lake and IPC as trust boundaries"): the lender serves a borrower only when
// the kernel's record of the borrower's uid (SO_PEERCRED) is the lender's own effective uid or one of its
// allowed uids (Config::lake_allowed_uids); any other gets REFUSE(not allowed), no descriptor, its connection
// closed, and one line in the log. The borrower checks the lender's uid the same way before it sends anything.
// A path socket is created mode 0600. Every chunk lent is zeroed first (Backend::scrub): none of the lender's
// earlier bytes reach a borrower. Each side treats what the other sends as hostile: a malformed record, a
// descriptor where none belongs or of the wrong kind, a loan id twice, a size not asked for, or a peer that
// stops reading (non-blocking sends) ends that connection; neither side crashes, blocks or leaks a chunk.
// Time: deadlines are in the caller's clock (now_ns passed to LakeLender::poll), so tests use a manual one.
// Thread safety: none; each object is used by one thread (its process's allocator lock).
// Platform: Linux (SOCK_SEQPACKET, SCM_RIGHTS, SO_PEERCRED, pidfd_open: Linux >= 5.3).
#pragma once

#include <csignal>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gmlake/backend.h"

namespace gmlake {

// Address of a lender's socket: a filesystem path, or "@name" for Linux's abstract namespace (no file, gone
// when the lender closes it). At most 107 bytes.
using LakeAddress = std::string;

// Where a lender's events go, one line each (loans, returns, recalls, refusals, cut-offs, borrowers that come
// and go); called on the lender's thread from poll() and recall_all(); must not throw.
using LakeLog = std::function<void(const std::string& line)>;

// A chunk lent to this process.
struct Loan {
  std::uint64_t id = 0;            // the lender's loan id
  ChunkHandle chunk;               // imported into the borrower's backend: map it whole, as a created chunk
  std::uint64_t size_bytes = 0;
  bool recalled = false;           // the lender asked for it back: evict, then give_back
};

class LakeLender {
 public:
  // Lends chunks of `backend` (its own device's memory), at most `budget_bytes` at once (0: as much as the
  // device gives). Listens at `address` (a path: mode 0600). Serves borrowers whose uid is this process's
  // effective uid or in `allowed_uids`; refuses the others (see Trust above). `log`: where every event goes
  // (null: only refusals of borrowers, to stderr). Throws BackendError("socket"|"bind"|"chmod"|"listen", ...)
  // (address in use), Error(kInvalidArgument) for an address that is empty or too long. `backend` must outlive
  // the lender and be able to export and scrub (host, cuda).
  LakeLender(Backend& backend, const LakeAddress& address, std::uint64_t budget_bytes,
             std::vector<std::uint32_t> allowed_uids = {}, LakeLog log = nullptr);
  // Closes every connection, releases every chunk still lent (the borrowers' imports keep the memory alive: on
  // cuda by the driver's reference count, on host by the borrower's descriptor of the chunk's own file) and
  // removes a path socket's file. Never throws.
  ~LakeLender();
  LakeLender(const LakeLender&) = delete;
  LakeLender& operator=(const LakeLender&) = delete;

  // Serves everything pending: accepts borrowers, answers requests (GRANT or REFUSE), takes returns, releases
  // the loans of borrowers that exited, and cuts off borrowers whose recall deadline is before `now_ns`.
  // Waits up to timeout_ms for the first event (0: not at all; -1: until one comes). Returns the number of
  // messages and exits handled. Throws BackendError when poll(2) itself fails; a bad message from a borrower
  // cuts that borrower off (its loans are stranded as above) and is not an error here.
  std::uint64_t poll(int timeout_ms, std::uint64_t now_ns);
  // From now on every request is refused (as over budget, REFUSE); loans out stay out until returned or
  // recalled. For a lender that is stopping (serve_until_stopped).
  void stop_lending();
  // Asks for every loan back by `deadline_ns` (the caller's clock). Returns how many loans were recalled.
  std::uint64_t recall_all(std::uint64_t deadline_ns);

  // The loans out to connected borrowers, recalled or not: loan id -> size in bytes.
  std::map<std::uint64_t, std::uint64_t> loans() const;
  // Bytes on loan to connected borrowers, recalled or not.
  std::uint64_t lent_bytes() const;
  // Bytes held for cut-off borrowers until they exit.
  std::uint64_t stranded_bytes() const;
  // Borrowers connected now.
  std::uint64_t borrowers() const;
  // The lender's chunk behind loan `loan_id` (map it in the lender's backend to see the bytes the borrower
  // sees; unmap it before the loan comes back, else its release is retried at each poll). Throws
  // Error(kInvalidArgument) for a loan not out to a connected borrower.
  ChunkHandle loan_chunk(std::uint64_t loan_id) const;
  // Requests answered REFUSE so far (out of memory, budget, bad size, export or scrub failed).
  std::uint64_t refused_requests() const { return refused_; }
  // Connections refused because the borrower's uid is not allowed (nothing was lent to them).
  std::uint64_t refused_borrowers() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::uint64_t refused_ = 0;
};

class LakeBorrower {
 public:
  // Connects to the lender at `address`; imports loans into `backend` (which must outlive the borrower and be
  // able to import: host, cuda). `answer_timeout_ms`: how long borrow() waits for an answer (0: as long as the
  // lender lives). Throws BackendError("connect", ...) when no lender listens there, BackendError("lake", ...
  // "uid ...") when the lender's uid (SO_PEERCRED) is neither this process's effective uid nor in
  // `allowed_uids`: nothing is sent to it.
  LakeBorrower(Backend& backend, const LakeAddress& address, std::uint64_t answer_timeout_ms = 0,
               const std::vector<std::uint32_t>& allowed_uids = {});
  // Releases every loan still held (each must be mapped nowhere by then; one still mapped is left to the
  // backend) and closes the connection. Never throws.
  ~LakeBorrower();
  LakeBorrower(const LakeBorrower&) = delete;
  LakeBorrower& operator=(const LakeBorrower&) = delete;

  // Asks for a chunk of `size_bytes` (a non-zero multiple of the backend's granularity, else
  // Error(kInvalidArgument)) and waits for the answer; recalls that arrive meanwhile are kept for the next poll.
  // Throws OutOfMemoryError when the lender refuses for memory or budget, Error(kInvalidArgument) when it
  // refuses the size, Error(kBackend) "lender gone" once the lender has exited or cut this borrower off (or
  // "refused this process" once it refused this process's uid: refused()), and what import_chunk throws. A
  // lender that answers out of protocol (a GRANT of another size than asked, a loan id already held, a malformed
  // record) is treated as gone: its descriptor is closed, Error(kBackend). Nothing changes on either side when it
  // throws.
  // A lender that does not answer within answer_timeout_ms: OutOfMemoryError ("did not answer"); the request
  // stays outstanding, and until its answer comes every borrow() throws OutOfMemoryError at once ("has not
  // answered") after reading, without waiting, what arrived. The late answer is read by poll() or borrow(): a
  // late loan is handed straight back (RETURN, never imported), a late refusal dropped (not the refusal of this
  // process's uid, which answers no request: it always ends the connection, refused()).
  Loan borrow(std::uint64_t size_bytes);
  // Reads what has arrived: recalls (the loan is marked recalled) and the lender's exit (lender_gone()). Waits up
  // to timeout_ms for the first message (0: not at all; -1: until one comes or the lender goes; no wait when
  // recalls seen by borrow() are pending). Returns the ids of loans recalled since the last poll and still held
  // (one given back in between is left out), each once: the caller evicts them (unmaps every mapping) and calls
  // give_back.
  std::vector<std::uint64_t> poll(int timeout_ms);
  // Releases loan `id`'s chunk (mapped nowhere: else the backend's Error(kInvalidArgument), and nothing changes)
  // and tells the lender, if it is still there (a socket that fails then marks the lender gone: never an error
  // once the chunk is released). Throws Error(kInvalidArgument) for an id not held.
  void give_back(std::uint64_t id);

  // True once the lender exited, closed the connection (cut this borrower off), refused this process or sent
  // garbage.
  bool lender_gone() const { return lender_gone_; }
  // True once the lender refused this process's uid (REFUSE(not allowed): the lender's lake_allowed_uids does not
  // name it); lender_gone() is then true too, and nothing was lent.
  bool refused() const { return refused_; }
  // True while a request that timed out has had no answer (poll() or borrow() reads it when it comes).
  bool awaiting_answer() const { return unanswered_ != 0 && !lender_gone_; }
  // The loans held, by id.
  const std::map<std::uint64_t, Loan>& loans() const { return loans_; }
  // Bytes of the loans held.
  std::uint64_t borrowed_bytes() const;

 private:
  // Handles one message from the lender; false when the connection closed.
  bool receive_one(int timeout_ms, std::vector<std::uint64_t>* recalled, Loan* granted, bool* answered);
  // Sends RETURN(id); a send that fails marks the lender gone (lose_lender) and returns false. Never throws.
  bool send_return(std::uint64_t id);
  // When the next message waiting is the lender's refusal of this process's uid: closes the connection and
  // throws BackendError("lake", "... refused this process ..."); otherwise does nothing (reads at most one).
  void refusal_of_this_process();
  // The lender is gone: the connection is closed and no new loan is asked for.
  void lose_lender();
  // Throws BackendError("lake", ...) saying why no loan can come: the lender refused this process, or it is gone.
  [[noreturn]] void throw_lender_gone() const;

  Backend& backend_;
  int socket_ = -1;
  std::uint64_t answer_timeout_ms_ = 0;
  std::uint64_t asked_bytes_ = 0;  // the size of the request borrow() waits for (a GRANT must match it)
  std::uint64_t unanswered_ = 0;  // requests that timed out, answered by none of the messages read so far
  bool lender_gone_ = false;
  bool refused_ = false;  // the lender refused this process's uid
  std::map<std::uint64_t, Loan> loans_;
  std::vector<std::uint64_t> pending_recalls_;  // seen while borrow() waited, not yet returned by poll
};

// A lender's life as a service (`gmlake lend`): serves `lender` (poll, 100 ms at a time, with the steady clock's
// ns as its clock) until `stop` becomes non-zero (a SIGTERM / SIGINT handler sets it), then recalls every loan with
// `recall_ms` to give it back and serves until every loan came back or that time passed (a borrower still holding
// a loan then is cut off: its chunks stay until it exits, and the lender's exit then leaves them to the driver's
// reference counts on cuda). Returns the bytes not given back by the deadline (0: a clean stop). Events go to the
// lender's log. Throws what LakeLender::poll throws.
std::uint64_t serve_until_stopped(LakeLender& lender, const volatile std::sig_atomic_t& stop, std::uint64_t recall_ms);

}  // namespace gmlake
