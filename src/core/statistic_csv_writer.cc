// statistic.csv header and rows (docs/file-format.md), in MindSpore's CsvWriter style: every data
// field is written as "value," so rows end with a comma; the header has none.
#include <string>

#include "graphdump/config.h"
#include "graphdump/stats.h"
#include "graphdump/tensor_view.h"

namespace graphdump {
namespace {

constexpr char kFixedColumns[] =
    "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape";

std::string CategoryValue(StatCategory category, const NanPropagatingStats& stats) {
  switch (category) {
    case StatCategory::kMax:
      return FormatStatValue(stats.max);
    case StatCategory::kMin:
      return FormatStatValue(stats.min);
    case StatCategory::kAvg:
      return FormatStatValue(stats.avg);
    case StatCategory::kCount:
      return std::to_string(stats.count);
    case StatCategory::kNegativeZeroCount:
      return std::to_string(stats.negative_count);
    case StatCategory::kPositiveZeroCount:
      return std::to_string(stats.positive_count);
    case StatCategory::kNanCount:
      return std::to_string(stats.nan_count);
    case StatCategory::kNegativeInfCount:
      return std::to_string(stats.negative_inf_count);
    case StatCategory::kPositiveInfCount:
      return std::to_string(stats.positive_inf_count);
    case StatCategory::kZeroCount:
      return std::to_string(stats.zero_count);
    case StatCategory::kMd5:
      return stats.md5;
    case StatCategory::kL2Norm:
      return FormatStatValue(stats.l2norm);
  }
  return std::string();
}

void AddField(std::string_view field, std::string* row) {
  row->append(field);
  row->push_back(',');
}

}  // namespace

std::string StatisticCsvHeader(const std::vector<StatCategory>& categories) {
  std::string header = kFixedColumns;
  for (StatCategory category : categories) {
    header.push_back(',');
    header += StatCategoryColumn(category);
  }
  header.push_back('\n');
  return header;
}

std::string StatisticCsvRow(const StatRowInfo& info, const NanPropagatingStats& stats,
                            const std::vector<StatCategory>& categories) {
  std::string row;
  AddField(info.op_type, &row);
  AddField(info.op_name, &row);
  AddField(std::to_string(info.task_id), &row);
  AddField(std::to_string(info.stream_id), &row);
  AddField(std::to_string(info.timestamp), &row);
  AddField(info.is_input ? "input" : "output", &row);
  AddField(std::to_string(info.slot), &row);
  AddField(std::to_string(info.data_size), &row);
  AddField(DTypeName(info.dtype), &row);
  AddField("\"" + ShapeToString(info.shape) + "\"", &row);
  for (StatCategory category : categories) AddField(CategoryValue(category, stats), &row);
  row.push_back('\n');
  return row;
}

}  // namespace graphdump
