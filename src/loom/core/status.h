// A status value for failures that are an expected outcome (a peer lost, a short read,
// a timeout), as LevelDB's Status: callers decide whether it becomes an exception.
#pragma once

#include <string>
#include <utility>

namespace loom {

class Status {
 public:
  enum class Code { kOk, kTimeout, kPeerLost, kIoError, kCorrupt };

  Status() = default;
  static Status ok() { return Status(); }
  static Status timeout(std::string msg) { return Status(Code::kTimeout, std::move(msg)); }
  static Status peer_lost(std::string msg) { return Status(Code::kPeerLost, std::move(msg)); }
  static Status io_error(std::string msg) { return Status(Code::kIoError, std::move(msg)); }
  static Status corrupt(std::string msg) { return Status(Code::kCorrupt, std::move(msg)); }

  bool is_ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

}  // namespace loom
