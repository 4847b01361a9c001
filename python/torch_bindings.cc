// _graphdump's LibTorch half: configuration, and the DumpHost that runs TorchScript modules
// through graphdump's executor for the package's glue (graphdump/torch.py).
#include <ATen/Parallel.h>
#include <pybind11/stl.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "bindings.h"
#include "graphdump/config.h"
#include "graphdump/selector.h"
#include "graphdump/session.h"
#include "graphdump/torch/host.h"
#include "graphdump/torch/replay.h"

namespace graphdump::python {
namespace {

namespace py = pybind11;

// A parsed configuration, held between validation (at start) and the session's opening (at the
// first module call, when the rank is known).
struct Config {
  ParsedConfig parsed;
};

std::shared_ptr<Config> LoadConfig(const std::optional<std::string>& path,
                                   const std::optional<std::string>& dump_path) {
  if (dump_path) {
    if (const std::string problem = DumpPathProblem(*dump_path); !problem.empty())
      RaiseConfigError("--dump-path: " + problem);
  }
  std::shared_ptr<Config> config;
  if (!path) {
    StatusOr<std::unique_ptr<ParsedConfig>> env = LoadConfigFromEnvironment();
    if (!env.ok()) RaiseConfigError(env.status().message());
    if (*env) config = std::make_shared<Config>(Config{std::move(**env)});
  } else {
    const char* diagnostic = std::getenv(kDiagnosticPathEnv);
    StatusOr<ParsedConfig> parsed = LoadConfigFile(*path, diagnostic ? diagnostic : "");
    if (!parsed.ok()) RaiseConfigError(parsed.status().message());
    config = std::make_shared<Config>(Config{std::move(*parsed)});
  }
  if (dump_path) {
    if (!config) {
      RaiseConfigError(
          "--dump-path replaces the path of a configuration, and none is given (--config, "
          "GRAPHDUMP_CONFIG or MINDSPORE_DUMP_CONFIG)");
    }
    config->parsed.config.path = *dump_path;
  }
  return config;
}

// The module behind a torch.jit.ScriptModule (scripted, traced or loaded), sharing its object.
torch::jit::Module ScriptModuleOf(const py::handle& module) {
  if (!py::hasattr(module, "_c")) {
    throw py::type_error("expected a TorchScript module (torch.jit.ScriptModule)");
  }
  return py::cast<torch::jit::Module>(module.attr("_c"));
}

TorchModel* ModelOf(DumpHost& host, const py::handle& module) {
  StatusOr<TorchModel*> model = host.ModelFor(ScriptModuleOf(module));
  if (!model.ok()) Raise(model.status());
  return *model;
}

py::object Call(DumpHost& host, const py::handle& module, const py::tuple& args,
                const py::dict& kwargs) {
  TorchModel* model = ModelOf(host, module);
  const c10::FunctionSchema& schema = model->module().get_method("forward").function().getSchema();
  torch::jit::Stack stack = torch::jit::createStackForSchema(
      schema, torch::jit::tuple_slice(args), py::reinterpret_borrow<py::kwargs>(kwargs),
      model->module()._ivalue());
  stack.erase(stack.begin());  // the module itself: RunMethod adds it
  StatusOr<c10::IValue> out = Status::Internal("not run");
  {
    py::gil_scoped_release no_gil;  // as TorchScript's own call: ATen needs no Python
    out = host.Call(model, std::move(stack));
  }
  if (!out.ok()) Raise(out.status());
  return torch::jit::toPyObject(std::move(*out));
}

py::dict SummaryOf(DumpHost& host) {
  host.FinishReads();  // what was written so far includes the last step's statistic rows
  const DumpSummary s = host.session() ? host.session()->Summary() : DumpSummary{};
  py::dict d;
  d["root"] = s.root;
  d["files"] = s.files;
  d["bytes"] = s.bytes;
  d["kernels_dumped"] = s.kernels_dumped;
  d["statistic_rows"] = s.statistic_rows;
  d["statistics_computed"] = s.statistics_computed;
  d["statistics_bytes"] = s.statistics_bytes;
  d["unused_kernel_entries"] = s.unused_kernel_entries;
  d["graphs"] = host.num_models();
  d["calls"] = host.calls();
  d["optimizer_steps"] = host.optimizer_steps();
  return d;
}

// Handles of the host's two-part operations, complete types for pybind11.
struct BackwardPassHandle {
  std::shared_ptr<DumpHost::BackwardPass> pass;
};
struct OptimizerStepHandle {
  std::shared_ptr<DumpHost::OptimizerStep> step;
};
struct AllReduceHandle {
  std::shared_ptr<DumpHost::AllReduceStep> step;
};
struct CompiledInputsHandle {
  std::shared_ptr<std::vector<TensorView>> views;
};
// A kernel of a compiled graph as graphdump/_compiled.py describes it: full name without the
// op id, op type, module path, source trace ((file, line, code), the kernel's own line first),
// input names for the .ir, attributes.
using CompiledKernelSpec =
    std::tuple<std::string, std::string, std::string,
               std::vector<std::tuple<std::string, int, std::string>>, std::vector<std::string>,
               std::map<std::string, std::string>>;

KernelInfo CompiledKernelOf(const CompiledKernelSpec& spec) {
  KernelInfo k;
  std::tie(k.full_name, k.op_type, k.module_path, std::ignore, k.input_names, k.attributes) = spec;
  for (const auto& [file, line, code] : std::get<3>(spec)) {
    k.source_trace.push_back(SourceLocation{file, line, 0, code});
  }
  return k;
}
// GRAPHDUMP_STATISTICS_THREAD=0: every tensor is read on the training thread when its kernel
// ends, none found again from an earlier step (docs/python.md).
bool StatisticsThreadRefused() {
  const char* setting = std::getenv("GRAPHDUMP_STATISTICS_THREAD");
  return setting != nullptr && std::string_view(setting) == "0";
}

// Are statistics read on a thread of their own (SessionOptions::reads_in_background;
// docs/python.md)? GRAPHDUMP_STATISTICS_THREAD=0 or 1 says; by default, only when PyTorch's
// intra-op threads leave a CPU free: a thread beside them that takes a CPU they use stalls
// them (an OpenMP team waits for its descheduled member), which costs more than it saves.
bool StatisticsThread() {
  const char* setting = std::getenv("GRAPHDUMP_STATISTICS_THREAD");
  if (StatisticsThreadRefused()) return false;
  if (setting != nullptr && std::string_view(setting) == "1") return true;
  const unsigned cpus = std::thread::hardware_concurrency();
  return cpus > 0 && static_cast<unsigned>(at::get_num_threads()) < cpus;
}

struct EagerPauseHandle {
  std::shared_ptr<void> pause;
};

// Gives `host`'s kernels the calling Python frames as their source traces, with what the traces
// need from Python asked for now rather than in the first step that captures. REQUIRES: the GIL.
void TraceSourcesWithPython(DumpHost& host) {
  host.SetSourceTraceProvider(&PythonSourceTrace);
  PrepareSourceTraces();
}

}  // namespace

// graphdump.replay: the JSON text `graphdump replay --json` prints.
std::string Replay(const std::string& dump, const std::string& kernel,
                   const std::optional<std::string>& reference, std::optional<int64_t> iteration,
                   std::optional<uint32_t> rank, std::optional<uint32_t> call) {
  ReplayRequest request{dump, kernel, reference.value_or(""), rank, iteration, call};
  StatusOr<ReplayResult> result = [&] {
    py::gil_scoped_release release;
    return ReplayKernel(request);
  }();
  if (!result.ok()) Raise(result.status());
  return ReplayResultJson(*result);
}

void BindTorch(py::module_& m) {
  py::class_<Config, std::shared_ptr<Config>>(m, "Config",
                                              "A validated dump configuration (data_dump.json)")
      .def_property_readonly("warnings", [](const Config& c) { return c.parsed.warnings; })
      .def_property_readonly("source_file",
                             [](const Config& c) { return c.parsed.config.source_file; })
      .def_property_readonly("dump_mode", [](const Config& c) { return c.parsed.config.dump_mode; })
      .def_property_readonly("path", [](const Config& c) { return c.parsed.config.path; })
      .def(
          "off_reason",
          [](const Config& c, uint32_t rank) { return DumpOffReason(c.parsed.config, rank); },
          "Why this configuration dumps nothing on `rank`, or '' when it dumps there.");

  m.def("replay", &Replay, py::arg("dump"), py::arg("kernel"), py::arg("reference") = std::nullopt,
        py::arg("iteration") = std::nullopt, py::arg("rank") = std::nullopt,
        py::arg("call") = std::nullopt,
        "Re-executes one dumped kernel (graphdump replay); returns its JSON text.");
  m.def("load_config", &LoadConfig, py::arg("path") = std::nullopt,
        py::arg("dump_path") = std::nullopt,
        "Reads and validates a data_dump.json (path None: $GRAPHDUMP_CONFIG, else "
        "$MINDSPORE_DUMP_CONFIG; None when neither is set), its path replaced by dump_path "
        "when given (absolute, as the configuration's). Raises ConfigError listing every "
        "problem.");

  py::class_<BackwardPassHandle>(m, "BackwardPass").def("close", [](BackwardPassHandle& h) {
    h.pass.reset();
  });
  py::class_<OptimizerStepHandle>(m, "OptimizerStep");
  py::class_<AllReduceHandle>(m, "AllReduceStep");
  py::class_<CompiledInputsHandle>(m, "CompiledInputs");
  py::class_<EagerPauseHandle>(m, "EagerPause").def("close", [](EagerPauseHandle& h) {
    h.pause.reset();
  });

  py::class_<DumpHost>(m, "Host", "A dump session driven by Python (graphdump::DumpHost)")
      .def_static(
          "open",
          [](const Config& config, uint32_t rank, const std::string& model_name, bool overwrite,
             const std::string& retry_hint) -> std::pair<std::unique_ptr<DumpHost>, std::string> {
            SessionOptions options;
            options.config = config.parsed.config;
            options.rank = rank;
            options.model_name = model_name;
            options.overwrite = overwrite;
            options.retry_hint = retry_hint;
            options.reads_in_background = StatisticsThread();
            options.graph_files_in_background = true;
            // Writes between steps are reported by the eager capture, which stays on for them
            // (DumpHost::UpdateEagerActive): parameters and optimizer state the last step
            // summarised are not read again.
            options.stats_across_steps = !StatisticsThreadRefused();
            if (const char* delay = std::getenv("GRAPHDUMP_TEST_STATISTICS_DELAY_US")) {
              options.deferred_read_delay_us =
                  static_cast<uint32_t>(std::strtoul(delay, nullptr, 10));
            }
            StatusOr<std::unique_ptr<DumpSession>> session = DumpSession::Open(std::move(options));
            if (!session.ok() && session.status().code() == StatusCode::kInvalidArgument) {
              RaiseConfigError(session.status().message());
            }
            if (!session.ok() && DumpPathNotPrepared(session.status())) {
              return {std::make_unique<DumpHost>(nullptr), DumpOffWarning(session.status())};
            }
            if (!session.ok()) Raise(session.status());
            auto host = std::make_unique<DumpHost>(std::move(*session));
            TraceSourcesWithPython(*host);
            return {std::move(host), ""};
          },
          py::arg("config"), py::arg("rank"), py::arg("model_name"), py::arg("overwrite") = false,
          py::arg("retry_hint") = "",
          "Opens the dump session of `rank` (creates its directory; an existing one is an "
          "earlier run's: ConfigError, suggesting `retry_hint`, or removed first with "
          "overwrite). Returns (host, warning): a dump path that cannot be prepared gives a host "
          "that only runs modules and the warning to give once.")
      .def_static(
          "executor_only",
          [] {
            auto host = std::make_unique<DumpHost>(nullptr);
            TraceSourcesWithPython(*host);  // a precision run's kernels
            return host;
          },
          "A host that runs modules through the executor and dumps nothing.")
      .def_property_readonly("dumping",
                             [](const DumpHost& host) { return host.session() != nullptr; })
      .def(
          "register",
          [](DumpHost& host, const py::handle& module) {
            return ModelOf(host, module)->graph().graph_id;
          },
          "Compiles and registers a TorchScript module; returns its graph id.")
      .def(
          "owns",
          [](const DumpHost& host, const py::handle& module) {
            return host.FindModel(ScriptModuleOf(module)) != nullptr;
          },
          "Is this module registered?")
      .def("call", &Call, "Runs the module's forward through graphdump's executor.")
      .def(
          "add_eager_graph",
          [](DumpHost& host, const std::vector<std::pair<py::handle, std::string>>& modules,
             std::vector<std::pair<std::string, at::Tensor>> parameters,
             std::vector<std::pair<std::string, at::Tensor>> buffers) {
            std::vector<EagerModuleInfo> tree;
            for (const auto& [module, path] : modules) {
              tree.push_back({module.ptr(), path, Py_TYPE(module.ptr())->tp_name});
            }
            return host.AddEagerGraph(std::move(tree), std::move(parameters),
                                      std::move(buffers));
          },
          py::arg("modules"), py::arg("parameters"), py::arg("buffers"),
          "Registers a plain module's graph: `modules` its (module, path) pairs, itself with "
          "path ''. Returns the graph id.")
      .def(
          "enter_module",
          [](DumpHost& host, const py::handle& module) {
            return host.EnterModule(module.ptr(), Py_TYPE(module.ptr())->tp_name);
          },
          "A module call begins; False (nothing entered) for an unknown module called from "
          "outside any module.")
      .def("enter_uncaptured", &DumpHost::EnterUncaptured,
           "A module call whose operators are not captured begins.")
      .def("exit_module", &DumpHost::ExitModule, "The module call has returned or raised.")
      .def("skips_nested_module", &DumpHost::SkipsNestedModule,
           "Does a module call begun now need no enter_module (nor exit_module): inside another "
           "module's call, while the capture names no kernel?")
      .def(
          "set_eager_dump",
          [](DumpHost& host, const py::handle& module) {
            return host.SetEagerDump(module.ptr()).ok();
          },
          "dump_mode 2 marks for a module of an eager graph; False when no graph holds it.")
      .def("take_failure", &DumpHost::TakeEagerFailure,
           "The last eager kernel that raised, as 'kernel NAME (aten::op) failed at FILE:LINE', "
           "or ''.")
      .def(
          "set_precision",
          [](DumpHost& host, const std::string& precision, std::vector<std::string> keep_fp32) {
            PrecisionOptions options;
            options.dtype = precision == "fp16" ? at::kHalf : at::kBFloat16;
            options.keep_fp32 = std::move(keep_fp32);
            Status st = host.SetPrecision(options);
            if (!st.ok()) RaiseConfigError(st.message());
          },
          py::arg("precision"), py::arg("keep_fp32"),
          "A precision run ('bf16' or 'fp16') of the program's kernels from now on, keeping the "
          "kernels and parameters the entries name in float32 (docs/precision.md). ConfigError "
          "for a malformed entry.")
      .def("precision_unmatched", &DumpHost::PrecisionUnmatched,
           "A message for each --keep-fp32 entry that matched nothing so far.")
      .def("precision_module_input", &DumpHost::PrecisionModuleInput,
           "'' when a module gets the tensor as it is in the precision run, else the dtype it "
           "gets it in ('bfloat16', 'float16').")
      .def("precision_report", &DumpHost::PrecisionReport,
           "The precision run's kernels and parameters as JSON ('' when not a precision run).")
      .def(
          "pause_eager", [](DumpHost& host) { return EagerPauseHandle{host.PauseEager()}; },
          "Operators are not captured until the handle is closed.")
      .def(
          "autograd_call",
          [](DumpHost& host) { return EagerPauseHandle{host.AutogradCall()}; },
          "The program's torch.autograd.backward/grad runs until the handle is closed: what "
          "autograd runs on this thread is not eager kernels.")
      .def(
          "add_compiled_graph",
          [](DumpHost& host, const std::string& name,
             const std::vector<CompiledKernelSpec>& kernels) {
            std::vector<KernelInfo> infos;
            for (const CompiledKernelSpec& spec : kernels) infos.push_back(CompiledKernelOf(spec));
            return host.AddCompiledGraph(name, std::move(infos));
          },
          py::arg("name"), py::arg("kernels"),
          "Registers a graph torch.compile generated: its kernels in execution order as "
          "(name without op id, op type, module path, [(file, line, code)], input names, "
          "attributes). Returns the graph id.")
      .def("set_compiled_dump", &DumpHost::SetCompiledDump, py::arg("module_path"),
           "dump_mode 2's set_dump for the compiled kernels under a module path relative to "
           "the module that was compiled, in every compiled graph.")
      .def("begin_compiled_call", &DumpHost::BeginCompiledCall,
           "A call of a compiled graph begins.")
      .def(
          "step_dumps",
          [](const DumpHost& host) {
            const DumpSession* session = host.session();
            return session != nullptr && session->IterationOpen() &&
                   (session->StepDumps() || session->config().op_debug_mode == 4);
          },
          "Does the step begun last dump anything (or watch for exceptions, op_debug_mode 4)?")
      .def_property_readonly(
          "iteration_open",
          [](const DumpHost& host) {
            return host.session() != nullptr && host.session()->IterationOpen();
          },
          "Has an iteration begun and not ended (step_dumps() answers for it)?")
      .def("end_compiled_call", &DumpHost::EndCompiledCall, "The compiled graph's call ended.")
      .def("compiled_write_unseen", &DumpHost::CompiledWriteUnseen,
           "The compiled graph's call wrote a buffer outside its kernels.")
      .def(
          "before_storage_change",
          [](DumpHost& host, uintptr_t storage) {
            host.BeforeStorageChange(reinterpret_cast<const void*>(storage));
          },
          "UntypedStorage.resize_ is about to change the bytes of the storage at this address "
          "(its _cdata).")
      .def(
          "compiled_kernel_inputs",
          [](DumpHost& host, uint32_t graph_id, uint32_t index,
             const std::vector<at::Tensor>& inputs, const std::vector<uint32_t>& written,
             const std::vector<at::Tensor>& writes) -> std::optional<CompiledInputsHandle> {
            auto views = host.CompiledKernelInputs(graph_id, index, inputs, written, writes);
            if (!views) return std::nullopt;
            return CompiledInputsHandle{std::move(views)};
          },
          py::arg("graph_id"), py::arg("index"), py::arg("inputs"), py::arg("written"),
          py::arg("writes") = std::vector<at::Tensor>(),
          "Before a compiled kernel runs: its inputs when it dumps in this call (those it "
          "writes, at `written`, copied first), else None. `writes`: the buffers it writes "
          "without PyTorch's dispatcher, whose queued statistics are read first.")
      .def(
          "compiled_kernel_done",
          [](DumpHost& host, uint32_t graph_id, uint32_t index, const CompiledInputsHandle& in,
             const std::vector<at::Tensor>& outputs) {
            host.CompiledKernelDone(graph_id, index, *in.views, outputs);
          },
          "After the compiled kernel ran: dumps it with the buffers it wrote.")
      .def(
          "set_dump",
          [](DumpHost& host, const py::handle& module) {
            std::string path;
            TorchModel* model = host.FindOwner(ScriptModuleOf(module), &path);
            if (model == nullptr) return false;
            Status st = model->SetDump(path);
            if (!st.ok()) Raise(st);
            return true;
          },
          "Marks a registered module or submodule for dump_mode 2; False when no registered "
          "module holds it.")
      .def(
          "hook_backward",
          [](DumpHost& host, const std::vector<at::Tensor>& roots) {
            return BackwardPassHandle{host.HookBackward(roots)};
          },
          "Hooks the backward graph of `roots` until the handle is closed.")
      .def("in_hooked_backward", &DumpHost::InHookedBackward,
           py::call_guard<py::gil_scoped_release>(),
           "Is this thread running a node of a backward pass the host hooked (a device thread, "
           "a communication hook, a reentrant backward)?")
      .def("track_optimizers", &DumpHost::TrackOptimizers)
      .def("begin_optimizer_step",
           [](DumpHost& host, const std::string& cls, const std::vector<at::Tensor>& params,
               const std::vector<std::vector<at::Tensor>>& states,
               const std::vector<int64_t>& groups, const std::vector<std::string>& hyper,
               int64_t optimizer) {
              return OptimizerStepHandle{
                  host.BeginOptimizerStep(cls, params, states, groups, hyper, optimizer)};
            },
            py::arg("cls"), py::arg("params"), py::arg("states"),
            py::arg("groups") = std::vector<int64_t>{},
            py::arg("hyperparameters") = std::vector<std::string>{}, py::arg("optimizer") = 0)
      .def(
          "end_optimizer_step",
          [](DumpHost& host, OptimizerStepHandle& h,
             const std::vector<std::vector<at::Tensor>>& states_after, bool end_iteration) {
            host.EndOptimizerStep(*h.step, states_after, end_iteration);
          },
          py::arg("handle"), py::arg("states_after"), py::arg("end_iteration") = true)
      .def("end_open_iteration", &DumpHost::EndOpenIteration,
           "Ends the open iteration, if any.")
      .def("begin_allreduce",
           [](DumpHost& host, const std::vector<at::Tensor>& params,
              const std::vector<at::Tensor>& grads) {
             return AllReduceHandle{host.BeginAllReduce(params, grads)};
           })
      .def("end_allreduce",
           [](DumpHost& host, AllReduceHandle& h, const std::vector<at::Tensor>& reduced) {
             host.EndAllReduce(*h.step, reduced);
           })
      .def_property_readonly("iteration",
                             [](const DumpHost& host) -> std::optional<uint64_t> {
                               if (!host.session()) return std::nullopt;
                               return host.session()->CurrentIteration();
                             })
      .def_property_readonly("calls", &DumpHost::calls)
      .def_property_readonly("graphs", &DumpHost::num_models)
      .def(
          "run_failed",
          [](DumpHost& host, const std::string& reason) {
            if (host.session()) host.session()->OnRunFailed(reason);
          },
          py::arg("reason"), "The script stopped with an error: INCOMPLETE keeps `reason`.")
      .def(
          "close",
          [](DumpHost& host) {
            Status st;
            {
              py::gil_scoped_release no_gil;  // waits for the writer threads
              st = host.Close();
            }
            return st.ok() ? std::string() : st.message();
          },
          "Ends the open iteration and waits for every write; returns the first write error, "
          "or ''.")
      .def("summary", &SummaryOf);
}

}  // namespace graphdump::python
