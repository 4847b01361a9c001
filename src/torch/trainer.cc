#include "graphdump/torch/trainer.h"

#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <cstdio>
#include <deque>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "tensor_views.h"
#include "torch_compat.h"

namespace graphdump {
namespace {

using torch::autograd::Node;

// The scope of a kernel: its full name without the last segment.
std::string ScopeOfFullName(const std::string& full_name) {
  return full_name.substr(0, full_name.rfind('/'));
}

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

std::string ModuleOfParameter(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? "" : name.substr(0, dot);
}

std::string Underscored(std::string name) {
  for (char& c : name) {
    if (c == '.' || c == '/' || c == '\\' || c == ' ') c = '_';
  }
  return name;
}

}  // namespace

struct Trainer::Impl {
  TorchModel* model;
  TrainerOptions options;
  DumpSession* session;
  bool logical_layout = true;
  KernelInfo loss_kernel;
  std::vector<std::string> param_names;
  std::vector<at::Tensor> params;
  std::unordered_map<const at::TensorImpl*, size_t> param_index;
  // Optimizer state per parameter: momentum buffer, or Adam's exp_avg and exp_avg_sq.
  std::vector<at::Tensor> state1, state2;
  int64_t adam_step = 0;
  std::vector<KernelInfo> update_kernels;                // per parameter, once registered
  std::unordered_map<std::string, KernelInfo> backward;  // key -> kernel

  // Per step: which forward kernel produced each autograd node.
  std::unordered_map<const Node*, std::string> node_scope;
  std::unordered_map<const Node*, std::string> node_module;

  bool Wants(const KernelInfo& k) const { return session && session->Wants(k); }

  // Views of the defined tensors. With `keep_slots` each view keeps its index as its slot: a
  // backward node's undefined gradients (none for an input that needs none) leave gaps, so a
  // slot always names the same gradient (SPEC §5: the input or output index).
  std::vector<TensorView> Views(const std::vector<at::Tensor>& tensors,
                                bool keep_slots = false) const {
    std::vector<TensorView> views;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (!tensors[i].defined()) continue;
      TensorView view;
      if (torch_internal::MakeView(tensors[i].detach(), logical_layout, &view)) {
        if (keep_slots) view.slot = static_cast<int32_t>(i);
        views.push_back(std::move(view));
      }
    }
    return views;
  }

  void ObserveForward(const KernelInfo& kernel, const std::vector<c10::IValue>& outputs) {
    auto note = [&](const at::Tensor& t) {
      if (!t.defined() || !t.grad_fn()) return;
      // First producer wins: a later kernel returning its input unchanged (eval dropout) must
      // not take over the node.
      node_scope.emplace(t.grad_fn().get(), ScopeOfFullName(kernel.full_name));
      node_module.emplace(t.grad_fn().get(), kernel.module_path);
    };
    for (const auto& v : outputs) {
      if (v.isTensor()) note(v.toTensor());
      if (v.isTensorList()) {
        for (const at::Tensor& t : v.toTensorVector()) note(t);
      }
    }
  }

  // Hooks every autograd node reachable from `root`; returns (node, key) pairs to remove.
  std::vector<std::pair<std::shared_ptr<Node>, uintptr_t>> HookBackward(
      const std::shared_ptr<Node>& root) {
    std::vector<std::pair<std::shared_ptr<Node>, uintptr_t>> hooks;
    std::unordered_set<const Node*> seen{root.get()};
    std::deque<std::shared_ptr<Node>> queue{root};
    std::unordered_map<std::string, int> ordinals;
    while (!queue.empty()) {
      std::shared_ptr<Node> node = queue.front();
      queue.pop_front();
      const std::string name = torch_compat::BackwardNodeName(*node);
      std::string scope = node_scope.count(node.get()) ? node_scope[node.get()] : "Default";
      std::string module = node_module.count(node.get()) ? node_module[node.get()] : "";
      if (const at::TensorImpl* var = torch_compat::AccumulatedVariable(*node)) {
        auto it = param_index.find(var);
        if (it != param_index.end()) {
          module = ModuleOfParameter(param_names[it->second]);
          scope = model->ScopeOf(module) + "/" + Underscored(param_names[it->second]);
        }
      }
      const std::string base = "Gradients/" + scope + "/" + name;
      const std::string key = base + "#" + std::to_string(ordinals[base]++);
      uintptr_t handle = torch_compat::AddObserver(
          *node, [this, key, scope, name, module](const std::vector<at::Tensor>& produced,
                                                  const std::vector<at::Tensor>& received) {
            OnBackwardNode(key, "Gradients/" + scope, name, module, received, produced);
          });
      hooks.emplace_back(node, handle);
      for (const auto& edge : node->next_edges()) {
        if (!edge.is_valid() || !seen.insert(edge.function.get()).second) continue;
        node_scope.emplace(edge.function.get(), scope);
        node_module.emplace(edge.function.get(), module);
        queue.push_back(edge.function);
      }
    }
    return hooks;
  }

  void OnBackwardNode(const std::string& key, const std::string& scope, const std::string& name,
                      const std::string& module, const std::vector<at::Tensor>& received,
                      const std::vector<at::Tensor>& produced) {
    auto it = backward.find(key);
    if (it == backward.end()) {
      it = backward.emplace(key, model->AddHostKernel(scope, name, module)).first;
    }
    if (Wants(it->second)) {
      session->OnKernelDone(it->second, Views(received, /*keep_slots=*/true),
                            Views(produced, /*keep_slots=*/true));
    }
  }

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

  // One parameter update exactly as torch.optim (1.13, single-tensor path) computes it.
  void Update(size_t i) {
    at::Tensor& p = params[i];
    at::Tensor grad = p.grad();
    if (!grad.defined()) return;
    const KernelInfo& kernel = update_kernels[i];
    const bool wants = Wants(kernel);
    // The inputs the update writes, as they are before it (copies, unless not read).
    std::vector<TensorView> inputs;
    auto add_before_update = [&](const at::Tensor& original) {
      TensorView view;
      if (torch_internal::MakeViewBeforeWrite(*session, kernel, original.detach(), logical_layout,
                                              &view)) {
        inputs.push_back(std::move(view));
      }
    };
    if (wants) {
      add_before_update(p);
      for (TensorView& view : Views({grad})) inputs.push_back(std::move(view));
      if (state1[i].defined()) add_before_update(state1[i]);
      if (state2[i].defined()) add_before_update(state2[i]);
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
        state1[i].mul_(options.beta1).add_(grad, 1 - options.beta1);
        state2[i].mul_(options.beta2).addcmul_(grad, grad.conj(), 1 - options.beta2);
        const double bias_correction1 = 1 - std::pow(options.beta1, step);
        const double bias_correction2 = 1 - std::pow(options.beta2, step);
        const double step_size = options.lr / bias_correction1;
        const double bias_correction2_sqrt = std::sqrt(bias_correction2);
        at::Tensor denom = (state2[i].sqrt() / bias_correction2_sqrt).add_(options.eps);
        w.addcdiv_(state1[i], denom, -step_size);
        break;
      }
    }
    if (wants) {
      std::vector<at::Tensor> outputs{w};
      if (state1[i].defined()) outputs.push_back(state1[i]);
      if (state2[i].defined()) outputs.push_back(state2[i]);
      session->OnKernelDone(kernel, inputs, Views(outputs));
    }
  }

  StatusOr<double> RunStep(const at::Tensor& data, const at::Tensor& labels) {
    node_scope.clear();
    node_module.clear();
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
      session->OnKernelDone(loss_kernel, Views({logits, labels}), Views({loss}));
    }
    if (!loss.grad_fn()) {
      return Status::InvalidArgument("the loss does not depend on any trainable parameter");
    }
    node_scope.emplace(loss.grad_fn().get(), ScopeOfFullName(loss_kernel.full_name));
    auto hooks = HookBackward(loss.grad_fn());
    Status backward_status;
    try {
      torch::autograd::backward({loss});
    } catch (const std::exception& e) {
      backward_status = Status::Internal("backward failed: " + ErrorText(e));
    }
    for (auto& [node, handle] : hooks) torch_compat::RemoveObserver(*node, handle);
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
    impl->param_index[p.value.unsafeGetTensorImpl()] = impl->params.size();
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
  model->SetKernelObserver([raw](const KernelInfo& kernel, const std::vector<c10::IValue>& outs) {
    raw->ObserveForward(kernel, outs);
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
