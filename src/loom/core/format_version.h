// Format versions of the JSON files loom writes and reads back (docs/formats.md). Each JSON
// object carries "format_version": N. A reader takes every version up to the one it writes,
// including 0 (the field absent: a file written before loom versioned it, with the same
// fields), and refuses a newer one, written by a newer loom whose fields it cannot know, with
// an InputError that names the file and both versions.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace loom {

inline constexpr const char* kFormatVersionKey = "format_version";

// The format version `j` declares: its "format_version", 0 when it has none (or is not an
// object). `what` names the format ("metrics"), `where` the file (and line). InputError when
// the field is not a whole number >= 0 or is newer than `newest`.
int64_t check_format_version(const nlohmann::json& j, int64_t newest, const std::string& what,
                             const std::string& where);

}  // namespace loom
