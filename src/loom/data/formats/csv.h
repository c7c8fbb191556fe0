// CSV: one record per line, numeric feature cells and an integer label column, an optional
// header line, a configurable delimiter. Errors name the file, the line and the column.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "loom/data/sources/dataset.h"
#include "loom/data/sources/set_checks.h"

namespace loom::data {

struct CsvOptions {
  char delimiter = ',';
  bool header = false;                // the first line names the columns and is skipped
  int label_column = -1;              // index of the label column; negative counts from the end
  int num_classes = 0;                // labels must lie in [0, num_classes); 0: max label + 1
  int64_t max_classes = kMaxClasses;  // with num_classes 0: labels must lie below this
  bool labels = true;                 // false: every column is a feature (inputs to predict)
};

// The delimiter a user names (--delimiter): one character, or "tab" / "\t". ConfigError for
// anything else, and for characters that cannot separate numeric cells: none at all, a line
// break, NUL, a quote, or a character of a number (digits, '.', '+', '-', 'e', 'E').
char parse_csv_delimiter(const std::string& d);

// Text for an error message: printable ASCII as it is, every other byte as \xNN, cut after
// `max` bytes with "...". Binary files read as text never put raw bytes on the terminal.
std::string escaped_text(std::string_view s, size_t max = 40);

// Features are stored unnormalised as float32, sample_shape {columns - 1}.
Dataset read_csv(const std::string& path, const CsvOptions& opts = {});
Dataset parse_csv(const char* data, size_t size, const std::string& name, const CsvOptions& opts);

}  // namespace loom::data
