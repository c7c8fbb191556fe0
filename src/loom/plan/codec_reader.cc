#include "loom/plan/codec_reader.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "loom/compress/registry.h"
#include "loom/core/config_refusal.h"
#include "loom/core/error.h"

namespace loom::plan {
namespace {

// A bound of a CodecKey's range as an integer bound: an infinite one is no bound.
int64_t int_bound(double b) {
  if (b <= double(std::numeric_limits<int64_t>::min())) return std::numeric_limits<int64_t>::min();
  if (b >= double(std::numeric_limits<int64_t>::max())) return std::numeric_limits<int64_t>::max();
  return int64_t(b);
}

ConfigScalar read_key(const Config& cfg, const compress::CodecKey& k) {
  if (const int64_t* def = std::get_if<int64_t>(&k.default_value))
    return cfg.get_int(k.key, *def, int_bound(k.lo), int_bound(k.hi));
  const double def = std::get<double>(k.default_value);
  if (std::isinf(k.lo) && std::isinf(k.hi)) return cfg.get_double(k.key, def);
  return cfg.get_double(k.key, def, k.lo, k.hi);
}

}  // namespace

std::string codec_key(const Config& cfg) {
  return cfg.has("codec.name") ? "codec.name" : "codec";
}

std::string codec_name(const Config& cfg, const std::string& default_name) {
  if (cfg.has("codec") && cfg.has("codec.name"))
    throw ConfigError(
        fmt::format("{}: key 'codec' and {}: key 'codec.name' both name the codec; "
                    "set one",
                    cfg.where("codec"), cfg.where("codec.name")));
  return cfg.get_choice(codec_key(cfg), default_name, compress::codec_names());
}

compress::CodecOptions read_codec_options(const Config& cfg, const std::string& default_name) {
  return read_codec_options(codec_name(cfg, default_name), cfg);
}

compress::CodecOptions read_codec_options(const std::string& name, const Config& cfg) {
  compress::CodecOptions o;
  o.name = name;
  o.where = cfg.has(codec_key(cfg)) ? cfg.where(codec_key(cfg)) : "codec";
  const compress::CodecKind& kind = compress::codec_kind(name, o.where);
  for (const compress::CodecKey& k : kind.keys)
    o.params.set(k.key, read_key(cfg, k), cfg.has(k.key) ? cfg.where(k.key) : "default");
  o.error_feedback = cfg.get_bool("codec.error_feedback", true);
  if (cfg.has("codec.residual")) {
    o.residual = cfg.get_choice("codec.residual", "fp32", {"fp32", "bf16"}) == "bf16"
                     ? compress::ResidualFormat::kBf16
                     : compress::ResidualFormat::kF32;
    o.residual_where = cfg.where("codec.residual");
  }
  return o;
}

void refuse_other_codec_keys(const Config& cfg, const std::string& name) {
  const std::string key = codec_key(cfg);
  const std::string chosen = fmt::format("the codec is {} ({})", name, cfg.where(key));
  for (const compress::CodecKind* k : compress::codec_kinds()) {
    if (k->name == name) continue;
    for (const compress::CodecKey& other : k->keys)
      if (sets_other_than(cfg, other.key, other.default_value))
        refuse_key(cfg, other.key, fmt::format("a parameter of codec {}; {}", k->name, chosen));
  }
  if (!compress::codec_kind(name).lossy)
    refuse_unless_default(cfg, "codec.error_feedback", true,
                          fmt::format("feeds back what a lossy codec did not send; {}, which "
                                      "sends everything",
                                      chosen));
}

}  // namespace loom::plan
