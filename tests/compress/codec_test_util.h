// Shared helpers for the compress tests: seeded inputs where every value differs.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loom/compress/codec.h"
#include "loom/compress/registry.h"
#include "loom/core/config.h"
#include "loom/core/rng.h"
#include "loom/plan/codec_reader.h"

namespace loom::compress::testing {

inline std::vector<float> random_normal(size_t n, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed, 0, RngPurpose::kTest);
  std::vector<float> v(n);
  for (auto& x : v) x = scale * rng.normal();
  return v;
}

inline std::unique_ptr<Codec> codec_named(const std::string& name, const std::string& extra = "") {
  return make_codec(plan::read_codec_options(name, Config::from_string(extra)));
}

// Bytes buffer with 4-byte alignment.
struct Packed {
  std::vector<uint32_t> words;
  explicit Packed(size_t bytes) : words((bytes + 3) / 4 + 1, 0xdeadbeefu) {}
  std::span<std::byte> span(size_t bytes) {
    return {reinterpret_cast<std::byte*>(words.data()), bytes};
  }
};

}  // namespace loom::compress::testing
