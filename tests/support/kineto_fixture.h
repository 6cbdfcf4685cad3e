// Synthetic Kineto (PyTorch profiler) traces for tests: one rank's JSON as torch.profiler lays it
// out (metadata and distributedInfo before traceEvents, ts/dur in microseconds with three
// decimals), built from a few lines per event, so a test states exactly the case it checks.
#pragma once

#include <fmt/format.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace partrain::testing {

struct KinetoGroup {
  std::string name;
  std::vector<int> ranks;
};

class KinetoFixture {
 public:
  KinetoFixture(int rank, int world_size) : rank_(rank), world_size_(world_size) {
    groups_.push_back({"0", {}});
    for (int r = 0; r < world_size; ++r) groups_.back().ranks.push_back(r);
  }
  KinetoFixture& host(std::string name) {
    host_ = std::move(name);
    return *this;
  }
  KinetoFixture& backend(std::string name) {
    backend_ = std::move(name);
    return *this;
  }
  KinetoFixture& base_time_ns(int64_t ns) {
    base_ns_ = ns;
    return *this;
  }
  KinetoFixture& group(std::string name, std::vector<int> ranks) {
    groups_.push_back({std::move(name), std::move(ranks)});
    return *this;
  }
  // A complete event: `fields` are more keys ("\"args\": {...}").
  KinetoFixture& event(std::string_view cat, std::string_view name, int64_t tid, double ts_us,
                       double dur_us, std::string_view args = "{}") {
    events_.push_back(
        fmt::format("{{\"ph\": \"X\", \"cat\": \"{}\", \"name\": \"{}\", \"pid\": {}, \"tid\": {}, "
                    "\"ts\": {:.3f}, \"dur\": {:.3f}, \"args\": {}}}",
                    cat, name, pid(), tid, ts_us, dur_us, args));
    return *this;
  }
  KinetoFixture& step(int64_t n, double ts_us, double dur_us) {
    return event("user_annotation", fmt::format("ProfilerStep#{}", n), pid(), ts_us, dur_us);
  }
  KinetoFixture& thread_name(int64_t tid, std::string_view name) {
    events_.push_back(fmt::format(
        "{{\"ph\": \"M\", \"name\": \"thread_name\", \"ts\": 0, \"pid\": {}, \"tid\": {}, "
        "\"args\": {{\"name\": \"{}\"}}}}",
        pid(), tid, name));
    return *this;
  }
  // A gloo collective as torch 2.15 records it: c10d's op on the main thread (issue), gloo's
  // annotation on a worker thread (the transfer), `elements` floats.
  KinetoFixture& gloo_all_reduce(int64_t elements, double issue_us, double start_us, double end_us,
                                 int64_t worker_tid) {
    event("cpu_op", "c10d::allreduce_", pid(), issue_us, 20.0,
          fmt::format("{{\"External id\": 1, \"Input Dims\": [[[{}]], [], [], [], [], []], "
                      "\"Input type\": [\"TensorList\", \"\", \"\", \"\", \"Scalar\", "
                      "\"Scalar\"], \"Concrete Inputs\": [\"\", \"\", \"\", \"\", \"False\", "
                      "\"-1\"]}}",
                      elements));
    return event("user_annotation", "gloo:all_reduce", worker_tid, start_us, end_us - start_us,
                 fmt::format("{{\"Input Dims\": [[{}]], \"Input type\": [\"float\"]}}", elements));
  }
  KinetoFixture& memory(double ts_us, int64_t total_allocated, int device_type = 0,
                        int device = -1) {
    events_.push_back(fmt::format(
        "{{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", "
        "\"pid\": {}, \"tid\": {}, \"ts\": {:.3f}, \"args\": {{\"Total Reserved\": 0, "
        "\"Total Allocated\": {}, \"Bytes\": 8, \"Device Id\": {}, \"Device Type\": {}}}}}",
        pid(), pid(), ts_us, total_allocated, device, device_type));
    return *this;
  }
  KinetoFixture& raw_event(std::string json) {
    events_.push_back(std::move(json));
    return *this;
  }

  std::string json(bool with_distributed_info = true) const {
    std::string groups;
    for (const KinetoGroup& g : groups_) {
      if (!groups.empty()) groups += ", ";
      groups += fmt::format(
          "{{\"pg_name\": \"{}\", \"pg_desc\": \"{}\", \"pg_size\": {}, "
          "\"ranks\": [{}]}}",
          g.name, g.name == "0" ? "default_pg" : "undefined", g.ranks.size(),
          fmt::join(g.ranks, ", "));
    }
    std::string out = "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n";
    if (with_distributed_info) {
      out += fmt::format(
          "  \"distributedInfo\": {{\"backend\": \"{}\", \"rank\": {}, "
          "\"world_size\": {}, \"pg_count\": {}, \"pg_config\": [{}]}},\n",
          backend_, rank_, world_size_, groups_.size(), groups);
    }
    if (!host_.empty()) out += fmt::format("  \"host_name\": \"{}\",\n", host_);
    out +=
        fmt::format("  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": {},\n", base_ns_);
    out += "  \"traceEvents\": [\n";
    for (size_t i = 0; i < events_.size(); ++i) {
      out += "  " + events_[i] + (i + 1 < events_.size() ? ",\n" : "\n");
    }
    out += "  ],\n  \"traceName\": \"fixture\"\n}\n";
    return out;
  }

  int64_t pid() const { return 1000 + rank_; }

 private:
  int rank_;
  int world_size_;
  std::string host_ = "vm";
  std::string backend_ = "gloo";
  int64_t base_ns_ = 1790857026000000000;
  std::vector<KinetoGroup> groups_;
  std::vector<std::string> events_;
};

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Files of `fixtures`, rank by rank (`rank0.json`, ...), written into `dir`.
inline std::vector<std::filesystem::path> write_kineto_ranks(
    const std::filesystem::path& dir, const std::vector<KinetoFixture>& fixtures) {
  std::vector<std::filesystem::path> files;
  for (size_t r = 0; r < fixtures.size(); ++r) {
    files.push_back(dir / fmt::format("rank{}.json", r));
    write_text(files.back(), fixtures[r].json());
  }
  return files;
}

inline void write_gzip(const std::filesystem::path& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
}

}  // namespace partrain::testing
