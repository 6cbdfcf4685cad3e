// `partrain memory` end to end: text and JSON agree, errors carry the documented exit codes and
// name what is wrong, presets are found, the 405B sweep runs well under a second.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <utility>

#include "tests/integration/command_runner.h"

namespace partrain {
namespace {

using testing::CommandResult;
using testing::run_partrain;
constexpr auto parse_json = testing::parse_json_output;

// The text table's GiB column for a category, e.g. "  total             88.31      94.82".
double text_gib(const std::string& out, const std::string& category) {
  std::smatch match;
  std::regex row("\\n  " + category + "\\*? +([0-9.]+) +([0-9.]+)\\n");
  EXPECT_TRUE(std::regex_search(out, match, row)) << category << " in\n" << out;
  return match.empty() ? -1 : std::stod(match[1]);
}

TEST(MemoryCommand, TextAndJsonAgree) {
  const std::string args = "memory --model llama-2-7b --dp 8 --zero 1 --gpu a100-80g";
  auto text = run_partrain(args);
  auto json = run_partrain(args + " --json");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto j = parse_json(json.out);
  const auto& bytes = j["per_gpu_bytes"];
  for (const char* key : {"params", "grads", "optimizer", "activations", "comm", "kv_cache", "reserve", "total"}) {
    ASSERT_TRUE(bytes[key].is_number_integer()) << key;
  }
  for (const auto& [category, key] : {std::pair{"params", "params"}, {"optimizer", "optimizer"},
                                      {"activations", "activations"}, {"reserve", "reserve"},
                                      {"total", "total"}}) {
    EXPECT_NEAR(text_gib(text.out, category), bytes[key].get<double>() / 1073741824.0, 0.006) << category;
  }
  EXPECT_EQ(j["capacity_bytes"].get<int64_t>(), 85899345920);
  EXPECT_EQ(j["fits"].get<bool>(), j["per_gpu_bytes"]["total"].get<int64_t>() <= 85899345920);
  EXPECT_EQ(j["stage"].get<int>(), 0);
  EXPECT_EQ(j["stages"].size(), 1u);
  EXPECT_NE(text.out.find("GiB"), std::string::npos);
  EXPECT_NE(text.out.find("GB"), std::string::npos);
}

// ZeRO 2019 Figure 1: 7.5B parameters, N_d = 64, P_os: 31.4 GB of model states per GPU.
TEST(MemoryCommand, ZeroPaperExampleFromTheCommandLine) {
  auto r = run_partrain("memory --params 7.5e9 --dp 64 --zero 1 --reserve 0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto bytes = parse_json(r.out)["per_gpu_bytes"];
  const double states = bytes["params"].get<double>() + bytes["grads"].get<double>() +
                        bytes["optimizer"].get<double>();
  EXPECT_NEAR(states / 1e9, 31.4, 0.05);
}

TEST(MemoryCommand, PerStageAndExplain) {
  auto r = run_partrain("memory --model gpt3-175b --tp 8 --sp --pp 8 --global-batch 64 "
                        "--recompute selective --per-stage --explain");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("<- heaviest"), std::string::npos);
  EXPECT_NE(r.out.find("Korthikanti 2022"), std::string::npos);
  EXPECT_NE(r.out.find("ZeRO (Rajbhandari 2019)"), std::string::npos);
  auto j = parse_json(run_partrain("memory --model gpt3-175b --tp 8 --sp --pp 8 --global-batch 64 --json").out);
  EXPECT_EQ(j["stages"].size(), 8u);
}

TEST(MemoryCommand, UnknownPresetListsThePresets) {
  auto r = run_partrain("memory --model llama-9b");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("llama-9b"), std::string::npos);
  EXPECT_NE(r.err.find("llama-2-7b"), std::string::npos);
  EXPECT_NE(r.err.find("gpt3-175b"), std::string::npos);
  EXPECT_EQ(run_partrain("memory --model llama-2-7b --gpu v100").exit_code, 2);
}

TEST(MemoryCommand, MalformedModelFileIsUnreadable) {
  const std::string path = ::testing::TempDir() + "/bad_model.json";
  std::ofstream(path) << R"({"name": "bad", "layers": 4, "hidden": -8, "heads": 2, "vocab": 10, "seq": 4})";
  auto r = run_partrain("memory --model-file " + path);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("field 'hidden'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bad_model.json"), std::string::npos) << r.err;
  std::ofstream(path) << "{ not json";
  EXPECT_EQ(run_partrain("memory --model-file " + path).exit_code, 3);
}

// A file that never ends (/dev/zero) given as --model-file, --gpu-file or --config was read until
// memory ran out (std::bad_alloc, exit 134, after GBs); now exit 3 naming it, within a memory
// cap that the old reading overran. A pipe, as process substitution gives, is still read.
TEST(MemoryCommand, AnInputThatNeverEndsIsUnreadableAndAPipeIsRead) {
  const std::string capped = "ulimit -v 4194304; " + testing::partrain_binary() + " memory ";
  for (const std::string& flags : {std::string("--model-file /dev/zero"),
                                   std::string("--model builtin-gpt --gpu-file /dev/zero"),
                                   std::string("--model builtin-gpt --config /dev/zero")}) {
    CommandResult r = testing::run_shell(capped + flags);
    EXPECT_EQ(r.exit_code, 3) << flags << ": " << r.err;
    EXPECT_NE(r.err.find("/dev/zero: it holds more than 16.00 MiB"), std::string::npos)
        << flags << ": " << r.err;
  }
  const std::string path = ::testing::TempDir() + "/piped_model.json";
  std::ofstream(path)
      << R"({"name": "piped", "layers": 2, "hidden": 64, "heads": 2, "vocab": 100, "seq": 16})";
  CommandResult piped =
      testing::run_shell("bash -c '" + testing::partrain_binary() + " memory --model-file <(cat " +
                         path + ")" + R"( --config <(echo "gpu = \"a100-80g\"")')");
  EXPECT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_NE(piped.out.find("model     piped"), std::string::npos) << piped.out;
  EXPECT_NE(piped.out.find("headroom on a100-80g"), std::string::npos) << piped.out;
}

// A Hugging Face config.json is a --model-file: Meta-Llama-3-8B's own config gives the preset's
// figures; BLOOM's has no length (ALiBi) and asks for --seq with exit 3.
TEST(MemoryCommand, AHuggingFaceConfigIsAModelFile) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "Meta-Llama-3-8B";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"architectures": ["LlamaForCausalLM"],
    "attention_bias": false, "attention_dropout": 0.0, "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 8192,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_scaling": null,
    "rope_theta": 500000.0, "tie_word_embeddings": false, "vocab_size": 128256})";
  const std::string layout = " --dp 8 --zero 3 --gpu h100-80g --json";
  auto from_config = run_partrain("memory --model-file " + (dir / "config.json").string() + layout);
  auto from_preset = run_partrain("memory --model llama-3-8b" + layout);
  ASSERT_EQ(from_config.exit_code, 0) << from_config.err;
  ASSERT_EQ(from_preset.exit_code, 0) << from_preset.err;
  EXPECT_EQ(parse_json(from_config.out)["per_gpu_bytes"],
            parse_json(from_preset.out)["per_gpu_bytes"]);
  auto text = run_partrain("memory --model-file " + (dir / "config.json").string());
  EXPECT_NE(text.out.find("model     Meta-Llama-3-8B"), std::string::npos) << text.out;
  // The same config in a hub cache, named by its repository id.
  const std::filesystem::path hub = std::filesystem::path(::testing::TempDir()) / "hub";
  const std::filesystem::path snapshot =
      hub / "models--meta-llama--Meta-Llama-3-8B" / "snapshots" / "abc";
  std::filesystem::create_directories(snapshot);
  std::filesystem::copy_file(dir / "config.json", snapshot / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  auto from_hub = run_partrain("memory --model meta-llama/Meta-Llama-3-8B" + layout,
                               "HF_HUB_CACHE=" + hub.string());
  ASSERT_EQ(from_hub.exit_code, 0) << from_hub.err;
  EXPECT_EQ(parse_json(from_hub.out)["per_gpu_bytes"],
            parse_json(from_preset.out)["per_gpu_bytes"]);
  auto not_cached =
      run_partrain("memory --model meta-llama/Llama-2-7b-hf", "HF_HUB_CACHE=" + hub.string());
  EXPECT_EQ(not_cached.exit_code, 2);
  EXPECT_NE(not_cached.err.find("huggingface-cli download meta-llama/Llama-2-7b-hf config.json"),
            std::string::npos)
      << not_cached.err;

  const std::filesystem::path bloom = std::filesystem::path(::testing::TempDir()) / "bloom.json";
  std::ofstream(bloom) << R"({"model_type": "bloom", "n_embed": 1024, "n_layer": 24,
    "num_attention_heads": 16, "vocab_size": 250880})";
  auto no_seq = run_partrain("memory --model-file " + bloom.string());
  EXPECT_EQ(no_seq.exit_code, 3);
  EXPECT_NE(no_seq.err.find("gives no sequence length (no max_position_embeddings): pass --seq"),
            std::string::npos)
      << no_seq.err;
  EXPECT_EQ(run_partrain("memory --model-file " + bloom.string() + " --seq 2048").exit_code, 0);
}

// Dropout is the model's published recipe unless --dropout says otherwise, as in `recommend`:
// OPT-175B trained with 0.1, whose 1-byte masks (and the stored probabilities' dropout) add
// activations; a config.json's attention_dropout the same. --explain says where it came from.
TEST(MemoryCommand, DropoutIsTheModelsUnlessTheFlagSays) {
  auto activations = [](const std::string& args) {
    auto r = run_partrain("memory " + args + " --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return parse_json(r.out)["per_gpu_bytes"]["activations"].get<double>();
  };
  const std::string opt = "--model opt-175b --tp 8 --pp 8 --global-batch 64";
  const double published = activations(opt);
  EXPECT_EQ(published, activations(opt + " --dropout 0.1"));
  EXPECT_GT(published, activations(opt + " --dropout 0"));
  auto explained = run_partrain("memory --model opt-175b --tp 8 --pp 8 --explain");
  const std::string line =
      "  dropout\n      hidden and attention, 1-byte masks when > 0 (--dropout P sets it)\n"
      "      = ";
  EXPECT_NE(explained.out.find(line + "0.1\n      source: the model's published recipe\n"),
            std::string::npos)
      << explained.out;
  auto flag = run_partrain("memory --model opt-175b --tp 8 --pp 8 --dropout 0 --explain");
  EXPECT_NE(flag.out.find(line + "0\n      source: --dropout\n"), std::string::npos) << flag.out;
  auto none = run_partrain("memory --params 7e9 --explain");
  EXPECT_NE(none.out.find(line + "0\n      source: none: the model states no dropout\n"),
            std::string::npos)
      << none.out;

  const std::filesystem::path config = std::filesystem::path(::testing::TempDir()) / "gpt2.json";
  std::ofstream(config) << R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12,
    "n_head": 12, "n_positions": 1024, "vocab_size": 50257, "resid_pdrop": 0.1})";
  const std::string file = "--model-file " + config.string();
  EXPECT_EQ(activations(file), activations(file + " --dropout 0.1"));
  EXPECT_GT(activations(file), activations(file + " --dropout 0"));
}

// A layer count past any model's is refused at once, from a flag as from a config: the
// per-layer walk of 10^12 layers never returned.
TEST(MemoryCommand, ALayerCountPastAnyModelsIsRefused) {
  auto r = run_partrain(
      "memory --layers 1000000000000 --hidden 4096 --heads 32 --seq 2048 "
      "--vocab 32000");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("1000000000000 layers is more than any model has (at most 100000)"),
            std::string::npos)
      << r.err;
}

// --model takes names: a local file or directory is sent to --model-file, not to the hub; a
// repository without an organisation (gpt2, cached as models--gpt2) is found in the hub cache.
TEST(MemoryCommand, ModelTakesNamesAndFindsUnnamespacedRepositories) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "local-model";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "gpt2", "n_embd": 768,
    "n_layer": 12, "n_head": 12, "n_positions": 1024, "vocab_size": 50257})";
  for (const std::string& given : {dir.string(), (dir / "config.json").string()}) {
    auto r = run_partrain("memory --model " + given);
    EXPECT_EQ(r.exit_code, 2) << given;
    EXPECT_NE(r.err.find("use --model-file " + given), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("huggingface-cli"), std::string::npos) << r.err;
  }
  const std::filesystem::path hub = std::filesystem::path(::testing::TempDir()) / "hub-gpt2";
  const std::filesystem::path snapshot = hub / "models--gpt2" / "snapshots" / "ffff";
  std::filesystem::create_directories(snapshot);
  std::filesystem::copy_file(dir / "config.json", snapshot / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  auto cached = run_partrain("memory --model gpt2 --json", "HF_HUB_CACHE=" + hub.string());
  ASSERT_EQ(cached.exit_code, 0) << cached.err;
  auto local = run_partrain("memory --model-file " + dir.string() + " --json");
  ASSERT_EQ(local.exit_code, 0) << local.err;
  EXPECT_EQ(parse_json(cached.out)["per_gpu_bytes"], parse_json(local.out)["per_gpu_bytes"]);
  // A preset keeps its name over a cached repository of the same one.
  std::filesystem::create_directories(hub / "models--llama-2-7b" / "snapshots" / "x");
  auto preset = run_partrain("memory --model llama-2-7b", "HF_HUB_CACHE=" + hub.string());
  EXPECT_EQ(preset.exit_code, 0) << preset.err;
  auto unknown = run_partrain("memory --model gpt9", "HF_HUB_CACHE=" + hub.string());
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("is not a preset"), std::string::npos) << unknown.err;
}

// --kv-heads on latent attention (DeepSeek's: every head has its keys and values) would change
// nothing: refused, saying why.
TEST(MemoryCommand, KvHeadsOnLatentAttentionIsRefused) {
  auto r = run_partrain("memory --model deepseek-v3 --kv-heads 8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--kv-heads 8 would change nothing: deepseek-v3's latent attention"),
            std::string::npos)
      << r.err;
}

// Heads of their own width, from a config's head_dim or from --head-dim: Qwen3-4B (32 heads of
// 128 over a hidden size of 2,560) is the same model either way, and its 4.0B parameters.
TEST(MemoryCommand, HeadsOfTheirOwnWidthFromAConfigOrTheFlags) {
  const std::filesystem::path config =
      std::filesystem::path(::testing::TempDir()) / "qwen3-4b.json";
  std::ofstream(config) << R"({"model_type": "qwen3", "hidden_size": 2560,
    "intermediate_size": 9728, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": 128, "num_hidden_layers": 36, "vocab_size": 151936,
    "max_position_embeddings": 40960, "tie_word_embeddings": true})";
  const std::string layout = " --dp 8 --zero 3 --seq 4096 --gpu h100-80g --json";
  auto from_config = run_partrain("memory --model-file " + config.string() + layout);
  auto from_flags = run_partrain(
      "memory --layers 36 --hidden 2560 --heads 32 --kv-heads 8 --head-dim 128 --ffn 9728 "
      "--vocab 151936 --swiglu --rmsnorm --no-bias --position rotary" +
      layout);
  ASSERT_EQ(from_config.exit_code, 0) << from_config.err;
  ASSERT_EQ(from_flags.exit_code, 0) << from_flags.err;
  EXPECT_EQ(parse_json(from_config.out)["per_gpu_bytes"],
            parse_json(from_flags.out)["per_gpu_bytes"]);
  EXPECT_NEAR(parse_json(from_flags.out)["params"].get<double>() / 4.0e9, 1.0, 0.01);
  // What the count leaves out of the config is said in the text and in --json alike.
  const std::string note = "its per-head q/k norms (9216 parameters) are not counted";
  EXPECT_EQ(parse_json(from_config.out)["model_notes"], nlohmann::json::array({note}));
  EXPECT_EQ(parse_json(from_flags.out)["model_notes"], nlohmann::json::array());
  auto text = run_partrain("memory --model-file " + config.string());
  EXPECT_NE(text.out.find("\nnote      " + note + "\n"), std::string::npos) << text.out;
  auto bare = run_partrain("memory --params 4e9 --head-dim 128");
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_NE(bare.err.find("--head-dim cannot change"), std::string::npos) << bare.err;
}

TEST(MemoryCommand, InvalidLayoutsNameTheConstraint) {
  const std::pair<const char*, const char*> cases[] = {
      {"--model llama-2-7b --tp 3", "must divide the attention heads"},
      {"--model llama-3-8b --tp 16", "KV heads"},
      {"--model llama-2-7b --pp 64", "more than the model's 32 layers"},
      {"--model llama-2-7b --sp", "needs --tp > 1"},
      {"--model llama-2-7b --dp 4 --global-batch 6", "multiple of --dp x --micro-batch"},
      {"--model llama-2-7b --pp 4 --pp-split 8,8,8", "one per stage"},
      {"--layers 4 --hidden 64", "give --model PRESET"},
      // Said plainly, not as a range up to DBL_MAX's 309 digits.
      {"--model llama-2-7b --layers 0", "--layers: must be a positive number, got 0"},
      {"--params -5", "--params: must be a positive number, got -5"},
      {"--params inf", "--params: must be a positive number, got inf"},
      {"--model mixtral-8x7b --capacity-factor -1", "--capacity-factor: must be 0 or more, got -1"},
      {"--model llama-2-7b --seq 2k", "--seq: '2k' is not a number"},
      {"--model llama-2-7b --seq 99999999999", "past the 4 EiB partrain counts"},
      // One source of the model: a second one would be left unused without a word.
      {"--model llama-2-7b --params 7e9", "--model llama-2-7b and --params both give the model"},
      {"--model-file x.json --model llama-2-7b",
       "--model llama-2-7b and --model-file x.json both give the model"},
      {"--params 7e9 --seq 4096", "which --seq cannot change"},
      {"--params 7e9 --swiglu", "which --swiglu cannot change"},
      // Flags that would change nothing where they are given.
      {"--params 7e9 --inference --kv-len 1000", "--inference needs the model's layers"},
      {"--params 7e9 --cp 2", "--cp needs the model's layers"},
      {"--params 7e9 --pp 3 --pp-split 1,2,3", "--pp-split needs the model's layers"},
      {"--model llama-2-7b --inference --recompute full", "which --inference has none of"},
      {"--model llama-2-7b --inference --dp 8 --zero 3", "keeps whole weights on every GPU"},
      {"--model llama-2-7b --sweep --dp 4", "drop --dp or --sweep"},
      {"--model llama-2-7b --sweep --recompute full", "drop --recompute or --sweep"},
      {"--model llama-2-7b --sweep --per-stage", "drop --per-stage or --sweep"},
      {"--model llama-2-7b --sweep-dp 1,2", "--sweep-dp sets the dp sizes of --sweep"},
      // Dimensions without all of them: the missing ones are named.
      {"--layers 2 --hidden 96 --heads 3 --vocab 10", "--seq (--seq missing)"},
      {"--layers 2 --heads 3", "--seq (--hidden --vocab --seq missing)"},
      // A byte size's error names its flag.
      {"--model llama-2-7b --reserve -1G", "--reserve: "},
      {"--model llama-2-7b --bucket-size 25Q", "--bucket-size: "},
  };
  for (const auto& [args, message] : cases) {
    auto r = run_partrain(std::string("memory ") + args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
  }
}

// The benchmark of issue 5: 405B over dp 1..1024, every ZeRO stage and recompute mode, < 1 s.
TEST(MemoryCommand, SweepOf405bRunsUnderASecond) {
  const auto start = std::chrono::steady_clock::now();
  // A global batch every dp of the sweep divides (16 sequences a pipeline at dp 1024).
  auto r = run_partrain("memory --model llama-3-405b --tp 8 --pp 14 --global-batch 16384 --sweep "
                        "--sweep-dp 1..1024 --json");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = parse_json(r.out);
  EXPECT_EQ(j["rows"].size(), 11u * 4 * 3);
  EXPECT_TRUE(j["dp_left_out"].empty());
  EXPECT_NEAR(j["params"].get<double>() / 1e9, 405.85, 0.01);
  EXPECT_GT(j["flops_per_token_full_recompute"].get<double>(), j["flops_per_token"].get<double>());
  EXPECT_LT(seconds, 1.0);
  auto text = run_partrain("memory --model llama-3-405b --sweep");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("FLOPs"), std::string::npos);
}

// A pipelined sweep says how many micro-batches each row keeps, and warns of a bubble as the
// single estimate does (--help's own example ran at m = 1 on 14 stages without a word), in the
// text and in --json's warnings.
TEST(MemoryCommand, PipelinedSweepSaysItsMicroBatchesAndWarnsOfTheBubble) {
  const std::string sweep = "memory --model llama-3-405b --tp 8 --pp 14 --sweep --sweep-dp 1,2";
  auto text = run_partrain(sweep);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("each row keeps 1 micro-batch per step"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("warning   1 micro-batch per step on 14 pipeline stages"),
            std::string::npos)
      << text.out;
  auto json = run_partrain(sweep + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto j = parse_json(json.out);
  EXPECT_EQ(j["micro_batches"], 1);
  ASSERT_EQ(j["warnings"].size(), 1u) << json.out;
  auto enough = run_partrain(sweep + " --global-batch 2048 --json");
  ASSERT_EQ(enough.exit_code, 0) << enough.err;
  auto e = parse_json(enough.out);
  EXPECT_EQ(e["micro_batches"], 2048);
  EXPECT_TRUE(e["warnings"].empty()) << enough.out;
}

// Each sweep row's columns add up to its total: the reserve has a column of its own (it was in
// the total only, which then exceeded the sum of what was shown).
TEST(MemoryCommand, SweepRowsAddUpToTheirTotal) {
  auto text = run_partrain("memory --model llama-2-7b --sweep --sweep-dp 1,8");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find(" reserve* "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("* default reserve: CUDA context"), std::string::npos) << text.out;
  int rows = 0;
  std::istringstream lines(text.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream row(line);
    int dp = 0, zero = 0;
    std::string recompute, fits;
    double parts[6] = {}, total = 0;
    if (!(row >> dp >> zero >> recompute)) continue;
    for (double& part : parts) row >> part;
    row >> total >> fits;
    ASSERT_TRUE(row) << line;
    double sum = 0;
    for (double part : parts) sum += part;
    EXPECT_NEAR(sum, total, 0.035) << line;  // six figures of two decimals, each rounded
    ++rows;
  }
  EXPECT_EQ(rows, 2 * 4 * 3);
}

TEST(MemoryCommand, EnvironmentVariables) {
  auto r = run_partrain("memory --json", "PARTRAIN_MODEL=llama-3-8b PARTRAIN_DP=4 PARTRAIN_ZERO=3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = parse_json(r.out);
  EXPECT_EQ(j["model"], "llama-3-8b");
  EXPECT_EQ(j["layout"]["dp"], 4);
  EXPECT_EQ(j["layout"]["zero"], 3);
}

// The command line (and --config) wins over the environment for the model's and the GPU's
// source too: a PARTRAIN_MODEL left exported gives way to --params typed for this run.
TEST(MemoryCommand, EnvironmentSourceGivesWayToAnotherOnTheCommandLine) {
  auto r = run_partrain("memory --params 7e9 --json", "PARTRAIN_MODEL=llama-3-8b");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NEAR(parse_json(r.out)["params"].get<double>(), 7e9, 1);

  const std::string config = ::testing::TempDir() + "/partrain-memory-source.toml";
  std::ofstream(config) << "model-file = \"" << PARTRAIN_SOURCE_DIR
                        << "/share/models/llama-2-7b.json\"\n";
  r = run_partrain("memory --config " + config + " --json",
                   "PARTRAIN_PARAMS=1e9 PARTRAIN_MODEL=llama-3-8b");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(parse_json(r.out)["model"], "llama-2-7b");

  const std::string gpu_file = std::string(PARTRAIN_SOURCE_DIR) + "/share/gpus/a100-40g.json";
  r = run_partrain("memory --model llama-2-7b --gpu-file " + gpu_file + " --json",
                   "PARTRAIN_GPU=h200-141g");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(parse_json(r.out)["gpu"], "a100-40g");

  // Two sources from the same place are still one too many.
  r = run_partrain("memory --json", "PARTRAIN_MODEL=llama-3-8b PARTRAIN_PARAMS=1e9");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--model llama-3-8b and --params both give the model"), std::string::npos)
      << r.err;
  r = run_partrain("memory --model llama-2-7b --gpu h200-141g --gpu-file " + gpu_file);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--gpu h200-141g and --gpu-file"), std::string::npos) << r.err;
}

// The deep MLP's figures are KiB and MiB: its table is in MiB (the reserve, a GiB for any model,
// does not pick the unit), a figure that rounds to 0.00 reads <0.01, and --explain says the MLP's
// own formula (it had a transformer's, with "x -nan" for the attention core).
TEST(MemoryCommand, SmallModelFiguresAreNotZero) {
  auto r = run_partrain("memory --model builtin-mlp --explain --per-stage");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("category            MiB         MB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  params             0.50       0.52\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  activations       <0.01      <0.01\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("per stage (MiB)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("= 4.00 MiB (4.19 MB)"), std::string::npos) << r.out;  // model states
  EXPECT_NE(r.out.find("2 B x b h x (1 + 1/t) (b 1, h 256"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("-nan"), std::string::npos) << r.out;
  // It has no output layer, embeddings or head.
  for (const char* absent : {"output", "embeddings", "head of", "'s head"}) {
    EXPECT_EQ(r.out.find(absent), std::string::npos) << absent << " in " << r.out;
  }

  // A sweep of the MLP: in MiB, at its sample's one token, and without selective recompute,
  // which has no attention to skip (those rows were copies of no recompute's).
  r = run_partrain("memory --model builtin-mlp --sweep --sweep-dp 1,2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("parameters), seq 1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("per GPU, heaviest stage, MiB"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("selective"), std::string::npos) << r.out;
  r = run_partrain("memory --model builtin-mlp --sweep --sweep-dp 1,2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = parse_json(r.out);
  EXPECT_EQ(j["seq"], 1);
  EXPECT_EQ(j["rows"].size(), 2u * 4 * 2);

  // A transformer's stay in GiB.
  r = run_partrain("memory --model llama-2-7b");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("category            GiB         GB"), std::string::npos) << r.out;
}

TEST(MemoryCommand, ShareDirOverride) {
  const std::string dir = ::testing::TempDir() + "/partrain-share";
  std::filesystem::create_directories(dir + "/models");
  std::filesystem::create_directories(dir + "/gpus");
  std::ofstream(dir + "/models/tiny.json")
      << R"({"name": "tiny", "layers": 2, "hidden": 64, "heads": 4, "vocab": 100, "seq": 16})";
  std::filesystem::copy_file(std::string(PARTRAIN_SOURCE_DIR) + "/share/gpus/cpu.json",
                             dir + "/gpus/cpu.json", std::filesystem::copy_options::overwrite_existing);
  auto r = run_partrain("memory --model tiny --gpu cpu --json", "PARTRAIN_SHARE_DIR=" + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(parse_json(r.out)["model"], "tiny");
}

// The cpu preset is host memory: no CUDA context or NCCL buffers in its default reserve (it had
// been given a GPU's 1 GiB, most of a small CPU model's estimate). --reserve still sets one.
TEST(MemoryCommand, TheCpuPresetHasNoGpuReserve) {
  auto r = run_partrain("memory --model builtin-gpt --gpu cpu --dp 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(parse_json(r.out)["per_gpu_bytes"]["reserve"].get<int64_t>(), 0) << r.out;
  auto text = run_partrain("memory --model builtin-gpt --gpu cpu --dp 2");
  EXPECT_EQ(text.out.find("CUDA context"), std::string::npos) << text.out;
  auto given = run_partrain("memory --model builtin-gpt --gpu cpu --dp 2 --reserve 1M --json");
  EXPECT_EQ(parse_json(given.out)["per_gpu_bytes"]["reserve"].get<int64_t>(), 1 << 20);
}

TEST(MemoryCommand, InferenceKvCache) {
  auto r = run_partrain("memory --model llama-2-7b --inference --kv-len 4000 --gen-len 96 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(parse_json(r.out)["per_gpu_bytes"]["kv_cache"].get<int64_t>(), 2147483648);  // 0.5 MiB/token
  // The layout says what the text says: 2 B/param weights, the KV cache's tokens, no training
  // recipe (it had said bf16-mixed's 16 B/param) and no training seq or schedule in the text.
  const auto layout = parse_json(r.out)["layout"];
  EXPECT_EQ(layout["precision"], "inference");
  EXPECT_EQ(layout["bytes_per_param"].get<double>(), 2.0);
  EXPECT_EQ(layout["kv_len"], 4000);
  EXPECT_EQ(layout["gen_len"], 96);
  auto text = run_partrain("memory --model llama-2-7b --inference --kv-len 4000 --gen-len 96");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("recipe    inference: 2 B/param weights, KV cache of 4000 + 96 tokens"),
            std::string::npos)
      << text.out;
  EXPECT_EQ(text.out.find("1f1b"), std::string::npos) << text.out;
}

// Flags that would change nothing where they are given are refused, not ignored.
TEST(MemoryCommand, FlagsThatDoNotApplyAreUsageErrors) {
  const std::pair<const char*, const char*> cases[] = {
      {"--kv-len 4000",
       "--kv-len and --gen-len size the KV cache of an --inference estimate: add --inference, or "
       "drop them"},
      {"--explain --json",
       "--explain shows one estimate's formulas as text: drop --json or --explain"},
      {"--explain --sweep", "drop --sweep or --explain"},
      {"--inference --kv-len 100 --seq 1024",
       "--seq 1024 is a training sample's length; an --inference estimate's tokens are --kv-len"},
  };
  for (const auto& [flags, message] : cases) {
    auto r = run_partrain(std::string("memory --model llama-2-7b ") + flags);
    EXPECT_EQ(r.exit_code, 2) << flags;
    EXPECT_NE(r.err.find(message), std::string::npos) << flags << ": " << r.err;
    EXPECT_EQ(r.out, "") << flags;
  }
  // recommend refuses the same pair the same way (it dropped --explain, exit 0); --json from an
  // exported PARTRAIN_JSON is said to come from there, as launch says it.
  for (const char* command : {"memory --model llama-2-7b",
                              "recommend --model llama-2-7b "
                              "--gpus 8 --global-batch 64"}) {
    SCOPED_TRACE(command);
    auto r = run_partrain(std::string(command) + " --json --explain");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("as text: drop --json or --explain\n"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
    auto exported = run_partrain(std::string(command) + " --explain", "PARTRAIN_JSON=1");
    EXPECT_EQ(exported.exit_code, 2);
    EXPECT_NE(exported.err.find("drop --json or --explain (from PARTRAIN_JSON=1 in the "
                                "environment: unset it for a command)"),
              std::string::npos)
        << exported.err;
  }
}

// A mixture of experts from the command line: its total and active counts in text and JSON, the
// experts a GPU holds under --ep, and an --ep the experts cannot be split by refused with exit 2.
// recommend costs the same layout (it refused mixtures of experts before issue 39) with the same
// memory, to the byte.
TEST(MemoryCommand, MixtureOfExpertsWithExpertParallelism) {
  const std::string args =
      "memory --model mixtral-8x7b --seq 4096 --dp 8 --ep 8 --zero 1 --flash-attn --gpu h100-80g";
  auto text = run_partrain(args);
  auto json = run_partrain(args + " --json");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(text.out.find("(4.67e+10 parameters, 1.288e+10 active per token)"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("ep 8"), std::string::npos) << text.out;
  auto j = parse_json(json.out);
  EXPECT_NEAR(j["active_params"].get<double>() / 1e9, 12.88, 0.01);
  EXPECT_EQ(j["layout"]["ep"], 8);
  // One expert of each of the 32 blocks on every GPU: 32 x 3 x 4096 x 14336.
  EXPECT_EQ(j["stages"][0]["expert_params_count"].get<int64_t>(), int64_t{32} * 3 * 4096 * 14336);
  auto odd = run_partrain("memory --model mixtral-8x7b --dp 6 --ep 3");
  EXPECT_EQ(odd.exit_code, 2);
  EXPECT_NE(odd.err.find("--ep 3 must divide the 8 routed experts"), std::string::npos) << odd.err;
  // memory's default recipe, which recommend (Megatron-LM's fp32 gradients by default) is told.
  auto recommend = run_partrain(
      "recommend --model mixtral-8x7b --seq 4096 --gpus 8 --global-batch 8 --flash-attn --gpu "
      "h100-80g --precision bf16-mixed --check dp=8,ep=8,zero=1 --json");
  ASSERT_EQ(recommend.exit_code, 0) << recommend.err;
  const auto candidate = parse_json(recommend.out)["candidates"][0];
  EXPECT_EQ(candidate["ep"], 8);
  for (const auto& [name, value] : candidate["memory_by_category_bytes"].items()) {
    EXPECT_EQ(value.get<int64_t>(), j["per_gpu_bytes"][name].get<int64_t>()) << name;
  }
}

// DeepSeek-V3's published layout (PP 16, EP 64, ZeRO-1, DualPipe, H800 80 GB) fits, EP 8 in its
// place does not, each with its breakdown by category (tests/unit/memory/dual_pipe_fit_test.cpp
// says why; docs/memory.md what is not modelled).
TEST(MemoryCommand, DeepSeekV3PublishedLayoutFitsAndEp8DoesNot) {
  auto run = [](int ep) {
    return run_partrain(fmt::format(
        "memory --model deepseek-v3 --dp 128 --pp 16 --ep {} --zero 1 --pp-schedule dualpipe "
        "--pp-split 3,4,4,4,4,4,4,4,4,4,4,4,4,4,4,2 --precision bf16-fp32grad --recompute full "
        "--flash-attn --global-batch 15360 --gpu h800",
        ep));
  };
  const CommandResult published = run(64);
  const CommandResult ep8 = run(8);
  ASSERT_EQ(published.exit_code, 0) << published.err;
  ASSERT_EQ(ep8.exit_code, 0) << ep8.err;
  for (const CommandResult* r : {&published, &ep8}) {
    for (const char* row : {"  params ", "  grads ", "  optimizer ", "  activations ", "  comm ",
                            "  reserve*", "  total ", "  capacity "}) {
      EXPECT_NE(r->out.find(row), std::string::npos) << row << "\n" << r->out;
    }
    EXPECT_NE(r->out.find("2 parameter copies per rank"), std::string::npos) << r->out;
  }
  EXPECT_NE(published.out.find("fits         yes"), std::string::npos) << published.out;
  EXPECT_NE(ep8.out.find("fits         NO"), std::string::npos) << ep8.out;
  auto refused = run_partrain(
      "memory --model llama-2-7b --pp 3 --pp-schedule dualpipe "
      "--global-batch 6 --pp-split 11,11,10");
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--pp 3 must be even, or use --pp-schedule dualpipev"),
            std::string::npos)
      << refused.err;
}

// Training has no KV cache: no "kv cache 0.00" row (inference keeps its row).
TEST(MemoryCommand, KvCacheRowOnlyForInference) {
  auto training = run_partrain("memory --model llama-3-8b --pp 4");
  ASSERT_EQ(training.exit_code, 0) << training.err;
  EXPECT_EQ(training.out.find("kv cache"), std::string::npos) << training.out;
  auto inference = run_partrain("memory --model llama-3-8b --inference --kv-len 8192");
  ASSERT_EQ(inference.exit_code, 0) << inference.err;
  EXPECT_GT(text_gib(inference.out, "kv cache"), 0);
}

// The defaults give pp 4 one micro-batch per step, a bubble of 300% of the ideal time: a warning
// in text and --json with the global batch that fills the pipeline (m = 4 p = 16: 19%); stages
// are numbered from 0 as --json numbers them ("stage 3 of 4" read as the third of four).
TEST(MemoryCommand, OneMicroBatchOnAPipelineIsWarnedWithAGlobalBatch) {
  auto text = run_partrain("memory --model llama-3-8b --pp 4 --explain");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("warning   1 micro-batch per step on 4 pipeline stages: the bubble "
                          "(p - 1)/(v m) is 300% of the ideal time; --global-batch 16 gives m = "
                          "16 and 19%"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("per GPU, stage 3 of stages 0-3 (heaviest;"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("1f1b on stage 3 of stages 0-3"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find(" of 4 ("), std::string::npos) << text.out;
  auto json = run_partrain("memory --model llama-3-8b --pp 4 --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto doc = parse_json(json.out);
  ASSERT_EQ(doc["warnings"].size(), 1u);
  EXPECT_NE(doc["warnings"][0].get<std::string>().find("--global-batch 16"), std::string::npos);
  EXPECT_EQ(doc["stage"].get<int>(), 3);
  // Filled, the warning goes.
  auto filled = run_partrain("memory --model llama-3-8b --pp 4 --global-batch 16");
  ASSERT_EQ(filled.exit_code, 0) << filled.err;
  EXPECT_EQ(filled.out.find("warning"), std::string::npos) << filled.out;
}

// What a fit rests on that the table cannot show: --params alone estimates no activations, and
// the cpu preset's capacity is a placeholder that a host's ranks share (it said "fits yes" for 4
// ranks of 22 GiB on a 23 GiB host). A GPU preset's capacity is the device's own: no note.
TEST(MemoryCommand, NotesWhatTheFitLeavesOut) {
  auto r = run_partrain("memory --params 1.5e9 --gpu cpu --precision fp32 --dp 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("note: activations are not estimated from --params alone"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("note: the cpu preset's 64 GiB is a placeholder"), std::string::npos)
      << r.out;
  r = run_partrain("memory --params 1.5e9 --gpu cpu --precision fp32 --dp 4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto warnings = nlohmann::json::parse(r.out)["warnings"];
  ASSERT_EQ(warnings.size(), 2u) << r.out;
  EXPECT_NE(warnings[1].get<std::string>().find("placeholder"), std::string::npos) << r.out;

  r = run_partrain("memory --model llama-2-7b --gpu h100-80g --dp 8 --zero 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("note:"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace partrain
