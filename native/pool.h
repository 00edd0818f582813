// A small pool of threads owned by the addon. Blocking librbd/librados calls
// run here, never on libuv's shared thread pool (UV_THREADPOOL_SIZE, default 4),
// so a long flatten cannot delay fs.readFile or DNS lookups.
#pragma once
#include <cstddef>
#include <functional>

namespace vmsnap {

struct PoolStats {
  size_t threads;  // threads started so far (they are kept, idle, for reuse)
  size_t idle;
  size_t queued;
};

// Runs `task` on an addon thread. A new thread is started when every existing
// one is busy, up to kMaxThreads; beyond that tasks queue.
void PoolPost(std::function<void()> task);
PoolStats PoolGetStats();

constexpr size_t kMaxThreads = 64;

}  // namespace vmsnap
