// train.histograms: the distribution of every weight tensor and of its gradient, as
// TensorBoard histograms "weights/<tensor>" and "gradients/<tensor>" ("linear_0.weight", as in
// model.safetensors), every train.histogram_every steps, from rank 0's replica.
#pragma once

#include <cstdint>

#include "loom/nn/graph/model.h"
#include "loom/plan/train_settings.h"
#include "loom/train/tensorboard_writer.h"

namespace loom::train {

// train.histograms and train.histogram_every, as the run plan reads them.
using HistogramOptions = plan::HistogramOptions;

// The histograms at `step`. The gradients are those the model's gradient buffer holds after
// the step's exchange: what the update used, for an allreduce; rank 0's own, for the
// strategies that exchange parameters instead. Copies both buffers to the host.
void write_model_histograms(TensorBoardWriter& tb, nn::Model& model, int64_t step);

}  // namespace loom::train
