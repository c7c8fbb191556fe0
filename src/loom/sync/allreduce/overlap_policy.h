// Whether a data-parallel worker combines its gradient buckets on a communication thread while
// backward goes on (sync.overlap), when the config does not say.
#pragma once

#include "loom/comm/communicator.h"

namespace loom::sync {

// sync.overlap as a run's config sets it (plan/sync_reader.h reads it): unset, true, false or
// "inline".
enum class OverlapSetting { kAuto, kOn, kOff, kInline };

// Overlap pays only when that thread has a core of its own. When the workers' compute threads
// already fill every core of the host, the thread first waits for the scheduler to preempt a
// compute thread, and each bucket's combine takes milliseconds instead of the ~0.2 ms its bytes
// need (2 workers x 1 thread on 2 cores: 1.75-1.80x one worker with overlap, 1.86-1.90x without,
// same run, `loom bench train --workers 1 2 --set sync.overlap=...`). So the default overlaps
// when every worker on this host can have one core more than its `threads`, and always on a
// device transport, whose communication runs on the GPU's own engines.
bool default_overlap(int workers_on_host, int threads_per_worker, int host_cores,
                     bool device_transport);

// sync.overlap = "inline", or unset when `overlap` (the resolved thread decision) is false:
// combine each bucket on the compute thread as soon as backward has produced it, rather than
// all of them after backward (sync.overlap = false). The bucket's gradients, just written, are
// still in cache, and so are the other workers'; 2 workers x 1 thread on 2 cores: +0.3..+3.5%
// samples/s over after-backward in seven alternated pairs.
bool inline_combine(OverlapSetting s, bool overlap);

// The parameter server's reading of the same key: its workers push each bucket from the compute
// thread as backward produces it (true or "inline", and when unset) or after backward (false).
bool push_during_backward(OverlapSetting s);

// The thread decision: true / false / "inline" (false) as set, else default_overlap() with
// `threads_per_worker`.
bool resolve_overlap(OverlapSetting s, int workers_on_host, int threads_per_worker, int host_cores,
                     bool device_transport);

// The same for this process: the workers on this host are the thread transport's world, or the
// launcher's local ranks under MPI; the cores are this machine's.
bool resolve_overlap(OverlapSetting s, int threads_per_worker, const comm::Communicator& comm);

}  // namespace loom::sync
