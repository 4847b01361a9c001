// The torch headers nearly every torch translation unit includes, precompiled once for all of
// them (src/torch/CMakeLists.txt, graphdump_torch_unit): parsing them took about 20 s of the
// 35 s a unit took to compile; with this header, 17 s.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/script.h>
