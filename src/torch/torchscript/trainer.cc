#include "graphdump/torch/trainer.h"

#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <cstdio>
#include <deque>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "eager/eager_capture.h"
#include "host/host_kernels.h"
#include "host/tensor_views.h"
#include "torch_compat.h"

namespace graphdump {

namespace {

using torch_internal::BackwardKernels;
using torch_internal::DefinedViews;
using torch_internal::ModuleOfParameter;
using torch_internal::Underscored;
using torch_internal::UpdateCapture;

std::string ErrorText(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    const std::string text = c10_error->what_without_backtrace();
    return text.substr(0, text.find('\n'));
  }
  return e.what();
}

const char* OptimizerName(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return "SGD";
    case OptimizerKind::kMomentum:
      return "Momentum";
    case OptimizerKind::kAdam:
      return "Adam";
  }
  return "SGD";
}

const char* UpdateOpType(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return "ApplyGradientDescent";
    case OptimizerKind::kMomentum:
      return "ApplyMomentum";
    case OptimizerKind::kAdam:
      return "Adam";
  }
  return "ApplyGradientDescent";
}

}  // namespace

struct Trainer::Impl {
  TorchModel* model;
  TrainerOptions options;
  DumpSession* session;
  KernelInfo loss_kernel;
  std::vector<std::string> param_names;
  std::vector<at::Tensor> params;
  // Optimizer state per parameter: momentum buffer, or Adam's exp_avg and exp_avg_sq.
  std::vector<at::Tensor> state1, state2;
  int64_t adam_step = 0;
  std::vector<KernelInfo> update_kernels;  // per parameter, once registered
  BackwardKernels backward;

  bool Wants(const KernelInfo& k) const { return session && session->Wants(k); }

  double ScalarLoss(const at::Tensor& loss) { return loss.item<double>(); }

  void RegisterUpdateKernels() {
    if (!update_kernels.empty()) return;
    const std::string scope = "Default/optimizer-" + std::string(OptimizerName(options.optimizer));
    for (const std::string& name : param_names) {
      update_kernels.push_back(model->AddHostKernel(scope + "/" + Underscored(name),
                                                    UpdateOpType(options.optimizer),
                                                    ModuleOfParameter(name)));
    }
  }

  // One parameter update exactly as torch.optim computes it on the CPU (torch 2.x's
  // single-tensor path: foreach kernels are the default only on accelerators).
  void Update(size_t i) {
    at::Tensor& p = params[i];
    at::Tensor grad = p.grad();
    if (!grad.defined()) return;
    UpdateCapture capture(session, update_kernels[i], p, grad, {state1[i], state2[i]});
    if (session) {
      for (const at::Tensor& written : {p, state1[i], state2[i]}) {
        torch_internal::BeforeWrite(*session, written);
      }
    }
    at::NoGradGuard no_grad;
    at::Tensor w = p.detach();
    switch (options.optimizer) {
      case OptimizerKind::kSgd:
        w.add_(grad, -options.lr);
        break;
      case OptimizerKind::kMomentum:
        if (!state1[i].defined()) {
          state1[i] = grad.clone().detach();
        } else {
          state1[i].mul_(options.momentum).add_(grad, 1.0);
        }
        w.add_(state1[i], -options.lr);
        break;
      case OptimizerKind::kAdam: {
        if (!state1[i].defined()) {
          state1[i] = at::zeros_like(w, at::MemoryFormat::Preserve);
          state2[i] = at::zeros_like(w, at::MemoryFormat::Preserve);
        }
        const double step = static_cast<double>(adam_step);
        // torch 2 moves the first moment with lerp_ (1.13: mul_(beta1).add_(grad, 1 - beta1),
        // which rounds differently) and takes the square root as `bias_correction2**0.5`,
        // Python's pow.
        state1[i].lerp_(grad, 1 - options.beta1);
        state2[i].mul_(options.beta2).addcmul_(grad, grad.conj(), 1 - options.beta2);
        const double bias_correction1 = 1 - std::pow(options.beta1, step);
        const double bias_correction2 = 1 - std::pow(options.beta2, step);
        const double step_size = options.lr / bias_correction1;
        const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
        at::Tensor denom = (state2[i].sqrt() / bias_correction2_sqrt).add_(options.eps);
        w.addcdiv_(state1[i], denom, -step_size);
        break;
      }
    }
    capture.Finish(w, {state1[i], state2[i]});
  }

  StatusOr<double> RunStep(const at::Tensor& data, const at::Tensor& labels) {
    backward.ClearForward();
    GRAPHDUMP_ASSIGN_OR_RETURN(c10::IValue out, model->RunMethod({data}));
    if (!out.isTensor()) {
      return Status::InvalidArgument(
          "training needs a model whose forward returns one tensor "
          "of logits; it returned " +
          out.tagKind());
    }
    const at::Tensor logits = out.toTensor();
    at::Tensor loss;
    try {
      loss = at::cross_entropy_loss(logits, labels);
    } catch (const std::exception& e) {
      return Status::InvalidArgument("kernel " + loss_kernel.full_name + " failed: logits " +
                                     c10::str(logits.sizes()) + ", labels " +
                                     c10::str(labels.sizes()) + ": " + ErrorText(e));
    }
    if (Wants(loss_kernel)) {
      session->OnKernelDone(loss_kernel, DefinedViews({logits, labels}), DefinedViews({loss}));
    }
    if (!loss.grad_fn()) {
      return Status::InvalidArgument("the loss does not depend on any trainable parameter");
    }
    backward.NoteNode(loss, model, "Default/loss-CrossEntropyLoss", "");
    auto hooks = backward.Hook({loss}, model);
    Status backward_status;
    try {
      torch::autograd::backward({loss});
    } catch (const std::exception& e) {
      backward_status = Status::Internal("backward failed: " + ErrorText(e));
    }
    hooks.reset();
    backward.ClearForward();
    GRAPHDUMP_RETURN_IF_ERROR(backward_status);
    if (options.gradient_hook) {
      GRAPHDUMP_RETURN_IF_ERROR(options.gradient_hook(param_names, params));
      // A hook may write the gradients behind their version counters (a library handed the
      // raw pointer): count it as a write, so no statistic of the old values is reused.
      for (at::Tensor& p : params) {
        if (p.grad().defined()) p.grad().unsafeGetTensorImpl()->bump_version();
      }
    }
    RegisterUpdateKernels();
    ++adam_step;
    for (size_t i = 0; i < params.size(); ++i) Update(i);
    for (at::Tensor& p : params) p.mutable_grad().reset();
    return ScalarLoss(loss);
  }
};

Trainer::Trainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Trainer::~Trainer() = default;

StatusOr<std::unique_ptr<Trainer>> Trainer::Create(TorchModel* model, TrainerOptions options) {
  if (!(options.lr > 0)) {
    char lr[32];
    std::snprintf(lr, sizeof(lr), "%g", options.lr);
    return Status::InvalidArgument(std::string("the learning rate must be positive, got ") + lr);
  }
  auto impl = std::make_unique<Impl>();
  impl->model = model;
  impl->options = options;
  impl->session = model->session();
  model->module().train(true);
  for (const auto& p : model->module().named_parameters(/*recurse=*/true)) {
    if (!p.value.requires_grad()) continue;
    impl->backward.AddParameter(p.value, model, p.name);
    impl->param_names.push_back(p.name);
    impl->params.push_back(p.value);
  }
  if (impl->params.empty()) {
    return Status::InvalidArgument("the model has no trainable parameter");
  }
  impl->state1.resize(impl->params.size());
  impl->state2.resize(impl->params.size());
  impl->loss_kernel =
      model->AddHostKernel("Default/loss-CrossEntropyLoss", "cross_entropy_loss", "");
  Impl* raw = impl.get();
  model->SetKernelObserver(
      [raw, model](const KernelInfo& kernel, const std::vector<c10::IValue>& outs) {
        raw->backward.NoteForward(model, kernel, outs);
      });
  return std::unique_ptr<Trainer>(new Trainer(std::move(impl)));
}

StatusOr<double> Trainer::Step(const at::Tensor& data, const at::Tensor& labels) {
  GRAPHDUMP_RETURN_IF_ERROR(impl_->model->BeginStep({data}));
  StatusOr<double> loss = Status::Internal("not run");
  try {
    loss = impl_->RunStep(data, labels);
  } catch (const std::exception& e) {
    loss = Status::Internal("training step failed: " + ErrorText(e));
  }
  impl_->model->EndStep();
  return loss;
}

}  // namespace graphdump
