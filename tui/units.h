// Numbers as the dashboard prints them: always with a unit, short enough for an 80-column row
// (STYLE.md: units on every number).
#pragma once

#include <cstdint>
#include <string>

namespace partrain::tui {

// "350 ns", "3.5 us", "0.41 ms", "12.3 ms", "842 ms", "1.24 s", "3m05s"
std::string format_ms(int64_t ns);
std::string format_elapsed(int64_t ns);     // "0:07", "1:03", "1:02:09" (h:mm:ss)
std::string format_count(double count);     // "812", "4.2k", "42k", "1.3M"
std::string format_rate(double per_second, const char* unit);  // "812 tok/s", "4.2k tok/s", "1.3M tok/s"
std::string format_size(int64_t bytes);     // "512 B", "1.5 KiB", "123 MiB", "1.23 GiB"
std::string format_gbps(double gbps);       // "420 MB/s", "12.4 GB/s" (core/number_format.h)

}  // namespace partrain::tui
