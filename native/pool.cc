#include "pool.h"

#include <pthread.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace vmsnap {
namespace {

class Pool {
 public:
  void Post(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
    if (queue_.size() > idle_ && threads_ < kMaxThreads) {
      ++threads_;
      // Detached: a thread stuck inside librbd must not block process exit.
      std::thread([this] { Run(); }).detach();
    } else {
      cv_.notify_one();
    }
  }

  PoolStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {threads_, idle_, queue_.size()};
  }

 private:
  void Run() {
    pthread_setname_np(pthread_self(), "vmsnap-rbd");
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [this] { return !queue_.empty(); });
      --idle_;
      std::function<void()> task = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      task();
      // Destroyed before relocking: the captures may hold a ClusterCore's last reference, whose
      // destructor posts rados_shutdown here (PoolPost under mu_ deadlocked every later call).
      task = nullptr;
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  size_t threads_ = 0;
  size_t idle_ = 0;
};

// Never destroyed: detached threads may still reference it during exit.
Pool& Instance() {
  static Pool* pool = new Pool();
  return *pool;
}

}  // namespace

void PoolPost(std::function<void()> task) { Instance().Post(std::move(task)); }
PoolStats PoolGetStats() { return Instance().Stats(); }

}  // namespace vmsnap
