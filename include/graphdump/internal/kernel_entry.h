// Internal: the `kernels` entry grammar of docs/configuration.md, shared by the config parser and
// the selector. Not part of the public API.
#pragma once

#include <string>

#include "graphdump/config.h"
#include "graphdump/status.h"

namespace graphdump::internal {

inline constexpr char kRegexPrefix[] = "name-regex(";

// Removes every '"' and ' ' from `raw`, as MindSpore does before classifying an entry.
std::string NormalizeKernelEntry(const std::string& raw);

// Classifies a normalized, non-empty entry: "name-regex(RE)" is a regex (RE is compiled with RE2
// to validate it), text containing '/' or "-op" is a full name, anything else is an op type
// (lower-cased). Returns InvalidArgument with a message (no key path) when the regex is invalid
// or the entry starts with "name-regex(" without ending in ')'.
StatusOr<KernelPattern> ClassifyKernelEntry(const std::string& normalized);

// ASCII lower-case copy of `text`.
std::string AsciiLower(const std::string& text);

// Does an op-type entry (`pattern` lower-cased) match the kernel named `full_name`? True when
// `pattern` is a substring of the lower-cased last name segment without its "-op{N}" suffix.
bool OpTypeEntryMatches(const std::string& pattern, const std::string& full_name);

}  // namespace graphdump::internal
