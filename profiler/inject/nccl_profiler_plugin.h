// libpartrain_inject.so as NCCL's profiler plugin (NCCL_PROFILER_PLUGIN names this library):
// the tables NCCL looks up, ncclProfiler_v6, _v5 and _v4, feed the traced process's
// NcclPluginEvents. What the interposition needs from it is here.
#pragma once

#include <cstdint>
#include <vector>

namespace partrain::profiler::inject {

void note_plugin_context(uint64_t comm_hash);

// Around an interposed communicator init: the plugin contexts NCCL made on this thread while it
// ran (NCCL initialises the plugin inside a blocking init), to be bound to that communicator.
class PluginContextsMadeHere {
 public:
  PluginContextsMadeHere();
  ~PluginContextsMadeHere();
  PluginContextsMadeHere(const PluginContextsMadeHere&) = delete;
  PluginContextsMadeHere& operator=(const PluginContextsMadeHere&) = delete;
  const std::vector<uint64_t>& comm_hashes() const { return comm_hashes_; }

 private:
  friend void note_plugin_context(uint64_t comm_hash);
  std::vector<uint64_t> comm_hashes_;
  PluginContextsMadeHere* outer_;
};

// The plugin ABI version NCCL initialised the plugin with in this process (0: never).
int nccl_plugin_version();

}  // namespace partrain::profiler::inject
