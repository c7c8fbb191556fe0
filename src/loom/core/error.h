// Errors carry their context (file, key, rank, values) in words, and the process exit code
// that `loom` returns for them: bad input and bad config exit 2, a lost peer 3, NaN 4.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace loom {

enum class ExitCode : int { kOk = 0, kInternal = 1, kBadInput = 2, kLostPeer = 3, kNumeric = 4 };

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, ExitCode code = ExitCode::kInternal)
      : std::runtime_error(what), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

// A file or data set that is missing, truncated or malformed.
class InputError : public Error {
 public:
  explicit InputError(const std::string& what) : Error(what, ExitCode::kBadInput) {}
};

// A config key that is unknown, of the wrong type or out of range.
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& what) : Error(what, ExitCode::kBadInput) {}
};

// A peer that is lost or timed out, or ranks that disagree.
class CommError : public Error {
 public:
  explicit CommError(const std::string& what) : Error(what, ExitCode::kLostPeer) {}
};

// NaN or Inf where numbers were expected.
class NumericError : public Error {
 public:
  explicit NumericError(const std::string& what) : Error(what, ExitCode::kNumeric) {}
};

namespace detail {
[[noreturn]] void check_failed(const char* file, int line, const char* cond,
                               const std::string& msg);
}  // namespace detail

}  // namespace loom

// Programmer-error checks: they throw loom::Error with the condition, the place and the values.
#define LOOM_CHECK(cond, ...)                                                               \
  do {                                                                                      \
    if (!(cond))                                                                            \
      ::loom::detail::check_failed(__FILE__, __LINE__, #cond, fmt::format("" __VA_ARGS__)); \
  } while (0)

#define LOOM_CHECK_OP_(a, b, op)                                               \
  do {                                                                         \
    const auto& loom_a_ = (a);                                                 \
    const auto& loom_b_ = (b);                                                 \
    if (!(loom_a_ op loom_b_))                                                 \
      ::loom::detail::check_failed(__FILE__, __LINE__, #a " " #op " " #b,      \
                                   fmt::format("{} vs {}", loom_a_, loom_b_)); \
  } while (0)

#define LOOM_CHECK_EQ(a, b) LOOM_CHECK_OP_(a, b, ==)
#define LOOM_CHECK_NE(a, b) LOOM_CHECK_OP_(a, b, !=)
#define LOOM_CHECK_LT(a, b) LOOM_CHECK_OP_(a, b, <)
#define LOOM_CHECK_LE(a, b) LOOM_CHECK_OP_(a, b, <=)
#define LOOM_CHECK_GT(a, b) LOOM_CHECK_OP_(a, b, >)
#define LOOM_CHECK_GE(a, b) LOOM_CHECK_OP_(a, b, >=)
