// libFuzzer target: the model, GPU and cluster preset readers (share/models, share/gpus,
// --model-file with a Hugging Face config.json too, --gpu-file, --cluster) on arbitrary text. A
// malformed file must come back as a kUnreadable status naming the field, never a crash or an
// exception.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "memory/presets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace partrain::memory;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto model = parse_model_json(text, "fuzz.json");
  if (model.is_ok()) (void)validate_model(*model);
  (void)parse_gpu_json(text, "fuzz.json");
  (void)parse_cluster_json(text, "fuzz.json");
  return 0;
}
