// TensorBoard's Event messages, serialised as protobuf does, for the few kinds loom writes.
// The messages and field numbers are TensorBoard's (tensorboard/compat/proto/event.proto,
// summary.proto, tensor.proto, histogram.proto):
//   Event          wall_time 1 (double), step 2 (int64), file_version 3 (string),
//                  summary 5 (Summary), session_log 7 (SessionLog)
//   SessionLog     status 1 (enum; START = 1)
//   Summary        value 1 (repeated Value)
//   Summary.Value  tag 1 (string), simple_value 2 (float), histo 5 (HistogramProto),
//                  tensor 8 (TensorProto), metadata 9 (SummaryMetadata)
//   SummaryMetadata  plugin_data 1 (PluginData: plugin_name 1)
//   TensorProto    dtype 1 (enum; DT_STRING = 7), tensor_shape 2 (empty: a scalar),
//                  string_val 8 (repeated bytes)
//   HistogramProto min 1, max 2, num 3, sum 4, sum_squares 5 (double),
//                  bucket_limit 6, bucket 7 (repeated double, packed)
// Written by hand, not by protoc: loom only writes these five shapes, and libprotobuf comes
// with the optional ONNX import, while every build writes event files. The test reads them
// with TensorBoard's own parser.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom::train::tensorboard {

// A HistogramProto: bucket i counts the values in (bucket_limit[i-1], bucket_limit[i]], the
// first from min.
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit, bucket;
};

// Each returns one serialised Event; `wall_time` in seconds since the Unix epoch.
// The first event of every file: "brain.Event:2" tells readers that SessionLog marks restarts.
std::string file_version_event(double wall_time);
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value);
// A string tensor for the text plugin (which renders it as Markdown).
std::string text_event(double wall_time, int64_t step, const std::string& tag,
                       const std::string& text);
std::string histogram_event(double wall_time, int64_t step, const std::string& tag,
                            const Histogram& h);
// SessionLog START at `step`: a reader drops what earlier files logged at `step` or later.
std::string session_start_event(double wall_time, int64_t step);

}  // namespace loom::train::tensorboard
