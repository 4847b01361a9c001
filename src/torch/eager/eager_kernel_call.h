// EagerCapture::KernelCall, one outermost operator call in flight, shared by the capture's
// callbacks (eager_capture.cc) and what a call becomes (eager_kernel.cc).
#pragma once

#include <ATen/record_function.h>

#include <string_view>
#include <vector>

#include "eager/eager_capture.h"
#include "host/tensor_views.h"

namespace graphdump::torch_internal {

// The scope prefix of a module run again by a backward pass.
inline constexpr std::string_view kRecompute = "Recompute/";

// One outermost operator call in flight, from its start callback to its end callback.
struct EagerCapture::KernelCall : at::ObserverContext {
  // Made and freed once per outermost operator call: the memory of freed calls is kept on the
  // thread for the next ones (a RecordFunction deletes its context through the base class,
  // whose virtual destructor makes these the functions that free it).
  static void* operator new(size_t size);
  static void operator delete(void* memory, size_t size) noexcept;

  EagerGraph* graph = nullptr;
  uint32_t index = 0;
  bool wants = false;
  DumpSession* session = nullptr;  // the graph's session while the capture dumps, else null
  bool discovering = false;
  int exceptions = 0;  // std::uncaught_exceptions() at the start: more at the end = it raised
  std::vector<TensorView> inputs;
  Slots input_slots;
  // Tensors the operator writes in place whose statistics must not be reused afterwards.
  std::vector<at::Tensor> unannotated_writes;
};

}  // namespace graphdump::torch_internal
