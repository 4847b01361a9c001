// ConfigToJson: the effective configuration as data_dump.json text, every default filled in
// (graphdump check-config; docs/configuration.md).
#include <string>

#include "graphdump/config.h"
#include "graphdump/internal/config_parser.h"
#include "graphdump/internal/json_text.h"
#include "graphdump/statistic_catalogue.h"

namespace graphdump {

std::string ConfigToJson(const DumpConfig& config) {
  using internal::Json;
  using internal::kCommon;
  using internal::kE2e;
  Json common;
  common["dump_mode"] = config.dump_mode;
  common["path"] = config.path;
  common["net_name"] = config.net_name;
  common["iteration"] = config.iteration.ToString();
  common["saved_data"] = config.saved_data == SavedData::kTensor      ? "tensor"
                         : config.saved_data == SavedData::kStatistic ? "statistic"
                                                                      : "full";
  common["input_output"] = static_cast<uint32_t>(config.input_output);
  common["kernels"] = Json::array();
  for (const KernelPattern& entry : config.kernels) common["kernels"].push_back(entry.text);
  common["support_device"] = config.support_device;
  common["statistic_category"] = Json::array();
  for (StatCategory category : config.statistic_category) {
    common["statistic_category"].push_back(StatCategoryName(category));
  }
  common["op_debug_mode"] = config.op_debug_mode;
  common["overflow_number"] = config.overflow_number;
  common["initial_iteration"] = config.initial_iteration;
  common["file_format"] = config.file_format;
  Json e2e;
  e2e["enable"] = config.enable;
  e2e["trans_flag"] = config.trans_flag;
  e2e["stat_calc_mode"] = config.stat_calc_mode;
  e2e["device_stat_precision_mode"] = config.device_stat_precision_mode;
  e2e["sample_mode"] = config.sample_mode;
  e2e["sample_num"] = config.sample_num;
  e2e["save_kernel_args"] = config.save_kernel_args;
  Json root;
  root[kCommon] = std::move(common);
  root[kE2e] = std::move(e2e);
  return internal::JsonText(root, 4) + "\n";
}

}  // namespace graphdump
