/* The allocator's statistics, declared once: the C++ Stats (include/gmlake/stats.h), the C API's gmlake_stats
 * (include/gmlake/gmlake.h), the library's stat table (gmlake_stat_table: what Python lays its structs and keys
 * out from) and the PyTorch extension's getDeviceStats are all made from these two lists. Plain C, so that the
 * C API's header can include it. Adding a statistic is one line here, plus the code that counts it.
 *
 * Each entry is X(name, torch_key): `name` the field (PyTorch's name and meaning where PyTorch has it), and
 * `torch_key` the key torch.cuda.memory_stats() gives it when gmlake is PyTorch's allocator ("" when PyTorch has
 * none: the extension leaves it out of getDeviceStats, gmlake.torch.memory_stats() still reports it). A gauge's
 * key is the prefix of its two keys (".current", ".peak" appended); a counter's key is the whole key.
 *
 * Gauges (current and peak; bytes):
 *   allocated_bytes       bytes in blocks handed out and not yet freed, each block's size rounded as placed
 *   reserved_bytes        physical memory held from the backend (chunks, or segments for `caching`)
 *   active_bytes          allocated, plus blocks freed whose free has not completed yet (record_stream)
 *   requested_bytes       bytes the callers asked for, before rounding, of the allocated blocks
 *   inactive_split_bytes  free bytes that cannot be given back to the backend because they share a
 *                         segment (caching, expandable) or a mapped chunk (gmlake) with an active block
 *   peer_reserved_bytes   the part of reserved_bytes held on peer devices (gmlake's lake: peer_devices); the
 *                         own device holds reserved - peer_reserved; per peer: Backend::live_chunk_bytes(d)
 * Counters (events since the pool was made):
 *   num_alloc_retries  allocations that had to release cached memory and retry (PyTorch's meaning)
 *   num_ooms           allocations that failed with OutOfMemoryError
 *   num_allocs / num_frees
 *   invalid_frees      frees of pointers that were not live blocks (rejected; the allocator is unchanged)
 *   stitches           allocations that mapped chunks to make their range contiguous (gmlake)
 *   stitched_chunks    chunks mapped by those stitches
 *   stitch_reuses      allocations served by already-mapped memory that an earlier stitch mapped (gmlake)
 *   evictions          idle mapped chunks unmapped to back another range or to honour a bound (gmlake)
 *   fence_waits        times the host waited for a stream's queued work before unmapping (gmlake, GPU)
 *   fence_drains       those of the fence_waits that no earlier mark covered: a mark was recorded and waited for
 *                      at once, so the stream's whole queue drained and the device then waits for the host
 *                      (StreamFence: "uncovered"); the others waited for a mark with work queued after it
 *   fence_wait_ns      nanoseconds the host spent blocked in those waits, on the pool's clock (a replay's clock
 *                      is its trace's and does not move while it waits: 0 there; `--device-lag-us` reports the
 *                      modelled time instead)
 *   in_order_evictions evictions of a chunk that its own stream's queued work may still touch, made with no wait
 *                      to back a block of that stream, which runs after that work (stream order); the old
 *                      mapping stays until that work finishes (gmlake, GPU)
 *   arena_handovers    per-stream arenas that a new stream took over, their chunks mapped where they were, once no
 *                      work of their old stream could touch them: empty ones, and a quiet stream's that keeps a
 *                      few blocks (handover_quiet_ms) (gmlake, GPU: a job that makes its side streams anew each
 *                      step finds the layout of the streams before)
 *   chunks_created / chunks_released
 *   waiting_growths    growth chunks made while the device waited for the host (the stream had no queued work,
 *                      or assume_device_waits without stream events): sized by waiting_growth_chunk_share (gmlake)
 *   critical_path_moves moves (evictions, re-cuts, releases to remake a chunk) made while the device waited for
 *                      the host, charged to the move budget's wall-time share (move_share_permille; counted only
 *                      while that share is bounded) (gmlake)
 *   refused_moves      answers of a move budget that refused a move, after which the pool grows, borrows or
 *                      moves anyway (memory first) (gmlake)
 *   deferred_frees     frees that waited for the work of streams recorded with record_stream (StreamUses)
 *   stream_event_calls driver calls the pool made to learn where streams stand (GPU: cuEventRecord,
 *                      cuEventQuery, cuStreamQuery, cuEventSynchronize, cuCtxSynchronize; gmlake's StreamFence,
 *                      and StreamUses for record_stream under every policy): host time outside backend_calls,
 *                      on the allocating thread
 *   lake_refusals      lenders that refused this process's uid (gmlake's lake: lake_socket; the lender's
 *                      lake_allowed_uids does not name it): nothing is borrowed, the pool uses its own device
 *                      only (said once on stderr too)
 */
#ifndef GMLAKE_STAT_FIELDS_H_
#define GMLAKE_STAT_FIELDS_H_

#define GMLAKE_GAUGE_FIELDS(X)                              \
  X(allocated_bytes, "allocated_bytes.all")                 \
  X(reserved_bytes, "reserved_bytes.all")                   \
  X(active_bytes, "active_bytes.all")                       \
  X(requested_bytes, "requested_bytes.all")                 \
  X(inactive_split_bytes, "inactive_split_bytes.all")       \
  X(peer_reserved_bytes, "")

#define GMLAKE_COUNTER_FIELDS(X)                            \
  X(num_alloc_retries, "num_alloc_retries")                 \
  X(num_ooms, "num_ooms")                                   \
  X(num_allocs, "allocation.all.allocated")                 \
  X(num_frees, "allocation.all.freed")                      \
  X(invalid_frees, "")                                      \
  X(stitches, "")                                           \
  X(stitched_chunks, "")                                    \
  X(stitch_reuses, "")                                      \
  X(evictions, "")                                          \
  X(fence_waits, "")                                        \
  X(fence_drains, "")                                       \
  X(fence_wait_ns, "")                                      \
  X(in_order_evictions, "")                                 \
  X(arena_handovers, "")                                    \
  X(chunks_created, "num_device_alloc")                     \
  X(chunks_released, "num_device_free")                     \
  X(waiting_growths, "")                                    \
  X(critical_path_moves, "")                                \
  X(refused_moves, "")                                      \
  X(deferred_frees, "")                                     \
  X(stream_event_calls, "")                                 \
  X(lake_refusals, "")

#endif /* GMLAKE_STAT_FIELDS_H_ */
