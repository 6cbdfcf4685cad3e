#include "profiler/import/nccl_nvtx_payload.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

namespace partrain::profiler {
namespace {

// NVTX payload entry types (nvToolsExtPayload.h) NCCL's schemas use; schema ids of enums are
// at least 1 << 24 (NVTX_PAYLOAD_ENTRY_TYPE_SCHEMA_ID_STATIC_START).
constexpr int64_t kTypeInt = 5;      // int
constexpr int64_t kTypeUint64 = 18;  // uint64_t
constexpr int64_t kTypeSize = 22;    // size_t
constexpr int64_t kFirstSchemaId = int64_t{1} << 24;
constexpr size_t kHeaderBytes = 32;

// NCCL's static schema ids, (1 << 24) + these (src/include/nvtx_payload_schemas.h).
std::optional<int64_t> schema_of_function(std::string_view function) {
  static constexpr std::pair<std::string_view, int64_t> kSchemas[] = {
      {"ncclCommInitRank", 0},
      {"ncclCommInitAll", 1},
      {"ncclCommDestroy", 2},
      {"ncclCommAbort", 3},
      {"ncclAllGather", 4},
      {"ncclAllReduce", 5},
      {"ncclBroadcast", 6},
      {"ncclReduceScatter", 7},
      {"ncclReduce", 8},
      {"ncclSend", 9},
      {"ncclRecv", 10},
      {"ncclCommInitRankConfig", 11},
      {"ncclCommInitRankScalable", 12},
      {"ncclCommSplit", 13},
      {"ncclCommFinalize", 14},
      {"ncclCommShrink", 15},
      {"ncclAlltoAll", 16},
      {"ncclGather", 17},
      {"ncclScatter", 18}};
  for (const auto& [name, id] : kSchemas) {
    if (name == function) return (int64_t{1} << 24) + id;
  }
  return std::nullopt;
}

template <typename T>
std::optional<T> read_at(std::string_view bytes, int64_t offset) {
  if (offset < 0 || static_cast<size_t>(offset) + sizeof(T) > bytes.size()) return std::nullopt;
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));  // little-endian, as nsys stores it
  return value;
}

}  // namespace

NcclPayloadSchemas NcclPayloadSchemas::load(const SqliteDb& db) {
  NcclPayloadSchemas out;
  if (!db.has_table("main", "NVTX_PAYLOAD_SCHEMA_ENTRIES")) return out;
  if (db.has_table("main", "NVTX_PAYLOAD_SCHEMAS")) {
    auto sizes = SqliteStatement::prepare(
        db, "SELECT domainId, schemaId, payloadSize FROM NVTX_PAYLOAD_SCHEMAS");
    while (sizes.is_ok() && sizes->step() == SQLITE_ROW) {
      out.schemas_[{sizes->column_int(0), sizes->column_int(1)}].payload_bytes =
          sizes->column_int(2);
    }
  }
  auto entries = SqliteStatement::prepare(
      db,
      "SELECT domainId, schemaId, type, name, offset FROM NVTX_PAYLOAD_SCHEMA_ENTRIES "
      "ORDER BY domainId, schemaId, idx");
  while (entries.is_ok() && entries->step() == SQLITE_ROW) {
    // A NULL offset means 0 (the first entry).
    out.schemas_[{entries->column_int(0), entries->column_int(1)}].entries.push_back(
        {entries->column_text(3), entries->column_int(2), entries->column_int(4)});
  }
  if (db.has_table("main", "NVTX_PAYLOAD_ENUM_ENTRIES")) {
    auto names = SqliteStatement::prepare(
        db, "SELECT domainId, schemaId, value, name FROM NVTX_PAYLOAD_ENUM_ENTRIES");
    while (names.is_ok() && names->step() == SQLITE_ROW) {
      out.enums_[{names->column_int(0), names->column_int(1)}][names->column_int(2)] =
          names->column_text(3);
    }
  }
  return out;
}

bool NcclPayloadSchemas::decode_with(int64_t domain, const Schema& schema, std::string_view payload,
                                     NcclPayload& out) const {
  bool any = false;
  for (const Entry& e : schema.entries) {
    std::optional<int64_t> value;
    if (e.type == kTypeUint64 || e.type == kTypeSize) {
      if (auto v = read_at<uint64_t>(payload, e.offset)) value = static_cast<int64_t>(*v);
    } else if (e.type == kTypeInt || e.type >= kFirstSchemaId) {
      if (auto v = read_at<int32_t>(payload, e.offset)) value = *v;
    }
    if (!value) continue;
    any = true;
    if (e.name == "NCCL communicator ID") {
      out.comm = static_cast<uint64_t>(*value);
    } else if (e.name == "Message size [bytes]" || e.name == "Bytes") {
      out.bytes = static_cast<uint64_t>(*value);
    } else if (e.name == "Root") {
      out.root = static_cast<int>(*value);
    } else if (e.name == "Peer rank") {
      out.peer = static_cast<int>(*value);
    } else if (e.name == "No. of ranks") {
      // Past int (a damaged 64-bit field) is the most an int holds, refused as a world later.
      out.nranks = static_cast<int>(std::clamp<int64_t>(*value, std::numeric_limits<int>::min(),
                                                        std::numeric_limits<int>::max()));
    } else if (e.name == "Rank") {
      out.rank = static_cast<int>(*value);
    } else if (e.name == "Reduction operation") {
      auto names = enums_.find({domain, e.type});
      if (names != enums_.end()) {
        auto name = names->second.find(*value);
        if (name != names->second.end()) out.reduce_op = name->second;
      }
    }
  }
  return any;
}

NcclPayload NcclPayloadSchemas::decode(int64_t domain, std::string_view blob,
                                       std::string_view function) const {
  NcclPayload out;
  // With the header: its schema id names the schema, and its total size is the blob's.
  if (blob.size() >= kHeaderBytes) {
    const auto schema_id = read_at<uint32_t>(blob, 8);
    const auto total = read_at<uint64_t>(blob, 24);
    auto schema = schema_id ? schemas_.find({domain, *schema_id}) : schemas_.end();
    if (total && *total == blob.size() && schema != schemas_.end()) {
      decode_with(domain, schema->second, blob.substr(kHeaderBytes), out);
      return out;
    }
  }
  // Without: the schema NCCL registers for this function, when the blob is its payload's size.
  const auto id = schema_of_function(function);
  auto schema = id ? schemas_.find({domain, *id}) : schemas_.end();
  if (schema != schemas_.end() &&
      (schema->second.payload_bytes == 0 ||
       schema->second.payload_bytes == static_cast<int64_t>(blob.size()))) {
    decode_with(domain, schema->second, blob, out);
  }
  return out;
}

}  // namespace partrain::profiler
