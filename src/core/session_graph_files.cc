// The graph files of a DumpSession (docs/layout.md): graphs/ms_output_trace_code_graph_{id}.ir
// and .pb and execution_order/ms_execution_order_graph_{id}.csv, written again whenever a step
// found new kernels. Made and written on a thread of their own from a copy of the graph: the
// text of a few hundred kernels takes the training thread a millisecond or two, in the very
// steps (the first that captures) that already cost the most.
#include "graphdump/graph_files.h"
#include "graphdump/layout.h"
#include "session_impl.h"

namespace graphdump::session_internal {

class SessionImpl::GraphFiles final : public OrderedWorker::Task {
 public:
  GraphFiles(SessionImpl* session, GraphInfo graph, GraphState::WrittenFiles* written)
      : session_(session), graph_(std::move(graph)), written_(written) {}
  void Run() override {
    session_->WriteGraphFilesNow(graph_, *written_);
    graph_ = GraphInfo();  // freed here, by the thread that is done with it
  }

 private:
  SessionImpl* const session_;
  GraphInfo graph_;
  GraphState::WrittenFiles* const written_;  // only graph_files_'s tasks touch it
};

void SessionImpl::WriteGraphFiles(GraphState& state) {
  state.files_dirty = false;
  if (failed_ || InChild()) return;
  if (!graph_dirs_made_) {
    // Made here, before the first step appends to its global execution order file.
    Status st = fs_->CreateDirectories(root_ + "/graphs");
    if (st.ok()) st = fs_->CreateDirectories(root_ + "/execution_order");
    if (!st.ok()) return Fail(st);
    graph_dirs_made_ = true;
  }
  if (!graph_files_) return WriteGraphFilesNow(state.info, state.written);
  // What a task holds is about what its kernels' text takes.
  const size_t bytes = 1024 * (state.info.kernels.size() + 1) + state.info.ir_text.size();
  graph_files_->Submit(std::make_unique<GraphFiles>(this, state.info, &state.written), bytes);
}

void SessionImpl::WriteGraphFilesNow(const GraphInfo& g, GraphState::WrittenFiles& written) {
  if (failed_) return;
  Status st;
  auto write = [&](size_t slot, const std::string& path, std::string text) {
    if (!st.ok() || written[slot] == text) return;
    st = fs_->WriteWholeFile(path, text);
    if (st.ok()) written[slot] = std::move(text);
  };
  write(0, GraphFilePath(root_, g.graph_id, "ir"),
        g.ir_text.empty() ? GenerateIrText(g) : g.ir_text);
  write(1, GraphFilePath(root_, g.graph_id, "pb"), SerializeGraphProto(g));
  write(2, ExecutionOrderPath(root_, g.graph_id), ExecutionOrderCsv(g));
  if (!st.ok()) Fail(st);
}

void SessionImpl::FinishGraphFiles() {
  if (graph_files_ && !InChild()) graph_files_->Wait();
}

}  // namespace graphdump::session_internal
