#include "lagging_stream_events.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace gmlake {

LaggingStreamEvents::LaggingStreamEvents(Clock& clock, std::int64_t lag_ns) : clock_(clock), lag_ns_(lag_ns) {
  if (lag_ns < 0) throw std::invalid_argument("LaggingStreamEvents: a negative lag");
}

StreamEvents::Token LaggingStreamEvents::record(StreamId) {
  const std::int64_t now = clock_.now_ns();
  const Token t = next_++;
  marks_.emplace(t, Mark{now, now + lag_ns_});
  return t;
}

bool LaggingStreamEvents::done(Token token) {
  if (token <= waited_) return true;
  const auto it = marks_.find(token);
  return it == marks_.end() || clock_.now_ns() >= it->second.done_ns;
}

bool LaggingStreamEvents::idle(StreamId) { return clock_.now_ns() - last_op_ns_ >= lag_ns_; }

void LaggingStreamEvents::wait_until(std::int64_t done_ns) {
  ++waits_;
  wait_ns_ += std::max<std::int64_t>(0, done_ns - clock_.now_ns());
}

void LaggingStreamEvents::wait(Token token) {
  if (done(token)) return;
  wait_until(marks_.at(token).done_ns);
  waited_ = std::max(waited_, token);  // the queue runs in order: every earlier mark is done too
}

void LaggingStreamEvents::release(Token token) { marks_.erase(token); }

void LaggingStreamEvents::synchronize_all() {
  wait_until(std::max(last_op_ns_, clock_.now_ns()) + lag_ns_);
  waited_ = next_ - 1;
}

void LaggingStreamEvents::check_invariants() const {
  std::int64_t last_recorded = INT64_MIN;
  for (const auto& [token, m] : marks_) {
    if (m.done_ns != m.recorded_ns + lag_ns_)
      throw std::logic_error("LaggingStreamEvents: mark " + std::to_string(token) + " is not done at its time + lag");
    if (m.recorded_ns < last_recorded)
      throw std::logic_error("LaggingStreamEvents: mark " + std::to_string(token) +
                             " was recorded before an earlier one");
    last_recorded = m.recorded_ns;
  }
  if (waited_ >= next_) throw std::logic_error("LaggingStreamEvents: a mark not yet recorded counts as waited for");
}

}  // namespace gmlake
