#include "profiler/import/kineto_json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <tuple>

#include "core/rank_list.h"

namespace partrain::profiler {
namespace {

using Json = nlohmann::json;

// Builds a DOM of one value (a metadata value, an event's args) from SAX calls.
class ValueCapture {
 public:
  void begin(Json& target) {
    root_ = &target;
    stack_.clear();
    pending_key_.clear();
    root_set_ = false;
  }
  bool active() const { return root_ != nullptr; }
  bool finished() const { return root_set_ && stack_.empty(); }
  void end() { root_ = nullptr; }

  template <typename V>
  void value(V&& v) {
    place(Json(std::forward<V>(v)));
  }
  void open(Json container) { stack_.push_back(place(std::move(container))); }
  void close() { stack_.pop_back(); }
  void key(std::string& key) { pending_key_ = std::move(key); }

 private:
  Json* place(Json v) {
    if (stack_.empty()) {
      *root_ = std::move(v);
      root_set_ = true;
      return root_;
    }
    Json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    Json& slot = parent[pending_key_];
    slot = std::move(v);
    return &slot;
  }

  Json* root_ = nullptr;
  std::vector<Json*> stack_;
  std::string pending_key_;
  bool root_set_ = false;
};

// Depths: 1 the top-level object, 2 traceEvents' array, 3 an event, 4+ inside an event's field.
class KinetoSax : public nlohmann::json_sax<Json> {
 public:
  KinetoSax(KinetoHeader& header, const KinetoReadCallbacks& callbacks)
      : header_(header), callbacks_(callbacks) {}

  bool stopped() const { return stopped_; }
  std::string error;
  bool empty = false;  // the text ended before its first value

  bool null() override { return scalar(Json(nullptr), nullptr); }
  bool boolean(bool v) override { return scalar(Json(v), nullptr); }
  bool number_integer(number_integer_t v) override {
    return scalar(Json(v), nullptr, static_cast<int64_t>(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    return scalar(Json(v), nullptr,
                  v <= static_cast<uint64_t>(INT64_MAX)
                      ? std::optional<int64_t>(static_cast<int64_t>(v))
                      : std::nullopt);
  }
  bool number_float(number_float_t v, const string_t& text) override {
    return scalar(Json(v), &text);
  }
  bool string(string_t& v) override {
    if (capture_.active()) {
      capture_.value(std::move(v));
      return true;
    }
    if (depth_ == 1 && top_level_array_) return not_an_object();
    if (depth_ == 1 && key_ == "schema" && !header_.has_trace_events) {
      // Kineto's own is schemaVersion; ExecutionTraceObserver writes "schema" first.
      header_.other_json = OtherTorchJson::kExecutionTrace;
      return stop();
    }
    if (depth_ == 1) {
      metadata_key_ = key_;
      metadata_value_ = std::move(v);
      store_metadata();
    } else if (depth_ == 3) {
      if (key_ == "ph") {
        event_.phase = v.empty() ? '?' : v[0];
      } else if (key_ == "cat") {
        event_.category.swap(v);
      } else if (key_ == "name") {
        event_.name.swap(v);
      } else if (key_ == "pid" || key_ == "tid") {
        KinetoId& id = key_ == "pid" ? event_.pid : event_.tid;
        id.is_text = true;
        id.text.swap(v);
      }
    }
    return true;
  }
  bool binary(binary_t&) override { return true; }

  bool start_object(std::size_t) override { return start_container(Json::object()); }
  bool start_array(std::size_t) override { return start_container(Json::array()); }
  bool end_object() override { return end_container(); }
  bool end_array() override { return end_container(); }

  bool key(string_t& key) override {
    if (capture_.active()) {
      capture_.key(key);
      return true;
    }
    if (depth_ == 1 || depth_ == 3) key_.swap(key);
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& exception) override {
    std::string what = exception.what();
    // "[json.exception.parse_error.101] parse error at line 3, column 7: syntax error ..."
    if (auto colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
    error = fmt::format("malformed JSON at byte {}: {}", position, what);
    empty = position <= 1 && what.find("unexpected end of input") != std::string::npos;
    return false;
  }

 private:
  bool start_container(Json container) {
    ++depth_;
    if (capture_.active()) {
      capture_.open(std::move(container));
      return true;
    }
    if (depth_ == 1) {
      // An array is export_memory_timeline's [[times], [sizes]] or Chrome's array of events:
      // its first value tells.
      top_level_array_ = !container.is_object();
      header_.top_level_object = !top_level_array_;
      return true;
    }
    if (depth_ == 2 && top_level_array_) {
      if (!container.is_array()) return not_an_object();
      header_.other_json = OtherTorchJson::kMemoryTimeline;
      return stop();
    }
    if (depth_ == 2) {
      if (key_ == "traceEvents" && container.is_array()) {
        header_.has_trace_events = true;
        in_events_ = true;
        if (callbacks_.on_events_begin && !callbacks_.on_events_begin(header_)) return stop();
        return true;
      }
      metadata_key_ = key_;
      metadata_value_ = Json();
      capture_.begin(metadata_value_);
      capture_.open(std::move(container));
      return true;
    }
    if (depth_ == 3 && in_events_) {
      event_ = KinetoEvent();
      event_open_ = container.is_object();
      key_.clear();
      return true;
    }
    if (depth_ == 4 && event_open_ && key_ == "args" && container.is_object() &&
        (!callbacks_.wants_args || callbacks_.wants_args(event_))) {
      capture_.begin(event_.args);
      capture_.open(std::move(container));
    }
    return true;
  }

  bool end_container() {
    --depth_;
    if (capture_.active()) {
      capture_.close();
      if (capture_.finished()) {
        capture_.end();
        if (depth_ == 1) store_metadata();
      }
      return true;
    }
    if (depth_ == 2 && in_events_ && event_open_) {
      event_open_ = false;
      if (callbacks_.on_event && !callbacks_.on_event(event_)) return stop();
    } else if (depth_ == 1 && in_events_) {
      in_events_ = false;
    } else if (depth_ == 0 && top_level_array_) {
      return not_an_object();  // an empty array
    }
    return true;
  }

  bool scalar(Json value, const string_t* text, std::optional<int64_t> integer = std::nullopt) {
    if (capture_.active()) {
      capture_.value(std::move(value));
      return true;
    }
    if (depth_ == 1 && top_level_array_) return not_an_object();
    if (depth_ == 1) {
      metadata_key_ = key_;
      metadata_value_ = std::move(value);
      store_metadata();
    } else if (depth_ == 3 && event_open_) {
      if (key_ == "ts" || key_ == "dur") {
        std::optional<int64_t> ns;
        if (text != nullptr) {
          ns = microseconds_text_to_ns(*text);
        } else if (integer && std::abs(*integer) < INT64_MAX / 1000) {
          ns = *integer * 1000;
        }
        (key_ == "ts" ? event_.ts_ns : event_.dur_ns) = ns;
        if (!ns) event_.unreadable_time = true;
      } else if ((key_ == "pid" || key_ == "tid") && integer) {
        (key_ == "pid" ? event_.pid : event_.tid).number = *integer;
      }
    }
    return true;
  }

  void store_metadata() {
    const std::string& k = metadata_key_;
    const Json& v = metadata_value_;
    if (k == "schemaVersion" && v.is_number_integer()) {
      header_.schema_version = v.get<int64_t>();
    } else if (k == "baseTimeNanoseconds") {
      // Up to 2^62 ns (year 2116): a ts added to it cannot overflow.
      constexpr int64_t kLatestBaseNs = int64_t{1} << 62;
      // (An unsigned number past int64 reads as a negative int64, so it is refused too.)
      const bool readable =
          v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= kLatestBaseNs;
      if (readable) {
        header_.base_time_ns = v.get<int64_t>();
        header_.has_base_time = true;
      } else {
        header_.unreadable_base_time = v.dump().substr(0, 64);
      }
    } else if (k == "record_shapes" && v.is_number_integer()) {
      header_.record_shapes = v.get<int64_t>() != 0;
    } else if (k == "host_name" && v.is_string()) {
      header_.host_name = v.get<std::string>();
    } else if (k == "traceName" && v.is_string()) {
      header_.trace_name = v.get<std::string>();
    } else if (k == "otherData" && v.is_object() && v.contains("exporter") &&
               v.at("exporter").is_string()) {
      header_.exporter = v.at("exporter").get<std::string>();
    } else if (k == "distributedInfo") {
      auto info = parse_distributed_info(v);
      if (info.is_ok()) {
        header_.distributed = std::move(info).value();
      } else {
        header_.distributed_error = info.status().message();
      }
    }
    metadata_value_ = Json();
  }

  bool stop() {
    stopped_ = true;
    return false;
  }

  bool not_an_object() {
    error =
        "not a Kineto trace: its top level is an array (Chrome's JSON array format), not an "
        "object holding traceEvents";
    return false;
  }

  KinetoHeader& header_;
  const KinetoReadCallbacks& callbacks_;
  int depth_ = 0;
  std::string key_;
  bool in_events_ = false;
  bool event_open_ = false;
  bool stopped_ = false;
  bool top_level_array_ = false;
  KinetoEvent event_;
  ValueCapture capture_;
  std::string metadata_key_;
  Json metadata_value_;
};

// An integer, or one written as a string ("3"); past int64 (18446744073709551615) is none.
std::optional<int64_t> as_int(const Json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t value = v.get<uint64_t>();
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(value);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) {
    int64_t out = 0;
    const std::string& s = v.get_ref<const std::string&>();
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec == std::errc() && end == s.data() + s.size()) return out;
  }
  return std::nullopt;
}

}  // namespace

std::string_view other_torch_json_name(OtherTorchJson kind) {
  switch (kind) {
    case OtherTorchJson::kExecutionTrace:
      return "an execution trace (torch's ExecutionTraceObserver, Chakra's schema)";
    case OtherTorchJson::kMemoryTimeline:
      return "a memory timeline (torch.profiler's export_memory_timeline)";
    case OtherTorchJson::kNone:
      break;
  }
  return {};
}

std::string kineto_thread_key(const KinetoId& pid, const KinetoId& tid) {
  return fmt::format("{}/{}", pid.is_text ? pid.text : std::to_string(pid.number),
                     tid.is_text ? tid.text : std::to_string(tid.number));
}

std::optional<std::vector<int>> kineto_rank_list(const Json& value) {
  Json list = value;
  if (value.is_string()) {
    list = Json::parse(value.get<std::string>(), nullptr, /*allow_exceptions=*/false);
  }
  if (!list.is_array()) return std::nullopt;
  std::vector<int> ranks;
  for (const Json& r : list) {
    if (!r.is_number_integer()) return std::nullopt;
    ranks.push_back(static_cast<int>(r.get<int64_t>()));
  }
  return ranks;
}

std::optional<int64_t> microseconds_text_to_ns(std::string_view text) {
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) negative = text[i++] == '-';
  int64_t whole = 0;
  size_t digits = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits) {
    if (whole > INT64_MAX / 10000) return std::nullopt;  // beyond what ns can hold
    whole = whole * 10 + (text[i] - '0');
  }
  int64_t fraction_ns = 0;
  int round_up = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    int64_t scale = 100;
    for (size_t k = 0; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++k, ++digits) {
      if (k < 3) {
        fraction_ns += (text[i] - '0') * scale;
        scale /= 10;
      } else if (k == 3) {
        round_up = text[i] >= '5' ? 1 : 0;
      }
    }
  }
  if (digits == 0) return std::nullopt;
  if (i != text.size()) {
    // An exponent (or other form): through a double, exact enough for such writers.
    char* end = nullptr;
    const std::string copy(text);
    const double us = std::strtod(copy.c_str(), &end);
    if (end != copy.c_str() + copy.size() || !std::isfinite(us) || std::abs(us) > 9e15) {
      return std::nullopt;
    }
    return static_cast<int64_t>(std::llround(us * 1000.0));
  }
  const int64_t ns = whole * 1000 + fraction_ns + round_up;
  return negative ? -ns : ns;
}

StatusOr<KinetoDistributedInfo> parse_distributed_info(const Json& info) {
  if (!info.is_object()) {
    return make_status(StatusCode::kUnreadable, "distributedInfo is not an object");
  }
  KinetoDistributedInfo out;
  if (auto it = info.find("backend"); it != info.end() && it->is_string()) {
    out.backend = it->get<std::string>();
  }
  // A rank or world_size that is not there is -1 (the importer decides, as HTA does); one that
  // is there must read.
  auto field = [&](const char* key, int least) -> std::optional<int64_t> {
    if (!info.contains(key)) return -1;
    auto v = as_int(info.at(key));
    return v && *v >= least ? v : std::optional<int64_t>();
  };
  const std::optional<int64_t> rank = field("rank", 0);
  const std::optional<int64_t> world = field("world_size", 1);
  if (!rank) {
    return make_status(StatusCode::kUnreadable,
                       "distributedInfo has no rank (a non-negative integer)");
  }
  if (!world) {
    return make_status(StatusCode::kUnreadable,
                       "distributedInfo has no world_size (a positive integer)");
  }
  // Bounded before any use: the import sizes per-rank work by the world.
  for (const auto& [key, value, most] : {std::tuple{"world_size", *world, int64_t{kMostRanks}},
                                         std::tuple{"rank", *rank, int64_t{kMostRanks} - 1}}) {
    if (value > most) {
      return make_status(StatusCode::kUnreadable,
                         "distributedInfo's {} is {}, past what partrain imports (a world of at "
                         "most {} ranks, the largest partrain launches): the file is damaged or "
                         "was edited",
                         key, value, kMostRanks);
    }
  }
  out.rank = static_cast<int>(*rank);
  out.world_size = static_cast<int>(*world);
  if (out.rank >= 0 && out.world_size > 0 && out.rank >= out.world_size) {
    return make_status(StatusCode::kUnreadable,
                       "distributedInfo says rank {} of a world of {} ranks", out.rank,
                       out.world_size);
  }
  if (auto it = info.find("pg_config"); it != info.end() && it->is_array()) {
    for (const Json& pg : *it) {
      if (!pg.is_object()) continue;
      ProcessGroupConfig group;
      if (auto n = pg.find("pg_name"); n != pg.end()) {
        group.name = n->is_string() ? n->get<std::string>() : n->dump();
      }
      if (auto d = pg.find("pg_desc"); d != pg.end() && d->is_string()) {
        group.description = d->get<std::string>();
      }
      if (auto r = pg.find("ranks"); r != pg.end()) {
        auto ranks = kineto_rank_list(*r);
        if (!ranks) {
          return make_status(StatusCode::kUnreadable,
                             "distributedInfo.pg_config: group '{}' has ranks that are not a list "
                             "of integers",
                             group.name);
        }
        group.ranks = std::move(*ranks);
      }
      if (group.ranks.empty()) {
        // pg_size without a list: members unknown (torch writes both; keep the size alone out).
        continue;
      }
      out.groups.push_back(std::move(group));
    }
  }
  return out;
}

StatusOr<KinetoHeader> read_kineto_trace(GzipText& text, const KinetoReadCallbacks& callbacks) {
  KinetoHeader header;
  KinetoSax sax(header, callbacks);
  const bool ok = Json::sax_parse(text.begin(), GzipText::end(), &sax,
                                  nlohmann::detail::input_format_t::json, /*strict=*/true);
  if (!text.error().empty()) {
    return make_status(StatusCode::kUnreadable, "{}: {}", text.path().string(), text.error());
  }
  if (!ok && sax.empty) {
    return make_status(StatusCode::kUnreadable,
                       "{}: the file is empty, no JSON in it (a profiler that stopped before "
                       "writing its trace?)",
                       text.path().string());
  }
  if (!ok && !sax.stopped()) {
    std::string why = sax.error.empty() ? std::string("malformed JSON") : sax.error;
    if (why.find("unexpected end of input") != std::string::npos) {
      why += " (the file ends in the middle of the document: truncated?)";
    }
    return make_status(StatusCode::kUnreadable, "{}: {}", text.path().string(), why);
  }
  return header;
}

}  // namespace partrain::profiler
