// Figures as partrain prints them in text output: never a zero that is not zero (a slow CPU run's
// 3e-6 GB/s is not "0.000000 GB/s"), bandwidths in the unit that fits (STYLE.md: units on every
// number). Byte sizes are core/byte_size.h's, durations core/duration.h's.
#pragma once

#include <string>

namespace partrain {

// `value` with `decimals` decimals, as a table column prints it ("12.40"), unless the value is
// below the column's last place (under 0.01 at two decimals), where the column would show it as
// zero or round it up to that place (0.0054 as "0.01"): then with 2 significant digits ("0.0054",
// "0.0031", "3.1e-06"). An exact zero is "0", so a figure that looks like zero is zero.
std::string format_decimal(double value, int decimals);

// A share in percent ("85.2%", "0.04%", "0%"), from a fraction (0.852), by format_decimal.
std::string format_percent(double fraction, int decimals = 1);

// A bandwidth in decimal units as nccl-tests labels them (1 GB/s = 1e9 bytes/s), scaled so it
// reads with three significant digits: "412 GB/s", "12.4 GB/s", "3.21 MB/s", "512 KB/s",
// "40.0 B/s"; "0 B/s" only for no bytes at all.
std::string format_bandwidth(double bytes_per_second);

}  // namespace partrain
