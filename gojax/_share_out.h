// Work items shared out between the calling thread and XLA's intra-op thread pool, for
// gojax's native CPU kernels (_winograd.cc, _ladders.cc).
//
// Items are taken from one counter by the caller and by the helper tasks it schedules;
// the caller waits only for items already taken (a task that starts after the work is
// gone returns at once), so no thread waits on a task that has not started.

#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "xla/ffi/api/ffi.h"

namespace gojax {

class Counter {
 public:
  explicit Counter(int64_t items) : items_(items) {}

  // do_item(i) for every item i not yet taken by another thread.
  template <class Do>
  void take(const Do& do_item) {
    for (int64_t item; (item = next_.fetch_add(1)) < items_;) {
      do_item(item);
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == items_) {
        std::lock_guard<std::mutex> lock(mutex_);
        all_done_.notify_all();
      }
    }
  }

  // Items taken by other threads finish within microseconds: spin a little, then sleep
  // (a host with more runnable threads than cores would otherwise lose the core here).
  void wait() {
    for (int spin = 0; spin < 2000; ++spin) {
      if (finished()) return;
      std::this_thread::yield();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    all_done_.wait(lock, [this] { return finished(); });
  }

 private:
  bool finished() const { return done_.load(std::memory_order_acquire) >= items_; }

  const int64_t items_;
  std::atomic<int64_t> next_{0};
  std::atomic<int64_t> done_{0};
  std::mutex mutex_;  // with all_done_: the wait once spinning has not been enough
  std::condition_variable all_done_;
};

// do_item(i) for i in [0, items), on this thread and `helpers` tasks of `pool`; returns
// when every item is done. do_item may refer to the caller's locals: it only runs while
// the caller is here (a helper that starts late finds no item left and does not call it).
template <class Do>
void share_out(xla::ffi::ThreadPool& pool, int64_t items, int64_t helpers, const Do& do_item) {
  auto counter = std::make_shared<Counter>(items);
  for (int64_t i = 0; i < helpers; ++i)
    pool.Schedule([counter, do_item] { counter->take(do_item); });
  counter->take(do_item);
  counter->wait();
}

}  // namespace gojax
