// The LibTorch-free half of replay's call rebuilding (replay_call.h): which operator, and the
// recorded argument literals, bounded before they are parsed.
#include "graphdump/replay_call.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace graphdump {
namespace {

// ATen operators replay may run: computations on their tensor arguments with no effect outside
// their results and those arguments (replay runs each on copies of the dumped inputs). No file,
// stream, process, device, random-generator or global-state operator is here, nor one whose
// output is uninitialised memory (empty) or aliases storage at chosen offsets (as_strided, set_).
// Sorted: looked up by binary search. An in-place form "x_" is allowed when "x" is.
// clang-format off
constexpr std::string_view kReplayable[] = {
    "__and__", "__or__", "__xor__", "_log_softmax", "_softmax", "abs", "absolute", "acos", "acosh",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool3d", "add", "addbmm", "addcdiv", "addcmul", "addmm",
    "addmv", "addr", "all", "alpha_dropout", "amax", "amin", "aminmax", "angle", "any", "arccos",
    "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh", "argmax", "argmin", "argsort",
    "asin", "asinh", "atan", "atan2", "atanh", "avg_pool1d", "avg_pool2d", "avg_pool3d", "baddbmm",
    "batch_norm", "bilinear", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "bmm", "broadcast_tensors",
    "broadcast_to", "bucketize", "cat", "ceil", "celu", "channel_shuffle", "chunk", "clamp",
    "clamp_max", "clamp_min", "clip", "clone", "concat", "constant_pad_nd", "contiguous", "conv1d",
    "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "convolution",
    "copysign", "cos", "cosh", "cosine_embedding_loss", "cosine_similarity", "cross",
    "cross_entropy_loss", "cummax", "cummin", "cumprod", "cumsum", "deg2rad", "detach", "diag",
    "diag_embed", "diagonal", "diff", "digamma", "dist", "div", "divide", "dot", "dropout",
    "einsum", "elu", "embedding", "eq", "erf", "erfc", "erfinv", "exp", "exp2", "expand",
    "expand_as", "expm1", "feature_alpha_dropout", "feature_dropout", "flatten", "flip", "fliplr",
    "flipud", "float_power", "floor", "floor_divide", "fmax", "fmin", "fmod", "frac", "full_like",
    "gather", "ge", "gelu", "glu", "greater", "greater_equal", "group_norm", "gt", "hardshrink",
    "hardsigmoid", "hardswish", "hardtanh", "heaviside", "huber_loss", "hypot", "index_add",
    "index_select",
    "instance_norm", "isclose", "isfinite", "isinf", "isnan", "kl_div", "l1_loss", "layer_norm",
    "le", "leaky_relu", "lerp", "less", "less_equal", "lgamma", "linear", "log", "log10", "log1p",
    "log2", "log_sigmoid", "log_softmax", "logaddexp", "logaddexp2", "logical_and", "logical_not",
    "logical_or", "logical_xor", "logit", "logsumexp", "lt", "margin_ranking_loss", "masked_fill",
    "matmul", "max", "max_pool1d", "max_pool2d", "max_pool3d", "maximum", "mean", "median", "min",
    "minimum", "mish", "mm", "movedim", "mse_loss", "mul", "multiply", "mv", "nan_to_num",
    "nanmean", "nansum", "narrow", "native_batch_norm", "native_channel_shuffle", "native_dropout",
    "native_layer_norm", "ne", "neg", "negative", "nll_loss", "nll_loss2d", "nll_loss_nd", "norm",
    "not_equal", "ones_like", "outer", "permute", "pixel_shuffle", "pixel_unshuffle", "pow",
    "prelu", "prod", "rad2deg", "reciprocal", "relu", "relu6", "remainder", "repeat", "reshape",
    "roll", "rot90", "round", "rsqrt", "rsub", "select", "selu", "sigmoid", "sign", "silu", "sin",
    "sinc", "sinh", "slice", "smooth_l1_loss", "soft_margin_loss", "softmax", "softplus",
    "softshrink", "sort", "split", "split_with_sizes", "sqrt", "square", "squeeze", "stack", "std",
    "sub", "subtract", "sum", "swapaxes", "t", "tan", "tanh", "tensor_split", "threshold", "to",
    "topk", "transpose", "tril", "triu", "true_divide", "trunc", "type_as", "unbind", "unflatten",
    "unsqueeze", "upsample_bicubic2d", "upsample_bilinear2d", "upsample_linear1d",
    "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "upsample_trilinear3d", "var",
    "view", "view_as", "where", "xlogy", "zeros_like"};
// clang-format on

static_assert(std::is_sorted(std::begin(kReplayable), std::end(kReplayable)));

bool Listed(std::string_view name) {
  return std::binary_search(std::begin(kReplayable), std::end(kReplayable), name);
}

// A C identifier of at most 128 characters (an operator or overload name).
bool IsIdentifier(std::string_view s, bool allow_empty) {
  if (s.empty()) return allow_empty;
  if (s.size() > 128 || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string Quoted(std::string_view text) {
  constexpr size_t kShown = 120;
  std::string shown(text.substr(0, kShown));
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return "'" + shown + (text.size() > kShown ? "...'" : "'");
}

// The bounds of kMaxReplayLiteral*, checked on the text alone (strings skipped), so that the
// parser below never recurses deeper than kMaxReplayLiteralDepth or builds more items.
std::optional<std::string> CheckBounds(std::string_view text) {
  if (text.size() > kMaxReplayLiteralBytes) {
    return "it is " + std::to_string(text.size()) + " bytes long (at most " +
           std::to_string(kMaxReplayLiteralBytes) + ")";
  }
  int depth = 0;
  size_t items = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
      }
    } else if (c == '[') {
      if (++depth > kMaxReplayLiteralDepth) {
        return "its lists nest deeper than " + std::to_string(kMaxReplayLiteralDepth);
      }
      ++items;
    } else if (c == ']') {
      --depth;
    } else if (c == ',') {
      ++items;
    }
    if (items > kMaxReplayLiteralItems) {
      return "it has more than " + std::to_string(kMaxReplayLiteralItems) + " items";
    }
  }
  return std::nullopt;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  std::optional<ReplayLiteral> ParseAll() {
    auto v = Parse(0);
    Skip();
    if (!v || pos_ != text_.size()) return std::nullopt;
    return v;
  }

 private:
  void Skip() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  bool Take(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  std::optional<ReplayLiteral> Parse(int depth) {
    Skip();
    ReplayLiteral v;
    if (pos_ >= text_.size()) return std::nullopt;
    if (text_[pos_] == '[') {
      if (depth >= kMaxReplayLiteralDepth) return std::nullopt;  // CheckBounds said so already
      ++pos_;
      v.kind = ReplayLiteral::kList;
      Skip();
      if (Take("]")) return v;
      while (true) {
        auto e = Parse(depth + 1);
        if (!e) return std::nullopt;
        v.list.push_back(std::move(*e));
        Skip();
        if (Take("]")) return v;
        if (!Take(",")) return std::nullopt;
      }
    }
    if (text_[pos_] == '"') {
      v.kind = ReplayLiteral::kString;
      for (++pos_; pos_ < text_.size() && text_[pos_] != '"'; ++pos_) {
        if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
        v.s += text_[pos_];
      }
      if (!Take("\"")) return std::nullopt;
      return v;
    }
    if (Take("None")) return v;
    if (Take("True")) {
      v.kind = ReplayLiteral::kBool;
      v.b = true;
      return v;
    }
    if (Take("False")) {
      v.kind = ReplayLiteral::kBool;
      return v;
    }
    if (Take("input.")) {
      v.kind = ReplayLiteral::kInput;
      size_t end = pos_;
      while (end < text_.size() && std::isdigit(static_cast<unsigned char>(text_[end]))) ++end;
      uint64_t slot = 0;
      auto [stop, error] = std::from_chars(text_.data() + pos_, text_.data() + end, slot);
      if (end == pos_ || error != std::errc() || stop != text_.data() + end ||
          slot > kMaxReplayInputSlot) {
        return std::nullopt;
      }
      v.i = static_cast<int64_t>(slot);
      pos_ = end;
      return v;
    }
    for (const auto& [word, value] : {std::pair<std::string_view, double>{"-inf", -INFINITY},
                                      {"inf", INFINITY},
                                      {"nan", NAN}}) {
      if (Take(word)) {
        v.kind = ReplayLiteral::kFloat;
        v.f = value;
        return v;
      }
    }
    size_t end = pos_;
    while (end < text_.size() && std::strchr("+-0123456789.eE", text_[end]) && text_[end]) ++end;
    const std::string number(text_.substr(pos_, end - pos_));
    if (number.empty()) return std::nullopt;
    char* stop = nullptr;
    errno = 0;
    if (number.find_first_of(".eE") == std::string::npos) {
      v.kind = ReplayLiteral::kInt;
      v.i = std::strtoll(number.c_str(), &stop, 10);
    } else {
      v.kind = ReplayLiteral::kFloat;
      v.f = std::strtod(number.c_str(), &stop);
    }
    if (stop != number.c_str() + number.size() || (v.kind == ReplayLiteral::kInt && errno)) {
      return std::nullopt;
    }
    pos_ = end;
    return v;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// The dumped input slots `v` reads, appended to `slots`.
void CollectSlots(const ReplayLiteral& v, std::vector<int64_t>* slots) {
  if (v.kind == ReplayLiteral::kInput) slots->push_back(v.i);
  for (const ReplayLiteral& e : v.list) CollectSlots(e, slots);
}

// Why replay refuses ATen operator `name` (without "aten::") for kernel `info`, or nullopt.
std::optional<std::string> RefuseOperator(std::string_view name, const KernelInfo& info) {
  std::string_view bare = name;
  while (!bare.empty() && bare.back() == '_') bare.remove_suffix(1);
  while (!bare.empty() && bare.front() == '_') bare.remove_prefix(1);
  if (IsRandomOperator(bare)) {
    bool eval_dropout = bare.find("dropout") != std::string_view::npos;
    if (eval_dropout) {
      eval_dropout = false;
      for (const KernelArgument& a : info.arguments) {
        if (a.name == "train" && a.value == "False") eval_dropout = true;
      }
    }
    if (!eval_dropout) {
      return std::string(
          "it is a random operator: its output depends on the random generator's state, which "
          "the dump does not record");
    }
  }
  if (!IsReplayableOperator(name)) {
    return "aten::" + std::string(name) +
           " is not among the operators replay runs (computations without side effects: "
           "docs/precision.md, \"Replay\")";
  }
  return std::nullopt;
}

}  // namespace

bool IsReplayableOperator(std::string_view name) {
  if (Listed(name)) return true;
  return name.size() > 1 && name.back() == '_' && name[name.size() - 2] != '_' &&
         Listed(name.substr(0, name.size() - 1));
}

bool IsRandomOperator(std::string_view name) {
  static constexpr std::string_view kRandom[] = {"alpha_dropout",    "bernoulli",
                                                 "cauchy",           "dropout",
                                                 "exponential",      "feature_alpha_dropout",
                                                 "feature_dropout",  "geometric",
                                                 "log_normal",       "multinomial",
                                                 "native_dropout",   "normal",
                                                 "poisson",          "rand",
                                                 "rand_like",        "randint",
                                                 "randint_like",     "randn",
                                                 "randn_like",       "random",
                                                 "randperm",         "rrelu",
                                                 "rrelu_with_noise", "uniform"};
  return std::find(std::begin(kRandom), std::end(kRandom), name) != std::end(kRandom);
}

std::variant<ReplayLiteral, std::string> ParseReplayLiteral(std::string_view text) {
  if (auto over = CheckBounds(text)) return "its value " + Quoted(text) + " is refused: " + *over;
  auto parsed = Parser(text).ParseAll();
  if (!parsed) return "it has an unreadable value: " + Quoted(text);
  return std::move(*parsed);
}

std::variant<ReplayCallPlan, std::string> PlanReplayCall(const KernelInfo& info,
                                                         size_t dumped_inputs) {
  if (info.schema.empty()) {
    if (info.full_name.rfind("Gradients/", 0) == 0) {
      return std::string(
          "it is a backward kernel (an autograd function, not an operator call of the graph)");
    }
    if (info.full_name.rfind("Default/optimizer-", 0) == 0) {
      return std::string("it is an optimizer update (several operators on a parameter)");
    }
    return std::string(
        "the graph file records no operator schema for it (a kernel the host made itself, or a "
        "dump written by MindSpore or by a graphdump older than replay)");
  }
  // "aten::add.Tensor(Tensor self, ...) -> Tensor": the name and overload before '('.
  const std::string_view schema = info.schema;
  const std::string_view head = schema.substr(0, schema.find('('));
  constexpr std::string_view kAten = "aten::";
  if (head.size() == schema.size() || head.substr(0, kAten.size()) != kAten) {
    return "its recorded schema " + Quoted(schema) + " does not name an ATen operator";
  }
  const std::string_view qualified = head.substr(kAten.size());
  const size_t dot = qualified.find('.');
  const std::string_view name = qualified.substr(0, dot);
  const std::string_view overload =
      dot == std::string_view::npos ? std::string_view() : qualified.substr(dot + 1);
  if (!IsIdentifier(name, false) || !IsIdentifier(overload, true)) {
    return "its recorded schema " + Quoted(schema) + " does not name an ATen operator";
  }
  const std::string op_type = OpTypeFromFullName(info.full_name);
  if (name != op_type || (!info.op_type.empty() && info.op_type != op_type)) {
    return "its recorded schema names aten::" + std::string(name) +
           " and the kernel's op type is " + Quoted(info.op_type.empty() ? op_type : info.op_type) +
           ": replay runs only a kernel's own operator";
  }
  if (auto refused = RefuseOperator(name, info)) return *refused;
  if (info.arguments.size() > kMaxReplayArguments) {
    return "the graph file records " + std::to_string(info.arguments.size()) +
           " arguments (an operator takes at most " + std::to_string(kMaxReplayArguments) + ")";
  }

  ReplayCallPlan plan;
  plan.op = {"aten::" + std::string(name), std::string(overload)};
  std::vector<int64_t> slots;
  for (const KernelArgument& a : info.arguments) {
    if (a.value == "<runtime>") {
      return "its argument " + Quoted(a.name) +
             " was computed while the graph ran (not a constant), and the dump does not record "
             "non-tensor values";
    }
    auto literal = ParseReplayLiteral(a.value);
    if (auto* why = std::get_if<std::string>(&literal)) {
      return "its argument " + Quoted(a.name) + ": " + *why;
    }
    CollectSlots(std::get<ReplayLiteral>(literal), &slots);
    plan.arguments.push_back(std::move(std::get<ReplayLiteral>(literal)));
  }
  plan.input_slots = slots.size();
  if (plan.input_slots != dumped_inputs) {
    if (dumped_inputs == 0) {
      return std::string(
          "the dump holds no input tensors of it: replay needs input_output 0 (inputs and "
          "outputs) and saved_data tensor or full");
    }
    return "its call reads " + std::to_string(plan.input_slots) + " tensors and the dump holds " +
           std::to_string(dumped_inputs) + " inputs (an optional tensor that was None at run time)";
  }
  for (int64_t slot : slots) {
    if (slot < 0 || static_cast<size_t>(slot) >= dumped_inputs) {
      return "it reads input slot " + std::to_string(slot) + " and the dump holds " +
             std::to_string(dumped_inputs) + " inputs of it";
    }
  }
  return plan;
}

}  // namespace graphdump
