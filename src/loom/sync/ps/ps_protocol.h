// The messages between parameter-server workers and servers, over any Communicator's
// point-to-point. In a world of N workers and S servers, workers are ranks 0..N-1 and server s
// is rank N+s. Per pair, messages with one tag arrive in order, so each step's messages need
// no step number beyond the control message's.
//
//   start    rank 0 -> server s:  PsHello, then its pieces (offset, count pairs), then the
//                                 shard's initial parameters (kTagHello, kTagPieces, kTagInit)
//            server s -> worker:  the shard's parameters, version 0 (kTagInit)
//   step t   rank 0 -> server s:  PsControl{kStep, t, lr} (kTagControl)
//            worker -> server s:  gradients of each piece as its bucket is ready (push_tag)
//            server s -> worker:  that piece's parameters after the update (pull_tag)
//   save     rank 0 -> server s:  PsControl{kSave} (kTagControl), between steps
//            server s -> rank 0:  PsShardState, the shard's parameters, then each optimizer
//                                 buffer's slice in PsShardState's name order (kTagState)
//   restore  rank 0 -> server s:  PsControl{kRestore} (kTagControl), then the same messages
//                                 as save's answer, the other way (kTagState)
//   end      rank 0 -> server s:  PsControl{kStop} (kTagControl)
#pragma once

#include <cstdint>
#include <type_traits>

#include "loom/comm/communicator.h"

namespace loom::sync {

inline constexpr int kPsTagHello = 1;
inline constexpr int kPsTagPieces = 2;
inline constexpr int kPsTagInit = 3;
inline constexpr int kPsTagControl = 4;
inline constexpr int kPsTagState = 5;
inline constexpr int kPsTagPieceBase = 16;
// Pieces per server that the user tag range can carry (two tags each).
inline constexpr int kPsMaxPieces = (comm::kMaxUserTag - kPsTagPieceBase) / 2;

inline int ps_push_tag(int piece) {
  return kPsTagPieceBase + 2 * piece;
}
inline int ps_pull_tag(int piece) {
  return kPsTagPieceBase + 2 * piece + 1;
}

inline constexpr int64_t kPsMagic = 0x6c6f6f6d2d707331;  // "loom-ps1"

struct PsHello {
  int64_t magic = kPsMagic;
  int64_t num_params = 0;
  int64_t num_workers = 0;
  int64_t shard_begin = 0;
  int64_t shard_end = 0;
  int64_t num_pieces = 0;
};
static_assert(sizeof(PsHello) == 48 && std::is_trivially_copyable_v<PsHello>);

struct PsControl {
  enum : int64_t { kStep = 1, kStop = 2, kSave = 3, kRestore = 4 };
  int64_t command = kStep;
  int64_t step = 0;
  double lr = 0;
};
static_assert(sizeof(PsControl) == 24 && std::is_trivially_copyable_v<PsControl>);

// A server's state between steps (checkpoints): its key range, its optimizer's step count, the
// step it serves next, and the names of its optimizer's buffers (each one float per key).
inline constexpr int kPsMaxStateBuffers = 4;
inline constexpr int kPsStateNameBytes = 32;
struct PsShardState {
  int64_t magic = kPsMagic;
  int64_t shard_begin = 0;
  int64_t shard_end = 0;
  int64_t optimizer_steps = 0;
  int64_t next_step = 0;
  int64_t num_buffers = 0;
  char names[kPsMaxStateBuffers][kPsStateNameBytes] = {};
};
static_assert(std::is_trivially_copyable_v<PsShardState>);

}  // namespace loom::sync
