#include "loom/core/error.h"

namespace loom::detail {

void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  std::string what = fmt::format("internal check failed at {}:{}: {}", file, line, cond);
  if (!msg.empty()) what += fmt::format(" ({})", msg);
  throw Error(what, ExitCode::kInternal);
}

}  // namespace loom::detail
