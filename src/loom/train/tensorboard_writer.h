// One TensorBoard event file: `tensorboard --logdir runs/` draws a run's curves from the
// tb/ folder of its output directory. Each writer makes a new file, named as TensorBoard's own
// writers name theirs, events.out.tfevents.<10-digit Unix seconds>.<host>.<pid> (".<n>" added
// if that exists), so a resumed run adds a file beside the earlier ones and never touches
// them; TensorBoard reads a folder's files in name order, which is time order. Records are
// TFRecord frames (tensorboard_record.h) of Events (tensorboard_event.h). loom never reads
// these files back.
#pragma once

#include <cstdint>
#include <fstream>
#include <span>
#include <string>

namespace loom::train {

class TensorBoardWriter {
 public:
  // Creates `dir` and the file, and writes the file_version event. InputError naming the
  // directory or file if it cannot.
  explicit TensorBoardWriter(const std::string& dir);
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  const std::string& path() const { return path_; }
  // TensorBoard stores scalars as float32.
  void scalar(const std::string& tag, int64_t step, double value);
  void text(const std::string& tag, int64_t step, const std::string& markdown);
  void histogram(const std::string& tag, int64_t step, std::span<const float> values);
  // A SessionLog START (a resume): TensorBoard drops what the earlier files of the folder
  // logged at `step` or later.
  void restart_at(int64_t step);
  // Writes out what is buffered; InputError naming the file if the write failed (a full disk).
  void flush();

 private:
  void write(const std::string& event);

  std::string path_;
  std::ofstream out_;
};

}  // namespace loom::train
