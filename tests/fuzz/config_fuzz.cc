// libFuzzer harness: the TOML config reader. Whatever it accepts must flatten into values that
// the typed getters and canonical_text() handle, and canonical_text() must parse back to the
// same text; anything else is a ConfigError, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "loom/core/config.h"
#include "loom/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    loom::Config cfg = loom::Config::from_string(text, "fuzz.toml");
    // canonical_text() is what config.toml and checkpoints hold and what `--resume` parses:
    // it must parse back, to a config with the same text (values and types survive).
    const std::string canonical = cfg.canonical_text();
    if (loom::Config::from_string(canonical, "canonical.toml").canonical_text() != canonical)
      __builtin_trap();
    for (const auto& [key, v] : cfg.values()) {
      try {
        (void)cfg.get_double(key, 0);
      } catch (const loom::ConfigError&) {
      }
      try {
        (void)cfg.get_int_list(key, {});
      } catch (const loom::ConfigError&) {
      }
    }
  } catch (const loom::ConfigError&) {
  } catch (const loom::InputError&) {
  }
  return 0;
}
