// statistic.csv header and rows (docs/file-format.md), in MindSpore's CsvWriter style: every data
// field is written as "value," so rows end with a comma; the header has none.
#include <string>

#include "graphdump/statistic_catalogue.h"
#include "graphdump/stats.h"
#include "graphdump/tensor_view.h"

namespace graphdump {
namespace {

constexpr char kFixedColumns[] =
    "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape";

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
  for (StatCategory category : categories) {
    AddField(StatisticText(StatisticOf(category), stats), &row);
  }
  row.push_back('\n');
  return row;
}

}  // namespace graphdump
