// One thread running posted tasks in the order they were posted: a communicator's progress
// thread (collectives run in issue order, as ProcessGroupGloo's worker does).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace partrain::comm {

class SerialExecutor {
 public:
  SerialExecutor();
  // Runs every task already posted, then joins the thread.
  ~SerialExecutor();
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  void post(std::function<void()> task);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the members it reads exist
};

}  // namespace partrain::comm
