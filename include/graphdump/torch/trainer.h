// Trainer: supervised training of a TorchModel with cross-entropy loss, dumping forward,
// backward and optimizer kernels (docs/executor.md: backward kernels are named
// "Gradients/<forward scope>/<BackwardNode>-op{N}").
//
//   graphdump::TrainerOptions options;            // SGD, lr 0.01
//   auto trainer = graphdump::Trainer::Create(model.get(), options);
//   for (...) { auto loss = (*trainer)->Step(images, labels); }
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graphdump/status.h"
#include "graphdump/torch/torch_model.h"

namespace graphdump {

enum class OptimizerKind { kSgd, kMomentum, kAdam };

// Optimizer settings. Each optimizer computes exactly what torch.optim's single-tensor
// implementation (PyTorch 1.13, foreach=False) computes, so parameters match bit for bit.
struct TrainerOptions {
  OptimizerKind optimizer = OptimizerKind::kSgd;
  double lr = 0.01;
  double momentum = 0.9;  // kMomentum: torch.optim.SGD(momentum=...)
  double beta1 = 0.9;     // kAdam
  double beta2 = 0.999;
  double eps = 1e-8;
  // Called after backward and before the optimizer with the trainable parameters (their
  // .grad() holds this step's gradients) and their names; may replace the gradients in place
  // (data parallelism all-reduces them here, see distributed.h). An error fails the step.
  std::function<Status(const std::vector<std::string>& names, std::vector<at::Tensor>& params)>
      gradient_hook;
};

class Trainer {
 public:
  // `model` is not owned and must outlive the trainer. Puts the module in training mode and
  // registers the loss kernel. Returns InvalidArgument when the model has no trainable
  // parameter or the learning rate is not positive.
  static StatusOr<std::unique_ptr<Trainer>> Create(TorchModel* model, TrainerOptions options);
  ~Trainer();

  // One training step: forward through the executor, cross-entropy loss against `labels`
  // (int64 class indices), backward, optimizer update; dumps what the session selects, ends the
  // step. Returns the loss. Errors name the kernel or autograd node that failed.
  StatusOr<double> Step(const at::Tensor& data, const at::Tensor& labels);

 private:
  struct Impl;
  explicit Trainer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace graphdump
