#include "replay/replay_execute.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/InferenceMode.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace graphdump::torch_internal {
namespace {

using Literal = ReplayLiteral;

// ---------------------------------------------------------------------------------------------
// The memory budget.

thread_local int t_scopes = 0;
std::atomic<size_t> g_in_use{0};           // bytes of the live allocations made inside a scope
c10::DeleterFnPtr g_inner_free = nullptr;  // the wrapped allocator's raw deleter

std::string Bytes(double n) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (n >= 1024 && u < 6) {
    n /= 1024;
    ++u;
  }
  char text[64];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", n, units[u]);
  return text;
}

// Wraps the CPU allocator LibTorch had: outside a ReplayMemoryScope it only forwards. Inside,
// an allocation is counted until freed; its DataPtr keeps the data pointer as its context, as
// LibTorch's raw_allocate requires, and the sizes live in a table.
class BudgetAllocator final : public c10::Allocator {
 public:
  explicit BudgetAllocator(c10::Allocator* inner) : inner_(inner) {
    g_inner_free = inner->raw_deleter();
  }

  c10::DataPtr allocate(size_t n) override {
    if (t_scopes == 0 || g_inner_free == nullptr) return inner_->allocate(n);
    const size_t budget = ReplayMemoryBudget();
    const size_t used = g_in_use.load();
    TORCH_CHECK(n <= budget && used <= budget - n, "a tensor of ", Bytes(static_cast<double>(n)),
                " would bring replay's tensors to ", Bytes(static_cast<double>(used) + n),
                ", over its memory budget of ", Bytes(static_cast<double>(budget)),
                " (half the machine's memory)");
    c10::DataPtr data = inner_->allocate(n);
    if (data.get() != data.get_context()) return data;
    void* raw = data.release_context();
    {
      std::lock_guard<std::mutex> lock(Table().mutex);
      Table().sizes[raw] = n;
    }
    g_in_use += n;
    return {raw, raw, &Release, data.device()};
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  // raw_allocate's memory may come from either path: Release tells them apart.
  c10::DeleterFnPtr raw_deleter() const override { return g_inner_free ? &Release : nullptr; }

 private:
  struct Allocations {
    std::mutex mutex;
    std::unordered_map<void*, size_t> sizes;
  };
  static Allocations& Table() {
    static Allocations* table = new Allocations;  // outlives every tensor
    return *table;
  }
  static void Release(void* raw) {
    size_t bytes = 0;
    {
      std::lock_guard<std::mutex> lock(Table().mutex);
      auto it = Table().sizes.find(raw);
      if (it != Table().sizes.end()) {
        bytes = it->second;
        Table().sizes.erase(it);
      }
    }
    g_in_use -= bytes;
    g_inner_free(raw);
  }

  c10::Allocator* inner_;
};

// Puts a BudgetAllocator in front of LibTorch's CPU allocator, once. (Should anything replace
// it later, allocations are no longer counted; OverBudget still checks the outputs.)
void InstallBudgetAllocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Lives as long as the tensors it allocated: never freed.
    c10::SetCPUAllocator(new BudgetAllocator(c10::GetCPUAllocator()), /*priority=*/UINT8_MAX);
  });
}

// ---------------------------------------------------------------------------------------------
// Binding the arguments.

std::string OneLine(std::string text) { return text.substr(0, text.find('\n')); }

// ScalarType values replay accepts (a dump records the dtype arguments of its calls).
bool KnownScalarType(int64_t v) {
  static const at::ScalarType kTypes[] = {
      at::kByte,  at::kChar,   at::kShort,        at::kInt,           at::kLong, at::kHalf,
      at::kFloat, at::kDouble, at::kComplexFloat, at::kComplexDouble, at::kBool, at::kBFloat16};
  return std::any_of(std::begin(kTypes), std::end(kTypes),
                     [&](at::ScalarType t) { return static_cast<int64_t>(t) == v; });
}

// The IValue an argument of (real) type `type` takes from `v`; `inputs` are the dumped inputs.
StatusOr<c10::IValue> ToIValue(const Literal& v, const c10::TypePtr& type,
                               const std::vector<at::Tensor>& inputs, c10::optional<int32_t> n) {
  auto bad = [&]() {
    return Status::Unsupported("a value of type " + type->repr_str() +
                               " cannot be rebuilt from what the graph file records");
  };
  if (auto opt = type->cast<c10::OptionalType>()) {
    if (v.kind == Literal::kNone) return c10::IValue();
    return ToIValue(v, opt->getElementType(), inputs, n);
  }
  if (v.kind == Literal::kInput) {
    if (v.i < 0 || static_cast<size_t>(v.i) >= inputs.size()) {
      return Status::Unsupported("it reads input slot " + std::to_string(v.i) + " but " +
                                 std::to_string(inputs.size()) + " inputs were dumped");
    }
    if (type->kind() != c10::TypeKind::TensorType) return bad();
    return c10::IValue(inputs[v.i]);
  }
  switch (type->kind()) {
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
      if (v.kind == Literal::kInt) return c10::IValue(v.i);
      return bad();
    case c10::TypeKind::ScalarTypeType:
      if (v.kind == Literal::kInt && KnownScalarType(v.i)) return c10::IValue(v.i);
      return Status::Unsupported("it is no dtype LibTorch computes in (ScalarType " +
                                 std::to_string(v.i) + ")");
    case c10::TypeKind::LayoutType:
      if (v.kind == Literal::kInt && v.i == static_cast<int64_t>(at::kStrided)) {
        return c10::IValue(v.i);
      }
      return Status::Unsupported("replay makes strided tensors only (layout " +
                                 std::to_string(v.i) + ")");
    case c10::TypeKind::MemoryFormatType:
      if (v.kind == Literal::kInt && v.i >= 0 &&
          v.i < static_cast<int64_t>(at::MemoryFormat::NumOptions)) {
        return c10::IValue(v.i);
      }
      return Status::Unsupported("no memory format is numbered " + std::to_string(v.i));
    case c10::TypeKind::FloatType:
      if (v.kind == Literal::kInt) return c10::IValue(static_cast<double>(v.i));
      if (v.kind == Literal::kFloat) return c10::IValue(v.f);
      return bad();
    case c10::TypeKind::BoolType:
      if (v.kind == Literal::kBool) return c10::IValue(v.b);
      return bad();
    case c10::TypeKind::NumberType:
      if (v.kind == Literal::kInt) return c10::IValue(v.i);
      if (v.kind == Literal::kFloat) return c10::IValue(v.f);
      if (v.kind == Literal::kBool) return c10::IValue(v.b);
      return bad();
    case c10::TypeKind::StringType:
      if (v.kind == Literal::kString) return c10::IValue(v.s);
      return bad();
    case c10::TypeKind::DeviceObjType:
      if (v.kind == Literal::kString && v.s == "cpu") return c10::IValue(c10::Device(v.s));
      return Status::Unsupported("replay runs on the CPU, not on device " +
                                 (v.kind == Literal::kString ? "'" + v.s + "'" : "?"));
    case c10::TypeKind::ListType: {
      const c10::TypePtr element = type->expectRef<c10::ListType>().getElementType();
      std::vector<Literal> items = v.list;
      if (v.kind != Literal::kList) {
        // `int[2] stride=1`: one number stands for the whole list.
        if (v.kind != Literal::kInt && v.kind != Literal::kFloat && v.kind != Literal::kBool) {
          return bad();
        }
        items.assign(n ? static_cast<size_t>(std::clamp<int32_t>(*n, 0, 64)) : 1, v);
      }
      c10::impl::GenericList list(element);
      for (const Literal& item : items) {
        auto e = ToIValue(item, element, inputs, c10::nullopt);
        if (!e.ok()) return e.status();
        list.push_back(std::move(*e));
      }
      return c10::IValue(std::move(list));
    }
    default:
      return bad();
  }
}

bool IsGenerator(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::GeneratorType) return true;
  auto opt = type->cast<c10::OptionalType>();
  return opt && opt->getElementType()->kind() == c10::TypeKind::GeneratorType;
}

// The argument named `name` of the bound call, or nullptr.
const c10::IValue* Argument(const c10::FunctionSchema& schema, const torch::jit::Stack& stack,
                            const char* name) {
  auto index = schema.argumentIndexWithName(name);
  return index && static_cast<size_t>(*index) < stack.size() ? &stack[*index] : nullptr;
}

// Why LibTorch could fault (SIGFPE) rather than raise on this call, or nullopt: argument values
// an operator divides by without checking them first.
std::optional<std::string> ArithmeticHazard(const c10::FunctionSchema& schema,
                                            const torch::jit::Stack& stack) {
  std::string name = schema.name().substr(schema.name().find("::") + 2);
  while (name.size() > 1 && name.back() == '_') name.pop_back();
  // Channels split into groups: the channel count must divide evenly.
  const char* groups_argument = name == "group_norm" ? "num_groups"
                                : name == "channel_shuffle" || name == "native_channel_shuffle"
                                    ? "groups"
                                    : nullptr;
  if (groups_argument) {
    const c10::IValue* input = Argument(schema, stack, schema.arguments()[0].name().c_str());
    const c10::IValue* groups = Argument(schema, stack, groups_argument);
    if (input && groups && input->isTensor() && groups->isInt()) {
      const at::Tensor& t = input->toTensor();
      const int64_t g = groups->toInt();
      const int64_t channels = t.dim() >= 2 ? t.size(1) : -1;
      if (g <= 0 || channels < 0 || channels % g != 0) {
        return "its " + std::string(groups_argument) + " (" + std::to_string(g) +
               ") does not divide the input's channels (" + std::to_string(channels) + ")";
      }
    }
  }
  // Integer division faults on a zero divisor and on the smallest integer over -1.
  const bool rounded_division = (name == "div" || name == "divide") &&
                                Argument(schema, stack, "rounding_mode") &&
                                !Argument(schema, stack, "rounding_mode")->isNone();
  if (rounded_division || name == "floor_divide" || name == "remainder" || name == "fmod") {
    for (const c10::IValue& v : stack) {
      if (v.isTensor() && v.toTensor().defined() &&
          at::isIntegralType(v.toTensor().scalar_type(), /*includeBool=*/true)) {
        return std::string(
            "it divides integers (an integer division can fault, and its output is not floating "
            "point)");
      }
    }
  }
  return std::nullopt;
}

// Why the outputs are over budget, or nullopt.
std::optional<std::string> OverBudget(const std::vector<at::Tensor>& outputs) {
  double bytes = 0;
  for (const at::Tensor& t : outputs) {
    bytes += static_cast<double>(t.numel()) * static_cast<double>(t.element_size());
  }
  const double budget = static_cast<double>(ReplayMemoryBudget());
  if (bytes <= budget) return std::nullopt;
  return "its outputs take " + Bytes(bytes) + ", over replay's memory budget of " + Bytes(budget) +
         " (half the machine's memory)";
}

}  // namespace

std::string ErrorText(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    return OneLine(c10_error->what_without_backtrace());
  }
  return OneLine(e.what());
}

size_t ReplayMemoryBudget() {
  static const size_t budget = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) return size_t{1} << 32;
    return static_cast<size_t>(pages) / 2 * static_cast<size_t>(page);
  }();
  return budget;
}

ReplayMemoryScope::ReplayMemoryScope() : outer_(t_scopes == 0) {
  if (outer_) InstallBudgetAllocator();
  ++t_scopes;
}

ReplayMemoryScope::~ReplayMemoryScope() { --t_scopes; }

std::variant<ReplayCall, std::string> RebuildCall(const KernelInfo& info, size_t dumped_inputs) {
  auto plan = PlanReplayCall(info, dumped_inputs);
  if (auto* why = std::get_if<std::string>(&plan)) return *why;
  ReplayCallPlan& p = std::get<ReplayCallPlan>(plan);
  ReplayCall call;
  for (const auto& op : torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(p.op.name))) {
    if (op->schema().overload_name() == p.op.overload) call.op = op;
  }
  const std::string qualified = p.op.name + (p.op.overload.empty() ? "" : "." + p.op.overload);
  if (!call.op) return "this LibTorch has no operator " + qualified;
  const c10::FunctionSchema& schema = call.op->schema();
  for (const c10::Argument& a : schema.arguments()) {
    if (IsGenerator(a.type())) {
      return std::string(
          "it is a random operator: its output depends on the random generator's state, which "
          "the dump does not record");
    }
  }
  if (info.arguments.size() != schema.arguments().size()) {
    return "the graph file records " + std::to_string(info.arguments.size()) + " arguments and " +
           qualified + " has " + std::to_string(schema.arguments().size());
  }
  for (size_t i = 0; i < info.arguments.size(); ++i) {
    if (info.arguments[i].name != schema.arguments()[i].name()) {
      return "the graph file records argument " + std::to_string(i) + " as '" +
             info.arguments[i].name.substr(0, 64) + "' and " + qualified + " names it '" +
             schema.arguments()[i].name() + "'";
    }
  }
  call.arguments = std::move(p.arguments);
  return call;
}

StatusOr<std::vector<at::Tensor>> Execute(const ReplayCall& call,
                                          const std::vector<at::Tensor>& inputs) {
  try {
    std::vector<at::Tensor> copies;
    for (const at::Tensor& t : inputs) copies.push_back(t.clone());
    const c10::FunctionSchema& schema = call.op->schema();
    const auto& arguments = schema.arguments();
    torch::jit::Stack stack;
    for (size_t i = 0; i < call.arguments.size(); ++i) {
      auto value = ToIValue(call.arguments[i], arguments[i].real_type(), copies, arguments[i].N());
      if (!value.ok()) {
        return Status::Unsupported("argument '" + arguments[i].name() +
                                   "': " + value.status().message());
      }
      stack.push_back(std::move(*value));
    }
    if (const c10::IValue* pin = Argument(schema, stack, "pin_memory")) {
      if (pin->isBool() && pin->toBool()) {
        return Status::Unsupported("argument 'pin_memory': replay runs on the CPU only");
      }
    }
    if (auto hazard = ArithmeticHazard(schema, stack)) return Status::Unsupported(*hazard);
    {
      c10::InferenceMode guard;
      call.op->getOperation()(stack);
    }
    std::vector<at::Tensor> outputs;
    for (const c10::IValue& v : stack) {
      if (v.isTensor()) {
        if (v.toTensor().defined()) outputs.push_back(v.toTensor());
      } else if (v.isTensorList()) {
        for (const at::Tensor& t : v.toTensorVector()) outputs.push_back(t);
      }
    }
    if (auto over = OverBudget(outputs)) return Status::Unsupported(*over);
    return outputs;
  } catch (const std::exception& e) {
    return Status::Internal("the operator failed: " + ErrorText(e));
  }
}

}  // namespace graphdump::torch_internal
