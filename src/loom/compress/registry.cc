#include "loom/compress/registry.h"

#include <fmt/format.h>

#include <deque>
#include <mutex>
#include <variant>

#include "loom/compress/builtin_codec_kinds.h"
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
    for (const CodecKey& key : k.keys)
      if (!std::holds_alternative<int64_t>(key.default_value) &&
          !std::holds_alternative<double>(key.default_value))
        throw Error(
            fmt::format("codec \"{}\": key '{}' has a default that is not a number (a codec's keys "
                        "are integers or reals)",
                        k.name, key.key));
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

}  // namespace

std::vector<std::string> bf16_residual_codecs() {
  std::vector<std::string> names;
  for (const CodecKind* k : kinds().list)
    if (k->make(k->default_params())->supports_bf16_residual()) names.push_back(k->name);
  return names;
}

CodecParams CodecKind::default_params() const {
  CodecParams p;
  for (const CodecKey& k : keys) p.set(k.key, k.default_value, "default");
  return p;
}

double CodecKind::wire_bits_per_element() const {
  constexpr size_t n = size_t(1) << 20;
  return 8.0 * double(make(default_params())->encoded_bytes(n)) / double(n);
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

std::unique_ptr<Codec> make_codec(const CodecOptions& o) {
  const CodecKind& kind = codec_kind(o.name, o.where);
  std::unique_ptr<Codec> codec = kind.make(o.params);
  codec->set_error_feedback(o.error_feedback);
  if (o.residual) {
    if (*o.residual == ResidualFormat::kBf16 && !codec->supports_bf16_residual())
      throw ConfigError(fmt::format(
          "{}: key 'codec.residual': codec {} keeps its residual in fp32 only (bf16 residuals: "
          "{})",
          o.residual_where, o.name, fmt::join(bf16_residual_codecs(), ", ")));
    codec->set_residual_format(*o.residual);
  }
  return codec;
}

std::unique_ptr<Codec> make_codec(const std::string& name) {
  CodecOptions o;
  o.name = name;
  o.params = codec_kind(name).default_params();
  return make_codec(o);
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
    for (const CodecKey& s : k->keys) keys.push_back(s.spec());
  return keys;
}

}  // namespace loom::compress
