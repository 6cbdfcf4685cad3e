#include "profiler/import/collective_clock_alignment.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <optional>
#include <tuple>

namespace partrain::profiler {
namespace {

struct Estimate {
  int64_t offset_ns = 0;
  int64_t uncertainty_ns = 0;
  int64_t count = 0;
};

Estimate summarize(std::vector<int64_t> samples) {
  Estimate e;
  e.count = static_cast<int64_t>(samples.size());
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  e.offset_ns =
      n % 2 == 1 ? samples[n / 2] : samples[n / 2 - 1] + (samples[n / 2] - samples[n / 2 - 1]) / 2;
  std::vector<int64_t> deviations;
  deviations.reserve(n);
  for (int64_t s : samples) deviations.push_back(std::abs(s - e.offset_ns));
  std::sort(deviations.begin(), deviations.end());
  // The smallest deviation that at least 90% of the estimates stay within.
  const size_t k = (n * 9 + 9) / 10;
  e.uncertainty_ns = deviations[std::min(n, std::max<size_t>(k, 1)) - 1];
  return e;
}

}  // namespace

std::map<int, RankClockFit> align_clocks_by_collectives(
    const std::map<int, std::string>& clock_of_rank, std::vector<CollectiveEnd> ends) {
  // Clock domains: one per named host, one per rank whose host is not known.
  std::map<int, int> domain_of_rank;
  std::map<std::string, int> domain_of_host;
  int domains = 0;
  for (const auto& [rank, host] : clock_of_rank) {
    if (host.empty()) {
      domain_of_rank[rank] = domains++;
      continue;
    }
    auto [it, inserted] = domain_of_host.try_emplace(host, domains);
    if (inserted) ++domains;
    domain_of_rank[rank] = it->second;
  }
  std::map<int, RankClockFit> fits;
  for (const auto& [rank, host] : clock_of_rank) fits[rank] = RankClockFit{};
  if (domains <= 1) return fits;

  // Per collective, each domain's latest end; every pair of domains gives one estimate.
  std::sort(ends.begin(), ends.end(), [](const CollectiveEnd& a, const CollectiveEnd& b) {
    return std::tie(a.comm_id, a.seq) < std::tie(b.comm_id, b.seq);
  });
  std::map<std::pair<int, int>, std::vector<int64_t>> samples;  // (a, b): clock_b + d = clock_a
  for (size_t i = 0; i < ends.size();) {
    size_t j = i;
    std::map<int, int64_t> latest;
    for (; j < ends.size() && ends[j].comm_id == ends[i].comm_id && ends[j].seq == ends[i].seq;
         ++j) {
      auto domain = domain_of_rank.find(ends[j].rank);
      if (domain == domain_of_rank.end()) continue;
      auto [it, inserted] = latest.try_emplace(domain->second, ends[j].end_ns);
      if (!inserted) it->second = std::max(it->second, ends[j].end_ns);
    }
    for (const auto& [a, end_a] : latest) {
      for (const auto& [b, end_b] : latest) {
        if (a != b) samples[{a, b}].push_back(end_a - end_b);
      }
    }
    i = j;
  }

  // Breadth first from the reference domain, through the best-supported links.
  const int reference = domain_of_rank.begin()->second;
  std::vector<std::optional<Estimate>> domain_fit(domains);
  domain_fit[reference] = Estimate{};
  std::deque<int> frontier{reference};
  while (!frontier.empty()) {
    const int a = frontier.front();
    frontier.pop_front();
    for (int b = 0; b < domains; ++b) {
      if (domain_fit[b]) continue;
      auto link = samples.find({a, b});
      if (link == samples.end()) continue;
      const Estimate step = summarize(link->second);
      domain_fit[b] = Estimate{domain_fit[a]->offset_ns + step.offset_ns,
                               domain_fit[a]->uncertainty_ns + step.uncertainty_ns, step.count};
      frontier.push_back(b);
    }
  }
  for (auto& [rank, fit] : fits) {
    const std::optional<Estimate>& e = domain_fit[domain_of_rank[rank]];
    if (!e) {
      fit.aligned = false;
      continue;
    }
    fit.offset_ns = e->offset_ns;
    fit.uncertainty_ns = e->uncertainty_ns;
    fit.estimates = e->count;
  }
  return fits;
}

}  // namespace partrain::profiler
