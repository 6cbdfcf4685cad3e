// How `partrain recommend` writes its numbers: three significant digits with trailing zeros kept
// (a column reads alike), one unit of seconds per line (never "1.61 s + 197 ms"), tokens/s, whole
// bytes and shares.
#pragma once

#include <cstdint>
#include <string>

namespace partrain::analyzers {

// Three significant digits, trailing zeros kept, so that a column reads alike: 16.0 beside 16.1,
// 61.0k beside 61.2k (never 16 beside 16.1); whole numbers from 100 up.
std::string three_digits(double value);

// A unit for seconds: the one `reference` reads best in. One line uses one unit, so its figures
// compare at a glance.
struct SecondsUnit {
  double per_second;
  const char* name;
};
SecondsUnit seconds_unit(double reference);

// Seconds in `unit`, three significant digits; figures much smaller than the line's largest keep
// their own digits (0.00133 s), never a zero that is not zero.
std::string seconds_in(double s, SecondsUnit unit);
std::string seconds_text(double s);  // in its own unit
std::string tokens_text(double per_s);

// The estimators' byte counts are doubles; the text and --json both show them as whole bytes.
uint64_t truncated_bytes(double bytes);
std::string gib(double bytes);

// `part` of `whole` in percent (0 for no whole).
double pct(double part, double whole);

}  // namespace partrain::analyzers
