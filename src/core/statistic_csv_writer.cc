// statistic.csv header and rows (docs/file-format.md), in MindSpore's CsvWriter style: every data
// field is written as "value," so rows end with a comma; the header has none.
#include <charconv>
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
  // One allocation: the fixed fields, the shape's digits and each statistic's text.
  row.reserve(info.op_type.size() + info.op_name.size() + 96 + 12 * info.shape.size() +
              40 * categories.size());
  AppendStatisticCsvRow(info, stats, categories, &row);
  return row;
}

void AppendStatisticCsvRow(const StatRowInfo& info, const NanPropagatingStats& stats,
                           const std::vector<StatCategory>& categories, std::string* row) {
  // Appended in place, numbers included (to_chars writes what to_string does): a statistic
  // dump writes a row for every tensor of every kernel.
  char number[24];
  auto add_number = [&](uint64_t value) {
    AddField(std::string_view(number, std::to_chars(number, number + sizeof number, value).ptr -
                                          number),
             row);
  };
  AddField(info.op_type, row);
  AddField(info.op_name, row);
  add_number(info.task_id);
  add_number(info.stream_id);
  add_number(info.timestamp);
  AddField(info.is_input ? "input" : "output", row);
  add_number(info.slot);
  add_number(info.data_size);
  AddField(DTypeName(info.dtype), row);
  row->push_back('"');  // "\"(2,3)\"": ShapeToString's text, quoted
  AppendShape(info.shape, row);
  row->append("\",");
  for (StatCategory category : categories) {
    AddField(StatisticText(StatisticOf(category), stats), row);
  }
  row->push_back('\n');
}

}  // namespace graphdump
