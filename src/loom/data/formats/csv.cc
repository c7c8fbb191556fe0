#include "loom/data/formats/csv.h"

#include <charconv>
#include <cmath>
#include <string_view>

#include "loom/core/error.h"
#include "loom/core/io/mapped_file.h"

namespace loom::data {

char parse_csv_delimiter(const std::string& d) {
  if (d == "\\t" || d == "tab") return '\t';
  if (d.size() != 1)
    throw ConfigError(
        fmt::format("--delimiter '{}': give one character (or 'tab')", escaped_text(d)));
  const char c = d[0];
  if (c == '\n' || c == '\r' || c == '\0' || c == '"' || c == '.' || c == '+' || c == '-' ||
      c == 'e' || c == 'E' || (c >= '0' && c <= '9'))
    throw ConfigError(fmt::format(
        "--delimiter '{}': a cell delimiter cannot be a line break, a quote or part of a number",
        escaped_text(d)));
  return c;
}
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

std::string escaped_text(std::string_view s, size_t max) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\')
      out += char(c);
    else
      out += fmt::format("\\x{:02x}", c);
  }
  return s.size() > max ? out + "..." : out;
}

Dataset parse_csv(const char* data, size_t size, const std::string& name, const CsvOptions& opts) {
  Dataset ds;
  ds.name = name;
  std::string_view text(data, size);
  int64_t columns = -1, label_col = 0;
  int64_t line_no = 0;
  int32_t max_label = -1;
  std::vector<float> row;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (trim(line).empty()) continue;  // blank lines (and a final newline) are not records
    if (line_no == 1 && opts.header) {
      // The header fixes the column count.
      columns = 1;
      for (char c : line) columns += c == opts.delimiter;
      continue;
    }
    row.clear();
    int32_t label = 0;
    int64_t col = 0;
    int64_t ncells = 1;
    for (char c : line) ncells += c == opts.delimiter;
    if (columns < 0) columns = ncells;
    if (ncells != columns)
      throw InputError(fmt::format("{}:{}: {} columns, expected {} (as on the {} line)", name,
                                   line_no, ncells, columns, opts.header ? "header" : "first"));
    if (columns < (opts.labels ? 2 : 1))
      throw InputError(fmt::format("{}:{}: a record needs a label and at least one feature column",
                                   name, line_no));
    label_col = !opts.labels             ? -1
                : opts.label_column >= 0 ? opts.label_column
                                         : columns + opts.label_column;
    if (opts.labels && (label_col < 0 || label_col >= columns))
      throw InputError(fmt::format("{}: label column {} does not exist ({} columns)", name,
                                   opts.label_column, columns));
    size_t cpos = 0;
    while (true) {
      size_t cend = line.find(opts.delimiter, cpos);
      std::string_view cell =
          trim(line.substr(cpos, cend == std::string_view::npos ? cend : cend - cpos));
      if (col == label_col) {
        int64_t v = 0;
        auto [p, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
        if (ec != std::errc() || p != cell.data() + cell.size() || cell.empty())
          throw InputError(fmt::format("{}:{}: column {}: label '{}' is not an integer", name,
                                       line_no, col + 1, escaped_text(cell)));
        const int64_t bound = opts.num_classes > 0 ? opts.num_classes : opts.max_classes;
        if (v < 0 || v >= bound)
          throw InputError(fmt::format(
              "{}:{}: label {} is outside [0, {}){}", name, line_no, v, bound,
              opts.num_classes > 0 ? "" : "; raise --max-classes if there are that many classes"));
        label = int32_t(v);
      } else {
        float v = 0;
        auto [p, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
        if (ec != std::errc() || p != cell.data() + cell.size() || cell.empty() ||
            !std::isfinite(v))
          throw InputError(fmt::format("{}:{}: column {}: '{}' is not a finite number", name,
                                       line_no, col + 1, escaped_text(cell)));
        row.push_back(v);
      }
      ++col;
      if (cend == std::string_view::npos) break;
      cpos = cend + 1;
    }
    ds.features.insert(ds.features.end(), row.begin(), row.end());
    ds.labels.push_back(label);
    max_label = std::max(max_label, label);
  }
  ds.count = int64_t(ds.labels.size());
  ds.sample_shape = {columns > 0 ? columns - (opts.labels ? 1 : 0) : 0};
  ds.num_classes = opts.num_classes > 0 ? opts.num_classes : max_label + 1;
  if (ds.count == 0) throw InputError(fmt::format("{}: no records", name));
  return ds;
}

Dataset read_csv(const std::string& path, const CsvOptions& opts) {
  core::MappedFile f(path);
  return parse_csv(reinterpret_cast<const char*>(f.data()), f.size(), path, opts);
}

}  // namespace loom::data
