#include "loom/compress/registry.h"

#include <fmt/format.h>

#include <deque>
#include <mutex>
#include <optional>

#include "loom/compress/builtin_codec_kinds.h"
#include "loom/core/config_refusal.h"
#include "loom/core/error.h"

namespace loom::compress {
namespace {

// Records live here for the life of the process (a deque keeps their addresses); built-ins are
// added on first use, registrars append at static initialisation.
struct Kinds {
  std::deque<CodecKind> records;
  std::vector<const CodecKind*> list;
  std::vector<std::string> names;

  void add(CodecKind k) {
    for (const auto& r : records)
      if (r.name == k.name) throw Error(fmt::format("codec \"{}\" is registered twice", k.name));
    if (!k.make) throw Error(fmt::format("codec \"{}\" is registered without a maker", k.name));
    records.push_back(std::move(k));
    list.push_back(&records.back());
    names.push_back(records.back().name);
  }
};

Kinds& kinds() {
  static Kinds* k = [] {
    auto* all = new Kinds;  // never destroyed: registrars and late readers may outlive statics
    for (CodecKind& b : builtin_codec_kinds()) all->add(std::move(b));
    return all;
  }();
  return *k;
}

std::string joined_names() {
  return fmt::format("{}", fmt::join(kinds().names, ", "));
}

std::vector<std::string> bf16_residual_codecs() {
  std::vector<std::string> names;
  for (const CodecKind* k : kinds().list)
    if (k->make(Config())->supports_bf16_residual()) names.push_back(k->name);
  return names;
}

}  // namespace

double CodecKind::wire_bits_per_element() const {
  constexpr size_t n = size_t(1) << 20;
  return 8.0 * double(make(Config())->encoded_bytes(n)) / double(n);
}

const std::vector<const CodecKind*>& codec_kinds() {
  return kinds().list;
}

const std::vector<std::string>& codec_names() {
  return kinds().names;
}

std::vector<std::string> codec_names_where(const std::function<bool(const CodecKind&)>& pred) {
  std::vector<std::string> names;
  for (const CodecKind* k : kinds().list)
    if (pred(*k)) names.push_back(k->name);
  return names;
}

const CodecKind* find_codec_kind(const std::string& name) {
  for (const CodecKind* k : kinds().list)
    if (k->name == name) return k;
  return nullptr;
}

const CodecKind& codec_kind(const std::string& name, const std::string& where) {
  if (const CodecKind* k = find_codec_kind(name)) return *k;
  throw ConfigError(fmt::format("{}: key 'codec': unknown codec \"{}\" (one of: {})", where, name,
                                joined_names()));
}

CodecRegistrar::CodecRegistrar(CodecKind kind) {
  kinds().add(std::move(kind));
}

std::string codec_key(const Config& cfg) {
  return cfg.has("codec.name") ? "codec.name" : "codec";
}

std::string codec_name(const Config& cfg, const std::string& default_name) {
  if (cfg.has("codec") && cfg.has("codec.name"))
    throw ConfigError(
        fmt::format("{}: key 'codec' and {}: key 'codec.name' both name the codec; "
                    "set one",
                    cfg.where("codec"), cfg.where("codec.name")));
  return cfg.get_choice(codec_key(cfg), default_name, codec_names());
}

std::unique_ptr<Codec> make_codec(const Config& cfg, const std::string& default_name) {
  return make_codec(codec_name(cfg, default_name), cfg);
}

std::unique_ptr<Codec> make_codec(const std::string& name, const Config& cfg) {
  const CodecKind& kind = codec_kind(name, cfg.has("codec") ? cfg.where("codec") : "codec");
  std::unique_ptr<Codec> codec = kind.make(cfg);
  codec->set_error_feedback(cfg.get_bool("codec.error_feedback", true));
  if (cfg.has("codec.residual")) {
    const std::string f = cfg.get_choice("codec.residual", "fp32", {"fp32", "bf16"});
    if (f == "bf16" && !codec->supports_bf16_residual())
      throw ConfigError(fmt::format(
          "{}: key 'codec.residual': codec {} keeps its residual in fp32 only (bf16 residuals: "
          "{})",
          cfg.where("codec.residual"), name, fmt::join(bf16_residual_codecs(), ", ")));
    codec->set_residual_format(f == "bf16" ? ResidualFormat::kBf16 : ResidualFormat::kF32);
  }
  return codec;
}

void refuse_other_codec_keys(const Config& cfg, const std::string& name) {
  const std::string key = codec_key(cfg);
  const std::string chosen = fmt::format("the codec is {} ({})", name, cfg.where(key));
  for (const CodecKind* k : codec_kinds()) {
    if (k->name == name) continue;
    for (const ConfigKeySpec& spec : k->keys) {
      if (!cfg.has(spec.key)) continue;
      // The record's default as TOML; one that does not read back as a value (prose) makes any
      // setting count.
      std::optional<ConfigScalar> def;
      try {
        const Config d = Config::from_string("k = " + spec.default_text);
        if (d.has("k") && !d.values().at("k").is_array) def = d.values().at("k").value;
      } catch (const ConfigError&) {
      }
      if (!def || sets_other_than(cfg, spec.key, *def))
        refuse_key(cfg, spec.key, fmt::format("a parameter of codec {}; {}", k->name, chosen));
    }
  }
  if (!codec_kind(name).lossy)
    refuse_unless_default(cfg, "codec.error_feedback", true,
                          fmt::format("feeds back what a lossy codec did not send; {}, which "
                                      "sends everything",
                                      chosen));
}

std::vector<ConfigKeySpec> codec_config_keys() {
  std::vector<ConfigKeySpec> keys = {
      {"codec", ConfigType::kString, "\"fp32\"", "gradient codec: " + joined_names()},
      {"codec.name", ConfigType::kString, "\"fp32\"",
       "the same as `codec`, for files that also set codec.* parameters"},
      {"codec.error_feedback", ConfigType::kBool, "true",
       "keep what a lossy codec did not send and add it to the next step"},
      {"codec.residual", ConfigType::kString, "\"bf16\" (fp16, bf16) / \"fp32\"",
       "storage of the error-feedback residual: fp32 | bf16 (fp16 and bf16 codecs only)"},
  };
  for (const CodecKind* k : codec_kinds())
    for (const ConfigKeySpec& s : k->keys) keys.push_back(s);
  return keys;
}

}  // namespace loom::compress
