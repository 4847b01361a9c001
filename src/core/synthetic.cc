#include "graphdump/synthetic.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace graphdump {
namespace {

constexpr int kClasses = 4;
constexpr float kLearningRate = 0.1f;

// float -> IEEE half, round to nearest even; overflow gives infinity.
uint16_t FloatToHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t exp = (bits >> 23) & 0xffu;
  uint32_t mant = bits & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(half);
}

struct Tensor {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<uint16_t> f16;

  TensorView View() const {
    TensorView v;
    v.dtype = dtype;
    v.shape = shape;
    v.data = dtype == DType::kFloat16 ? static_cast<const void*>(f16.data()) : f32.data();
    return v;
  }
  TensorMeta Meta() const { return {dtype, shape}; }
};

Tensor Make(std::vector<int64_t> shape) {
  Tensor t;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  t.shape = std::move(shape);
  t.f32.assign(static_cast<size_t>(n), 0.0f);
  return t;
}

Tensor Random(std::vector<int64_t> shape, std::mt19937_64& rng, float scale) {
  Tensor t = Make(std::move(shape));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : t.f32) v = dist(rng) * scale;
  return t;
}

Tensor MatMul(const Tensor& a, const Tensor& b) {
  const int64_t m = a.shape[0], k = a.shape[1], n = b.shape[1];
  Tensor out = Make({m, n});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) out.f32[i * n + j] += a.f32[i * k + p] * b.f32[p * n + j];
  return out;
}

Tensor BiasAdd(const Tensor& a, const Tensor& bias) {
  Tensor out = a;
  const size_t n = bias.f32.size();
  for (size_t i = 0; i < out.f32.size(); ++i) out.f32[i] += bias.f32[i % n];
  return out;
}

struct KernelSpec {
  const char* full_name;
  const char* module_path;
  int line;
  const char* code;
};

constexpr KernelSpec kKernels[] = {
    {"Default/fc1-Dense/MatMul-op0", "fc1", 12, "x = self.fc1(x)"},
    {"Default/fc1-Dense/BiasAdd-op1", "fc1", 12, "x = self.fc1(x)"},
    {"Default/relu-ReLU/ReLU-op2", "relu", 13, "x = self.relu(x)"},
    {"Default/fc2-Dense/MatMul-op3", "fc2", 14, "x = self.fc2(x)"},
    {"Default/fc2-Dense/BiasAdd-op4", "fc2", 14, "x = self.fc2(x)"},
    {"Default/Cast-op5", "", 15, "y = x.astype(mstype.float16)"},
    {"Default/ReduceMean-op6", "", 16, "loss = (x * x).mean()"},
    {"Gradients/Default/fc2-Dense/MatMulGrad-op7", "fc2", 14, "x = self.fc2(x)"},
    {"Default/optimizer-SGD/ApplyGradientDescent-op8", "optimizer", 21, "self.optimizer(grads)"},
};

}  // namespace

GraphInfo SyntheticGraph(const SyntheticOptions& o) {
  const int64_t b = o.batch, f = o.features, h = o.hidden, c = kClasses;
  const std::vector<std::vector<TensorMeta>> ins = {
      {{DType::kFloat32, {b, f}}, {DType::kFloat32, {f, h}}},
      {{DType::kFloat32, {b, h}}, {DType::kFloat32, {h}}},
      {{DType::kFloat32, {b, h}}},
      {{DType::kFloat32, {b, h}}, {DType::kFloat32, {h, c}}},
      {{DType::kFloat32, {b, c}}, {DType::kFloat32, {c}}},
      {{DType::kFloat32, {b, c}}},
      {{DType::kFloat32, {b, c}}},
      {{DType::kFloat32, {b, h}}, {DType::kFloat32, {b, c}}},
      {{DType::kFloat32, {h, c}}, {DType::kFloat32, {h, c}}, {DType::kFloat32, {}}},
  };
  const std::vector<std::vector<TensorMeta>> outs = {
      {{DType::kFloat32, {b, h}}}, {{DType::kFloat32, {b, h}}}, {{DType::kFloat32, {b, h}}},
      {{DType::kFloat32, {b, c}}}, {{DType::kFloat32, {b, c}}}, {{DType::kFloat16, {b, c}}},
      {{DType::kFloat32, {}}},     {{DType::kFloat32, {h, c}}}, {{DType::kFloat32, {h, c}}},
  };
  GraphInfo g;
  g.graph_id = o.graph_id;
  g.name = "synthetic_mlp";
  for (size_t i = 0; i < std::size(kKernels); ++i) {
    KernelInfo k;
    k.full_name = kKernels[i].full_name;
    k.module_path = kKernels[i].module_path;
    k.source_trace.push_back({"synthetic_mlp.py", kKernels[i].line, 9, kKernels[i].code});
    k.inputs = ins[i];
    k.outputs = outs[i];
    if (i == 0 || i == 3) k.attributes = {{"transpose_a", "False"}, {"transpose_b", "False"}};
    if (i == 8) k.attributes = {{"learning_rate", "0.1"}};
    g.kernels.push_back(std::move(k));
  }
  return g;
}

Status RunSyntheticGraph(DumpSession& session, const SyntheticOptions& o) {
  const GraphInfo graph = SyntheticGraph(o);
  Status registered = session.OnGraphCompiled(graph);
  if (!registered.ok() && registered.code() != StatusCode::kInvalidArgument) return registered;

  std::mt19937_64 rng(o.seed);
  Tensor w1 = Random({o.features, o.hidden}, rng, 0.5f);
  Tensor b1 = Random({o.hidden}, rng, 0.1f);
  Tensor w2 = Random({o.hidden, kClasses}, rng, 0.5f);
  Tensor b2 = Random({kClasses}, rng, 0.1f);
  Tensor lr = Make({});
  lr.f32[0] = kLearningRate;
  session.OnConstant(o.graph_id, 0, lr.View());

  auto kernel = [&](uint32_t i) {
    KernelInfo k = graph.kernels[i];
    k.index = i;
    k.graph_id = o.graph_id;
    return k;
  };
  for (int step = 0; step < o.steps; ++step) {
    session.BeginStep(o.graph_id);
    const uint64_t iteration = session.CurrentIteration();
    if (session.WantsParameters()) {
      session.OnParameter(o.graph_id, "fc1.weight", w1.View());
      session.OnParameter(o.graph_id, "fc1.bias", b1.View());
      session.OnParameter(o.graph_id, "fc2.weight", w2.View());
      session.OnParameter(o.graph_id, "fc2.bias", b2.View());
    }
    Tensor x = Random({o.batch, o.features}, rng, o.input_scale);
    // Runs kernel i and plants the configured faults in its output.
    auto emit = [&](uint32_t i, const std::vector<const Tensor*>& in, Tensor& out) {
      if (static_cast<int>(i) == o.perturb_kernel && iteration >= o.fault_iteration) {
        for (float& v : out.f32) v += o.perturb;
      }
      if (static_cast<int>(i) == o.nan_kernel && iteration == o.fault_iteration &&
          !out.f32.empty()) {
        out.f32[0] = std::numeric_limits<float>::quiet_NaN();
      }
      const KernelInfo k = kernel(i);
      if (!session.Wants(k)) return;
      std::vector<TensorView> in_views, out_views = {out.View()};
      for (const Tensor* t : in) in_views.push_back(t->View());
      session.OnKernelDone(k, in_views, out_views);
    };
    Tensor h1 = MatMul(x, w1);
    emit(0, {&x, &w1}, h1);
    Tensor h2 = BiasAdd(h1, b1);
    emit(1, {&h1, &b1}, h2);
    Tensor h3 = h2;
    for (float& v : h3.f32) v = v > 0 ? v : 0.0f;
    emit(2, {&h2}, h3);
    Tensor o1 = MatMul(h3, w2);
    emit(3, {&h3, &w2}, o1);
    Tensor o2 = BiasAdd(o1, b2);
    emit(4, {&o1, &b2}, o2);
    Tensor o3 = o2;
    o3.dtype = DType::kFloat16;
    for (float v : o2.f32) o3.f16.push_back(FloatToHalf(v));
    emit(5, {&o2}, o3);
    Tensor loss = Make({});
    for (float v : o2.f32) loss.f32[0] += v * v / static_cast<float>(o2.f32.size());
    emit(6, {&o2}, loss);
    // d(loss)/d(o2) = 2 * o2 / N; d(loss)/d(w2) = h3^T @ that.
    Tensor dout = o2;
    for (float& v : dout.f32) v *= 2.0f / static_cast<float>(o2.f32.size());
    Tensor h3t = Make({o.hidden, o.batch});
    for (int r = 0; r < o.batch; ++r)
      for (int c = 0; c < o.hidden; ++c) h3t.f32[c * o.batch + r] = h3.f32[r * o.hidden + c];
    Tensor grad = MatMul(h3t, dout);
    emit(7, {&h3, &dout}, grad);
    Tensor updated = w2;
    for (size_t i = 0; i < updated.f32.size(); ++i) updated.f32[i] -= kLearningRate * grad.f32[i];
    emit(8, {&w2, &grad, &lr}, updated);
    w2 = updated;
    session.EndStep(o.graph_id);
  }
  return Status::Ok();
}

}  // namespace graphdump
