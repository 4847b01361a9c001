#include "eager/eager_precision.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <re2/re2.h>
#include <torch/library.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <unordered_set>

#include "eager/eager_capture.h"
#include "eager/eager_graph.h"
#include "graphdump/internal/kernel_entry.h"
#include "graphdump/layout.h"
#include "torch_compat.h"

namespace graphdump::torch_internal {
namespace {

// A key above autograd that nothing else in LibTorch 1.13 uses: the fallback below is the only
// kernel it has, and it is in a thread's dispatch keys only while a precision run is on there.
constexpr c10::DispatchKey kPrecisionKey = c10::DispatchKey::TESTING_ONLY_GenericMode;

std::atomic<EagerPrecision*> g_precision{nullptr};

// Does the operator return a tensor (or a list of them)?
bool ReturnsTensor(const c10::FunctionSchema& schema) {
  for (const c10::Argument& r : schema.returns()) {
    c10::TypePtr type = r.type();
    if (auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
    if (auto list = type->cast<c10::ListType>()) type = list->getElementType();
    if (type->kind() == c10::TypeKind::TensorType) return true;
  }
  return false;
}

// Operators that read their input as it is in any precision run: they convert to a dtype the
// program asks for, or alias, or hand the values to Python (`.float()`, `.detach()`,
// `.numpy()`'s resolve_conj). Casting their inputs would change what the program asked for,
// not what it computes.
bool ReadsAsIs(const c10::FunctionSchema& schema) {
  static const std::unordered_set<std::string> kNames = {
      "aten::to",         "aten::_to_copy",   "aten::type_as",     "aten::resolve_conj",
      "aten::resolve_neg", "aten::detach",    "aten::detach_",     "aten::alias",
      "aten::lift",       "aten::lift_fresh", "aten::lift_fresh_copy"};
  return !ReturnsTensor(schema) || kNames.count(schema.name()) > 0;
}

}  // namespace

struct EagerPrecision::KernelMatch {
  graphdump::KernelPattern::Kind kind = graphdump::KernelPattern::Kind::kOpType;
  std::string pattern;
  std::shared_ptr<RE2> regex;

  bool Matches(const std::string& full_name) const {
    switch (kind) {
      case graphdump::KernelPattern::Kind::kRegex:
        return RE2::FullMatch(full_name, *regex);
      case graphdump::KernelPattern::Kind::kFullName:
        return full_name == pattern;
      default:
        return internal::OpTypeEntryMatches(pattern, full_name);
    }
  }
};

EagerPrecision::EagerPrecision(EagerCapture* capture, at::ScalarType dtype,
                               std::vector<std::string> entries)
    : capture_(capture),
      dtype_(dtype),
      entries_(std::move(entries)),
      matched_(entries_.size(), false),
      is_state_(entries_.size(), false) {}

StatusOr<std::unique_ptr<EagerPrecision>> EagerPrecision::Create(
    EagerCapture* capture, at::ScalarType dtype, std::vector<std::string> keep_fp32) {
  if (dtype != at::kBFloat16 && dtype != at::kHalf) {
    return Status::InvalidArgument(std::string("a script's precision run is bf16 or fp16, not ") +
                                   c10::toString(dtype));
  }
  std::unique_ptr<EagerPrecision> run(new EagerPrecision(capture, dtype, std::move(keep_fp32)));
  for (const std::string& raw : run->entries_) {
    const std::string normalized = internal::NormalizeKernelEntry(raw);
    if (normalized.empty()) {
      return Status::InvalidArgument("--keep-fp32 '" + raw +
                                     "': an empty entry; give a kernel's full name, an op type, "
                                     "name-regex(REGEX) or a parameter's dotted name");
    }
    auto entry = internal::ClassifyKernelEntry(normalized);
    if (!entry.ok()) return Status::InvalidArgument("--keep-fp32 " + entry.status().message());
    KernelMatch k;
    k.kind = entry->kind;
    k.pattern = entry->pattern;
    if (k.kind == graphdump::KernelPattern::Kind::kRegex) {
      RE2::Options options;
      options.set_log_errors(false);
      k.regex = std::make_shared<RE2>(k.pattern, options);
    }
    run->kernel_entries_.push_back(std::move(k));
  }
  return run;
}

EagerPrecision::~EagerPrecision() {
  if (enabled_) c10::impl::tls_set_dispatch_key_included(kPrecisionKey, false);
  EagerPrecision* self = this;
  g_precision.compare_exchange_strong(self, nullptr);
}

void EagerPrecision::Enable() {
  // A forked child (a DataLoader worker) keeps the watched thread's dispatch keys and id, but
  // is no precision run: its operators run as they are.
  static const int registered = pthread_atfork(
      nullptr, nullptr, [] { g_precision.store(nullptr, std::memory_order_release); });
  (void)registered;
  thread_id_ = at::RecordFunction::currentThreadId();
  g_precision.store(this, std::memory_order_release);
  c10::impl::tls_set_dispatch_key_included(kPrecisionKey, true);
  enabled_ = true;
}

void EagerPrecision::AddStates(const std::vector<std::pair<std::string, at::Tensor>>& named) {
  at::NoGradGuard no_grad;
  for (const auto& [name, tensor] : named) {
    if (!tensor.defined() || !tensor.is_floating_point()) continue;
    state_names_.push_back(name);
    bool keep = false;
    for (size_t e = 0; e < entries_.size(); ++e) {
      // The dotted name, or the name the dump gives its Parameter file ("pos_freqs").
      if (entries_[e] == name || entries_[e] == SanitizeName(name)) {
        keep = true;
        matched_[e] = true;
        is_state_[e] = true;
      }
    }
    if (keep) {
      if (tensor.scalar_type() != at::kFloat) tensor.set_data(tensor.to(at::kFloat));
      kept_states_.insert(tensor.unsafeGetTensorImpl());
    } else if (tensor.scalar_type() != dtype_) {
      tensor.set_data(tensor.to(dtype_));
    }
  }
}

void EagerPrecision::NoteStates(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    state_names_.push_back(name);
    for (size_t e = 0; e < entries_.size(); ++e) {
      if (entries_[e] == name || entries_[e] == SanitizeName(name)) {
        matched_[e] = true;
        is_state_[e] = true;
      }
    }
  }
}

void EagerPrecision::NoteMatched(const std::string& entry) {
  for (size_t e = 0; e < entries_.size(); ++e) {
    if (entries_[e] == entry) matched_[e] = true;
  }
}

bool EagerPrecision::Kept(const EagerGraph& graph, uint32_t index) {
  std::vector<int8_t>& decided = decisions_[&graph];
  if (decided.size() <= index) decided.resize(index + 1, -1);
  if (decided[index] < 0) {
    const std::string& name = graph.kernel(index).full_name;
    bool keep = false;
    for (size_t e = 0; e < entries_.size(); ++e) {
      if (is_state_[e] || !kernel_entries_[e].Matches(name)) continue;
      keep = true;
      matched_[e] = true;
    }
    decided[index] = keep ? 1 : 0;
  }
  return decided[index] == 1;
}

bool EagerPrecision::IsKeptFloat(const at::Tensor& t) const {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (kept_states_.count(impl)) return true;
  auto it = kept_outputs_.find(impl);
  return it != kept_outputs_.end() && it->second.lock().get() == impl;
}

void EagerPrecision::NoteKeptOutput(const at::Tensor& t) {
  if (kept_outputs_.size() > 2 * kept_outputs_swept_ + 1024) {
    for (auto it = kept_outputs_.begin(); it != kept_outputs_.end();) {
      it = it->second.expired() ? kept_outputs_.erase(it) : std::next(it);
    }
    kept_outputs_swept_ = kept_outputs_.size();
  }
  kept_outputs_.insert_or_assign(
      t.unsafeGetTensorImpl(),
      c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>(t.getIntrusivePtr()));
}

void EagerPrecision::NoteSeen(const EagerGraph& graph, uint32_t index) {
  std::vector<uint8_t>& flags = seen_flags_[&graph];
  if (flags.size() <= index) flags.resize(index + 1, 0);
  if (flags[index]) return;
  flags[index] = 1;
  seen_.push_back({&graph, index});
}

void EagerPrecision::Fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                              std::vector<c10::IValue>* stack) {
  // Operators called from here (the casts, the kernel's own nested calls) are not kernels.
  c10::impl::ExcludeDispatchKeyGuard guard(kPrecisionKey);
  const c10::DispatchKeySet below =
      keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kPrecisionKey);
  EagerPrecision* self = g_precision.load(std::memory_order_acquire);
  // Threads that inherit the key (an autograd engine's device threads) run their calls as they
  // are: only the watched thread's calls are kernels.
  if (self == nullptr || at::RecordFunction::currentThreadId() != self->thread_id_) {
    op.redispatchBoxed(below, stack);
    return;
  }
  self->Handle(op, below, stack);
}

void EagerPrecision::Handle(const c10::OperatorHandle& op, c10::DispatchKeySet below,
                            std::vector<c10::IValue>* stack) {
  EagerGraph* graph = nullptr;
  uint32_t index = 0;
  if (!capture_->TakeKernel(&graph, &index) || ReadsAsIs(op.schema())) {
    op.redispatchBoxed(below, stack);
    return;
  }
  const bool keep = Kept(*graph, index);
  const c10::FunctionSchema& schema = op.schema();
  const size_t arguments = schema.arguments().size();
  const size_t base = stack->size() - arguments;
  // An operator that writes into a tensor (in place, `out=`, `resize_`, `set_`) computes in the
  // dtype of what it writes, as PyTorch itself does: the written tensor is never replaced by a
  // cast copy (the operator may resize it, point it at other storage, or the program may hold
  // views of it), and its other floating operands are cast to its dtype.
  bool writes = false;
  std::optional<at::ScalarType> written_type;
  for (size_t i = 0; i < arguments; ++i) {
    if (!torch_compat::SchemaWritesArgument(schema, i)) continue;
    writes = true;
    const c10::IValue& v = (*stack)[base + i];
    std::vector<at::Tensor> tensors;
    if (v.isTensor()) tensors.push_back(v.toTensor());
    if (v.isTensorList()) tensors = v.toTensorVector();
    for (const at::Tensor& t : tensors) {
      if (!written_type && t.defined() && t.is_floating_point()) written_type = t.scalar_type();
    }
  }
  bool floating = false;
  // An input as the kernel computes on it; undefined: unchanged.
  auto cast = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || !t.is_floating_point()) return {};
    floating = true;
    const at::ScalarType type = t.scalar_type();
    if (writes) return !written_type || type == *written_type ? at::Tensor() : t.to(*written_type);
    if (!keep) return type == dtype_ ? at::Tensor() : t.to(dtype_);
    if (type == at::kFloat && IsKeptFloat(t)) return {};
    // Held in the run's dtype (the program's float32 data is rounded as the run would hold it).
    return type == dtype_ ? t.to(at::kFloat) : t.to(dtype_).to(at::kFloat);
  };
  bool cast_any = false;
  for (size_t i = 0; i < arguments; ++i) {
    c10::IValue& v = (*stack)[base + i];
    if (torch_compat::SchemaWritesArgument(schema, i)) {
      floating |= v.isTensor() && v.toTensor().defined() && v.toTensor().is_floating_point();
      continue;
    }
    if (v.isTensor()) {
      at::Tensor c = cast(v.toTensor());
      if (!c.defined()) continue;
      v = c10::IValue(std::move(c));
      cast_any = true;
    } else if (v.isTensorList()) {
      std::vector<at::Tensor> list = v.toTensorVector();
      bool changed = false;
      for (at::Tensor& t : list) {
        at::Tensor c = cast(t);
        if (c.defined()) t = std::move(c), changed = true;
      }
      if (changed) v = c10::IValue(c10::List<at::Tensor>(list)), cast_any = true;
    }
  }
  if (cast_any) {
    capture_->SetComputedInputs(c10::ArrayRef<c10::IValue>(stack->data() + base, arguments));
  }
  op.redispatchBoxed(below, stack);
  const size_t returns = schema.returns().size();
  for (size_t r = stack->size() - std::min(returns, stack->size()); r < stack->size(); ++r) {
    const c10::IValue& out = (*stack)[r];
    if (!out.isTensor()) continue;
    const at::Tensor& t = out.toTensor();
    if (t.defined() && t.is_floating_point()) {
      floating = true;
      if (keep && t.scalar_type() == at::kFloat) NoteKeptOutput(t);
    }
  }
  if (floating) NoteSeen(*graph, index);
}

std::vector<std::string> EagerPrecision::Unmatched() const {
  std::vector<std::string> messages;
  for (size_t e = 0; e < entries_.size(); ++e) {
    if (matched_[e]) continue;
    // Nearby: the kernels and parameters whose names share the longest start with the entry.
    std::vector<std::pair<size_t, std::string>> scored;
    auto score = [&](const std::string& name) {
      size_t n = 0;
      while (n < name.size() && n < entries_[e].size() && name[n] == entries_[e][n]) ++n;
      scored.emplace_back(n, name);
    };
    for (const Seen& s : seen_) score(s.graph->kernel(s.index).full_name);
    for (const std::string& name : state_names_) score(name);
    std::stable_sort(scored.begin(), scored.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    std::string nearby;
    for (size_t i = 0; i < scored.size() && i < 6; ++i) {
      nearby += (i ? ", " : "") + scored[i].second;
    }
    messages.push_back("--keep-fp32 '" + entries_[e] +
                       "' matches no kernel that ran and no floating parameter or buffer" +
                       (nearby.empty() ? std::string(" (no floating kernel ran)")
                                       : " (nearby: " + nearby + ")") +
                       "; entries are kernels' full names as the dump names them, op types, "
                       "name-regex(RE), or parameters' dotted names (docs/precision.md)");
  }
  return messages;
}

}  // namespace graphdump::torch_internal

TORCH_LIBRARY_IMPL(_, TESTING_ONLY_GenericMode, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<
             &graphdump::torch_internal::EagerPrecision::Fallback>());
}
