// Helpers shared by graphdump-torch's commands (torch_cli.cc defines them): inputs from
// .npy files or shapes, outputs as .npy, and errors as exit codes.
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <string>
#include <vector>

#include "graphdump/status.h"

namespace graphdump::tools {

// The exit code for a failed Status: 2 (usage) for InvalidArgument, NotFound and Corrupt, else 3.
int ExitFor(const Status& status);

// Prints "COMMAND: error: MESSAGE" on stderr and returns ExitFor(status).
int Fail(const std::string& command, const Status& status);

// Reads a .npy file (numpy.save, C order) into a tensor. Errors name the file and what is wrong
// with it: NotFound when it cannot be opened, InvalidArgument for a dtype or order a model cannot
// take, Corrupt for a truncated file.
StatusOr<at::Tensor> ReadNpy(const std::string& path);

// Writes `tensor` as .npy at `path`, whole or not at all; bfloat16 is written as float32.
Status WriteNpyFile(const std::string& path, const at::Tensor& tensor);

// "2x3x224x224" -> {2, 3, 224, 224}; InvalidArgument naming --input-shape otherwise.
StatusOr<std::vector<int64_t>> ParseShape(const std::string& text);

}  // namespace graphdump::tools
