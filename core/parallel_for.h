// Splits [0, n) into contiguous ranges run on the machine's cores: for work that is a pure
// function of the index (so the result does not depend on the split), such as initialising a
// billion parameters, which one core takes a minute for. Ranges smaller than `min_range` are not
// worth a thread: under 2 * min_range the body runs on the caller's thread alone.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace partrain {

template <typename Body>  // void(int64_t begin, int64_t end)
void parallel_for(int64_t n, int64_t min_range, const Body& body) {
  const auto cores = static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t ranges = std::clamp<int64_t>(n / std::max<int64_t>(min_range, 1), 1, cores);
  if (ranges == 1) {
    if (n > 0) body(0, n);
    return;
  }
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(ranges - 1));
  const int64_t size = (n + ranges - 1) / ranges;
  for (int64_t r = 1; r < ranges; ++r) {
    const int64_t begin = r * size;
    const int64_t end = std::min(n, begin + size);
    if (begin < end) threads.emplace_back([&body, begin, end] { body(begin, end); });
  }
  body(0, std::min(n, size));
  for (std::thread& thread : threads) thread.join();
}

}  // namespace partrain
