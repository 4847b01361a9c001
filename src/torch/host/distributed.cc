#include "graphdump/torch/distributed.h"

#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <thread>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "graphdump/session.h"
#include "host/host_kernels.h"
#include "host/tensor_views.h"

namespace graphdump {
namespace {

using torch_internal::ModuleOfParameter;
using torch_internal::Underscored;

// Test hook: GRAPHDUMP_TEST_KILL_RANK=r and GRAPHDUMP_TEST_KILL_STEP=s make rank r kill itself
// with SIGKILL in step s (0-based), after its backward kernels were dumped and before the
// all-reduce: the end-to-end tests check that the launcher reports it and that no dump file
// is left truncated.
constexpr char kTestKillRankEnv[] = "GRAPHDUMP_TEST_KILL_RANK";
constexpr char kTestKillStepEnv[] = "GRAPHDUMP_TEST_KILL_STEP";

std::string ErrorText(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    std::string text = c10_error->what_without_backtrace();
    return text.substr(0, text.find('\n'));
  }
  return e.what();
}

std::chrono::milliseconds TimeoutFromEnv(std::chrono::milliseconds fallback) {
  const char* text = std::getenv(kDistTimeoutEnv);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0)) return fallback;
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// The one use of ProcessGroupGloo: builds the gloo backend of rank `env.rank` over `store`;
// everything else talks to it through c10d::Backend. Why so little: the wheel compiles gloo
// into libtorch_cpu and ships no gloo headers, so ProcessGroupGloo.hpp includes those of
// Debian's libgloo-dev (0.0~git20220518), an older gloo than the wheel's (its
// rendezvous::Store lacks the "v2" methods the wheel's exports). Only names are shared: the
// options and the process group hold gloo objects through std::shared_ptr and unique_ptr (so
// their sizes do not depend on gloo's), and the device factories, the constructor and every
// collective are compiled in libtorch_cpu, so no gloo class layout or inline gloo code of
// those headers is compiled here (tests/torch/gloo_abi_check.sh checks that no gloo symbol is
// defined in graphdump's code and that nothing links Debian's libgloo). Throws what c10d
// throws.
c10::intrusive_ptr<c10d::Backend> ConnectGloo(const c10::intrusive_ptr<c10d::Store>& store,
                                              const RankEnvironment& env,
                                              std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  // Ranks on one machine talk over loopback; across machines, GLOO_SOCKET_IFNAME names the
  // interface, as with torch.distributed.
  const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
  if (interface != nullptr && *interface != '\0') {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
  } else if (env.master_addr == "127.0.0.1" || env.master_addr == "localhost") {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else {
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  options->threads = 2;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, static_cast<int>(env.rank),
                                                     static_cast<int>(env.world_size), options);
}

// "rank 2 of 3", "ranks 1 and 2 of 3", "processes 1, 2 and 5 of 8" (`member`: "rank").
std::string Members(const std::string& member, const std::vector<uint32_t>& ids,
                    uint32_t world_size) {
  std::string list;
  for (size_t i = 0; i < ids.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == ids.size() ? " and " : ", ") + std::to_string(ids[i]);
  }
  const std::string plural = !member.empty() && member.back() == 's' ? "es" : "s";
  return member + (ids.size() > 1 ? plural : "") + " " + list + " of " + std::to_string(world_size);
}

// "10 s", "1.5 s". (No fmt here: LibTorch's units see the fmt headers LibTorch ships.)
std::string Seconds(std::chrono::milliseconds timeout) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", static_cast<double>(timeout.count()) / 1000);
  return text;
}

// Whether something accepted a TCP connection at `host`:`port` before `deadline` (tried every
// 100 ms). The store's client retries a failed connect once more with the whole timeout (about
// twice the timeout in all): a rank that waits here first fails once, when the timeout passes.
bool WaitForListener(const std::string& host, uint16_t port,
                     std::chrono::steady_clock::time_point deadline) {
  using std::chrono::steady_clock;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  while (true) {
    addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) == 0) {
      bool accepted = false;
      for (addrinfo* a = found; a != nullptr && !accepted; a = a->ai_next) {
        const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                              a->ai_protocol);
        if (fd < 0) continue;
        int rc = connect(fd, a->ai_addr, a->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
          const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
              deadline - steady_clock::now());
          pollfd p{fd, POLLOUT, 0};
          int error = 0;
          socklen_t length = sizeof error;
          rc = poll(&p, 1, static_cast<int>(std::clamp<int64_t>(left.count(), 1, 1000))) == 1 &&
                       getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0
                   ? 0
                   : -1;
        }
        close(fd);
        accepted = rc == 0;
      }
      freeaddrinfo(found);
      if (accepted) return true;
    }
    if (steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::min<steady_clock::duration>(
        std::chrono::milliseconds(100), deadline - steady_clock::now()));
  }
}

}  // namespace

struct ProcessGroup::Impl {
  RankEnvironment env;
  std::string member = "rank";
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;  // gloo (ConnectGloo); null for a group of one

  std::string Who() const {
    return member + " " + std::to_string(env.rank) + " of " + std::to_string(env.world_size);
  }

  // Marks this rank's arrival in the store and waits until every rank's is there, until
  // `deadline`. The store's own wait for its workers names no one, and the gloo connection
  // after it waited as long again: this wait ends once, naming the ranks that never came.
  // Rank 0, which serves the store, tells the others whom it gave up on before it leaves, so
  // that they name the same ranks instead of losing the store.
  Status WaitForEveryRank(std::chrono::steady_clock::time_point deadline,
                          std::chrono::milliseconds timeout, const std::string& where) {
    using std::chrono::steady_clock;
    static const std::string kGaveUp = "graphdump/gave_up";
    auto key = [](uint32_t r) { return "graphdump/joined/" + std::to_string(r); };
    std::vector<std::string> keys;
    std::vector<uint32_t> missing;  // as last looked at, one by one
    for (uint32_t r = 0; r < env.world_size; ++r) {
      keys.push_back(key(r));
      if (r != env.rank) missing.push_back(r);
    }
    auto last_look = steady_clock::time_point();
    try {
      store->set(key(env.rank), std::vector<uint8_t>{1});
      while (true) {
        if (store->check(keys)) return Status::Ok();
        const auto now = steady_clock::now();
        if (env.rank != 0 && store->check({kGaveUp})) {
          const std::vector<uint8_t> list = store->get(kGaveUp);
          missing.clear();
          for (size_t at = 0; at + 4 <= list.size(); at += 4) {
            missing.push_back(uint32_t{list[at]} | uint32_t{list[at + 1]} << 8 |
                              uint32_t{list[at + 2]} << 16 | uint32_t{list[at + 3]} << 24);
          }
          break;
        }
        if (now - last_look >= std::chrono::seconds(1) || now >= deadline) {
          std::erase_if(missing, [&](uint32_t r) { return store->check({key(r)}); });
          last_look = now;
        }
        if (now >= deadline) {
          if (env.rank == 0 && !missing.empty()) {
            std::vector<uint8_t> list;
            for (uint32_t r : missing) {
              for (int i = 0; i < 4; ++i) list.push_back(static_cast<uint8_t>(r >> (8 * i)));
            }
            store->set(kGaveUp, list);
            std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others look
          }
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    } catch (const std::exception& e) {
      // The store went away: rank 0, which serves it, died.
      if (missing.empty() || env.rank == 0) {
        return Status::IOError(Who() + ": lost the rendezvous store at " + where + ": " +
                               ErrorText(e));
      }
    }
    if (missing.empty()) return Status::Ok();
    return Status::IOError(Who() + ": " + Members(member, missing, env.world_size) +
                           " did not join the job within " + Seconds(timeout) + " (" +
                           (missing.size() > 1 ? "they" : "it") +
                           " never reached the rendezvous store at " + where + "; " +
                           kDistTimeoutEnv + " sets the timeout)");
  }

  // Runs a collective and waits for it; exceptions become an IOError naming the rank.
  Status Run(const std::string& what,
             const std::function<c10::intrusive_ptr<c10d::Work>()>& start) {
    try {
      c10::intrusive_ptr<c10d::Work> work = start();
      work->wait();
      return Status::Ok();
    } catch (const std::exception& e) {
      return Status::IOError(Who() + ": " + what + " failed: " + ErrorText(e) +
                             " (a peer rank died or did not answer within the timeout)");
    }
  }

  // Groups tensors by dtype so that each dtype's tensors travel as one flat buffer.
  static std::map<at::ScalarType, std::vector<size_t>> ByDtype(
      const std::vector<at::Tensor>& tensors) {
    std::map<at::ScalarType, std::vector<size_t>> groups;
    for (size_t i = 0; i < tensors.size(); ++i) groups[tensors[i].scalar_type()].push_back(i);
    return groups;
  }

  Status AllReduce(std::vector<at::Tensor>& tensors, bool mean) {
    for (const at::Tensor& t : tensors) {
      if (!t.defined() || !t.device().is_cpu() || t.layout() != at::kStrided) {
        return Status::Unsupported(Who() + ": all-reduce needs defined dense CPU tensors");
      }
    }
    if (!backend) return Status::Ok();  // one rank: the sum and the mean are the tensor itself
    for (auto& [dtype, indexes] : ByDtype(tensors)) {
      std::vector<at::Tensor> flat_parts;
      for (size_t i : indexes) flat_parts.push_back(tensors[i].detach().reshape({-1}));
      std::vector<at::Tensor> buffer{at::cat(flat_parts)};
      GRAPHDUMP_RETURN_IF_ERROR(Run("all-reduce of " + std::to_string(indexes.size()) +
                                        " tensors (" + std::to_string(buffer[0].numel()) +
                                        " elements)",
                                    [&] { return backend->allreduce(buffer); }));
      if (mean) buffer[0].div_(static_cast<double>(env.world_size));
      int64_t offset = 0;
      at::NoGradGuard no_grad;
      for (size_t i : indexes) {
        at::Tensor& t = tensors[i];
        t.detach().copy_(buffer[0].narrow(0, offset, t.numel()).view(t.sizes()));
        offset += t.numel();
      }
    }
    return Status::Ok();
  }
};

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProcessGroup::~ProcessGroup() = default;

StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroup::Connect(const RankEnvironment& env,
                                                              ProcessGroupOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->env = env;
  impl->member = options.member;
  if (env.world_size <= 1) return std::unique_ptr<ProcessGroup>(new ProcessGroup(std::move(impl)));
  const std::chrono::milliseconds timeout = TimeoutFromEnv(options.timeout);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string where = env.master_addr + ":" + std::to_string(env.master_port);
  const std::string rank0_missing = " (" + Members(options.member, {0}, env.world_size) +
                                    " did not join the job within " + Seconds(timeout) +
                                    ": it serves the store, and nothing answered there)";
  if (env.rank != 0 && !WaitForListener(env.master_addr, env.master_port, deadline)) {
    return Status::IOError(impl->Who() + ": cannot reach the rendezvous store at " + where +
                           ": nothing accepted a connection there" + rank0_missing);
  }
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = env.master_port;
    store_options.isServer = env.rank == 0;
    store_options.numWorkers = env.world_size;
    store_options.waitWorkers = false;  // WaitForEveryRank waits, naming who is missing
    // What is left of the timeout for the client's connect, which retries once more after it
    // times out; the store's operations then get the whole timeout.
    store_options.timeout = std::max<std::chrono::milliseconds>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                              std::chrono::steady_clock::now()),
        std::chrono::milliseconds(1000));
    impl->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);
    impl->store->setTimeout(timeout);
  } catch (const std::exception& e) {
    return Status::IOError(impl->Who() + ": cannot " + (env.rank == 0 ? "serve" : "reach") +
                           " the rendezvous store at " + where + ": " + ErrorText(e) +
                           (env.rank == 0 ? "" : rank0_missing));
  }
  GRAPHDUMP_RETURN_IF_ERROR(impl->WaitForEveryRank(deadline, timeout, where));
  try {
    impl->backend = ConnectGloo(impl->store, env, timeout);
  } catch (const std::exception& e) {
    return Status::IOError(impl->Who() + ": cannot connect the gloo process group through " +
                           where + ": " + ErrorText(e));
  }
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(std::move(impl)));
}

uint32_t ProcessGroup::rank() const { return impl_->env.rank; }
uint32_t ProcessGroup::world_size() const { return impl_->env.world_size; }

Status ProcessGroup::AllReduceMean(std::vector<at::Tensor>& tensors) {
  return impl_->AllReduce(tensors, /*mean=*/true);
}

Status ProcessGroup::AllReduceSum(std::vector<at::Tensor>& tensors) {
  return impl_->AllReduce(tensors, /*mean=*/false);
}

Status ProcessGroup::Broadcast(std::vector<at::Tensor>& tensors, uint32_t root) {
  if (root >= impl_->env.world_size) {
    return Status::InvalidArgument(impl_->Who() + ": broadcast root " + std::to_string(root) +
                                   " is not a rank");
  }
  if (!impl_->backend) return Status::Ok();
  at::NoGradGuard no_grad;
  for (auto& [dtype, indexes] : Impl::ByDtype(tensors)) {
    std::vector<at::Tensor> flat_parts;
    for (size_t i : indexes) flat_parts.push_back(tensors[i].detach().reshape({-1}));
    std::vector<at::Tensor> buffer{at::cat(flat_parts)};
    c10d::BroadcastOptions options;
    options.rootRank = static_cast<int64_t>(root);
    GRAPHDUMP_RETURN_IF_ERROR(impl_->Run("broadcast from rank " + std::to_string(root),
                                         [&] { return impl_->backend->broadcast(buffer, options); }));
    int64_t offset = 0;
    for (size_t i : indexes) {
      at::Tensor& t = tensors[i];
      t.detach().copy_(buffer[0].narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
  return Status::Ok();
}

Status ProcessGroup::Barrier() {
  if (!impl_->backend) return Status::Ok();
  return impl_->Run("barrier", [&] { return impl_->backend->barrier(); });
}

StatusOr<std::pair<int64_t, int64_t>> ShardRows(int64_t batch, uint32_t rank, uint32_t world_size) {
  if (world_size == 0 || rank >= world_size) {
    return Status::InvalidArgument("rank " + std::to_string(rank) +
                                   " is not below the world size " + std::to_string(world_size));
  }
  if (batch % world_size != 0) {
    return Status::InvalidArgument(
        "the batch of " + std::to_string(batch) + " rows cannot be split evenly over " +
        std::to_string(world_size) +
        " ranks: use a batch size that is a multiple of the number "
        "of ranks (the mean of the ranks' gradients equals the whole batch's gradient only then)");
  }
  const int64_t per_rank = batch / world_size;
  return std::make_pair(rank * per_rank, (rank + 1) * per_rank);
}

DataParallel::DataParallel(TorchModel* model, ProcessGroup* group) : model_(model), group_(group) {}
DataParallel::~DataParallel() = default;

StatusOr<std::unique_ptr<DataParallel>> DataParallel::Create(TorchModel* model,
                                                             ProcessGroup* group) {
  if (model == nullptr || group == nullptr) {
    return Status::InvalidArgument("data parallelism needs a model and a process group");
  }
  return std::unique_ptr<DataParallel>(new DataParallel(model, group));
}

Status DataParallel::BroadcastParameters() {
  std::vector<at::Tensor> tensors;
  for (const auto& p : model_->module().named_parameters(/*recurse=*/true)) {
    tensors.push_back(p.value);
  }
  for (const auto& b : model_->module().named_buffers(/*recurse=*/true)) {
    tensors.push_back(b.value);
  }
  if (tensors.empty()) return Status::Ok();
  return group_->Broadcast(tensors, 0);
}

void DataParallel::MaybeKillForTest() {
  const char* rank = std::getenv(kTestKillRankEnv);
  const char* step = std::getenv(kTestKillStepEnv);
  if (rank == nullptr || step == nullptr) return;
  if (std::to_string(group_->rank()) == rank && std::to_string(steps_) == step) {
    std::fprintf(stderr, "graphdump: %s set: rank %s kills itself in step %s\n", kTestKillRankEnv,
                 rank, step);
    std::fflush(stderr);
    raise(SIGKILL);
  }
}

Status DataParallel::ReduceGradients(const std::vector<std::string>& names,
                                     std::vector<at::Tensor>& params) {
  MaybeKillForTest();
  ++steps_;
  if (kernels_.empty()) {
    for (const std::string& name : names) {
      kernels_.push_back(
          model_->AddHostKernel("Default/allreduce-DataParallel/" + Underscored(name), "AllReduce",
                                ModuleOfParameter(name)));
    }
  }
  // Every rank must reduce the same list: a gradient that is undefined on this rank (a
  // parameter unused in its forward) takes part as zeros.
  std::vector<at::Tensor> grads;
  for (at::Tensor& p : params) {
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
    grads.push_back(p.grad());
  }
  DumpSession* session = model_->session();
  std::vector<bool> wanted(grads.size(), false);
  std::vector<at::Tensor> local(grads.size());
  std::vector<TensorOrigin> local_origin(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    wanted[i] = session != nullptr && session->Wants(kernels_[i]);
    if (wanted[i]) {
      local[i] = grads[i].detach().clone();
      local_origin[i] = torch_internal::OriginOf(grads[i]);
    }
  }
  if (session != nullptr) {
    for (const at::Tensor& g : grads) torch_internal::BeforeWrite(*session, g);
  }
  GRAPHDUMP_RETURN_IF_ERROR(group_->AllReduceMean(grads));  // copy_ back: versions bumped
  if (session == nullptr) return Status::Ok();
  const bool logical = true;  // the session applies trans_flag
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!wanted[i]) continue;
    TensorView in, out;
    std::vector<TensorView> inputs, outputs;
    if (torch_internal::MakeViewOfCopy(local[i], grads[i], local_origin[i], logical, &in)) {
      inputs.push_back(std::move(in));
    }
    if (torch_internal::MakeView(grads[i].detach(), logical, &out)) {
      outputs.push_back(std::move(out));
    }
    session->OnKernelDone(kernels_[i], inputs, outputs);
  }
  return Status::Ok();
}

std::function<Status(const std::vector<std::string>&, std::vector<at::Tensor>&)>
DataParallel::GradientHook() {
  return [this](const std::vector<std::string>& names, std::vector<at::Tensor>& params) {
    return ReduceGradients(names, params);
  };
}

StatusOr<std::unique_ptr<DataParallelJob>> JoinDataParallel(const RankEnvironment& env,
                                                            TorchModel* model,
                                                            TrainerOptions* options,
                                                            at::Tensor* data, at::Tensor* labels,
                                                            ProcessGroupOptions group_options) {
  auto job = std::make_unique<DataParallelJob>();
  job->env = env;
  if (data->dim() == 0 || labels->dim() == 0 || data->size(0) != labels->size(0)) {
    return Status::InvalidArgument(
        "data parallelism splits the batch along its first "
        "dimension: data and labels need the same number of rows");
  }
  GRAPHDUMP_ASSIGN_OR_RETURN(auto rows, ShardRows(data->size(0), env.rank, env.world_size));
  job->first_row = rows.first;
  job->last_row = rows.second;
  *data = data->narrow(0, rows.first, rows.second - rows.first).contiguous();
  *labels = labels->narrow(0, rows.first, rows.second - rows.first).contiguous();
  GRAPHDUMP_ASSIGN_OR_RETURN(job->group, ProcessGroup::Connect(env, group_options));
  GRAPHDUMP_ASSIGN_OR_RETURN(job->data_parallel, DataParallel::Create(model, job->group.get()));
  GRAPHDUMP_RETURN_IF_ERROR(job->data_parallel->BroadcastParameters());
  options->gradient_hook = job->data_parallel->GradientHook();
  return job;
}

}  // namespace graphdump
