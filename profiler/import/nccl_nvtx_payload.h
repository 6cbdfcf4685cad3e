// NCCL's NVTX payloads as Nsight Systems exports them: the schemas NCCL registers in its "NCCL"
// domain (NVTX_PAYLOAD_SCHEMAS, _SCHEMA_ENTRIES, _ENUM_ENTRIES) and the bytes of each range's
// payload (NVTX_EVENTS.binaryData), decoded by the entries' names ("NCCL communicator ID",
// "Message size [bytes]", "Root", "Peer rank", "Reduction operation", "No. of ranks", "Rank"),
// never by fixed offsets, since the layouts moved between NCCL versions. A payload that does not
// decode leaves its fields unknown; it never fails an import.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/sqlite_db.h"

namespace partrain::profiler {

struct NcclPayload {
  std::optional<uint64_t> comm;          // commHash: one value on every rank of a communicator
  std::optional<uint64_t> bytes;         // one rank's buffer: count x type size
  std::optional<int> root;               // broadcast, reduce, gather, scatter (a communicator rank)
  std::optional<int> peer;               // send, recv (a communicator rank)
  std::optional<std::string> reduce_op;  // "Sum", "Max", ...
  std::optional<int> nranks;             // communicator creation: its size
  std::optional<int> rank;               // communicator creation: this process's rank in it
};

class NcclPayloadSchemas {
 public:
  // The schemas in the export (none when its payload tables are absent: `nsys export` writes
  // them with --include-blobs).
  static NcclPayloadSchemas load(const SqliteDb& db);
  // `blob`: the payload as stored, with or without the 32-byte header nsys puts before it
  // (u32 domain, u32, u32 schema id, u32, u64 payload size, u64 total size); `function`, the
  // range's name ("ncclAllReduce"), names the schema when there is no header.
  NcclPayload decode(int64_t domain, std::string_view blob, std::string_view function) const;
  bool empty() const { return schemas_.empty(); }

 private:
  struct Entry {
    std::string name;
    int64_t type = 0;
    int64_t offset = 0;
  };
  struct Schema {
    int64_t payload_bytes = 0;
    std::vector<Entry> entries;
  };
  // Decodes with one schema; false when the blob is too short for it.
  bool decode_with(int64_t domain, const Schema& schema, std::string_view payload,
                   NcclPayload& out) const;

  std::map<std::pair<int64_t, int64_t>, Schema> schemas_;  // (domain, schema id)
  std::map<std::pair<int64_t, int64_t>, std::map<int64_t, std::string>> enums_;
};

}  // namespace partrain::profiler
