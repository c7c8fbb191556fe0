#include "loom/compress/codec_params.h"

#include <fmt/format.h>

#include "loom/core/error.h"

namespace loom::compress {

ConfigKeySpec CodecKey::spec() const {
  const ConfigType type =
      std::holds_alternative<double>(default_value) ? ConfigType::kDouble : ConfigType::kInt;
  return {key, type, config_scalar_text(default_value), doc};
}

void CodecParams::set(const std::string& key, ConfigScalar value, std::string where) {
  values_[key] = Entry{std::move(value), std::move(where)};
}

const CodecParams::Entry& CodecParams::at(const std::string& key) const {
  const auto it = values_.find(key);
  if (it == values_.end())
    throw Error(fmt::format("codec parameter '{}' was not read (is it in the codec's keys?)", key));
  return it->second;
}

int64_t CodecParams::integer(const std::string& key) const {
  const Entry& e = at(key);
  if (const int64_t* v = std::get_if<int64_t>(&e.value)) return *v;
  throw Error(fmt::format("codec parameter '{}' is not an integer", key));
}

double CodecParams::real(const std::string& key) const {
  const Entry& e = at(key);
  if (const double* v = std::get_if<double>(&e.value)) return *v;
  if (const int64_t* v = std::get_if<int64_t>(&e.value)) return double(*v);
  throw Error(fmt::format("codec parameter '{}' is not a number", key));
}

const std::string& CodecParams::where(const std::string& key) const {
  return at(key).where;
}

}  // namespace loom::compress
