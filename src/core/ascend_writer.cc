#include "graphdump/internal/ascend_writer.h"

#include <memory>

#include "dump_data.pb.h"

namespace graphdump {
namespace {

namespace dd = toolkit::dumpdata;

// OutputDataType values, kept in step with the reader's table (proto/dump_data.proto).
dd::OutputDataType ToDataType(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return dd::DT_BOOL;
    case DType::kInt8:
      return dd::DT_INT8;
    case DType::kInt16:
      return dd::DT_INT16;
    case DType::kInt32:
      return dd::DT_INT32;
    case DType::kInt64:
      return dd::DT_INT64;
    case DType::kUInt8:
      return dd::DT_UINT8;
    case DType::kUInt16:
      return dd::DT_UINT16;
    case DType::kUInt32:
      return dd::DT_UINT32;
    case DType::kUInt64:
      return dd::DT_UINT64;
    case DType::kFloat16:
      return dd::DT_FLOAT16;
    case DType::kBFloat16:
      return dd::DT_BF16;
    case DType::kFloat32:
      return dd::DT_FLOAT;
    case DType::kFloat64:
      return dd::DT_DOUBLE;
    case DType::kComplex64:
      return dd::DT_COMPLEX64;
    case DType::kComplex128:
      return dd::DT_COMPLEX128;
    case DType::kInt4:
      return dd::DT_INT4;
  }
  return dd::DT_UNDEFINED;
}

template <typename Msg>
void Describe(const TensorView& t, Msg* msg) {
  msg->set_data_type(ToDataType(t.dtype));
  msg->set_format(t.shape.size() == 4 ? dd::FORMAT_NCHW : dd::FORMAT_ND);
  for (int64_t d : t.shape) {
    msg->mutable_shape()->add_dim(static_cast<uint64_t>(d));
    msg->mutable_original_shape()->add_dim(static_cast<uint64_t>(d));
  }
  msg->set_size(t.ContiguousBytes());
}

// Describes `views` with `add` (add_input or add_output), keeping each view's slot: an absent
// slot gets an UNDEFINED placeholder without bytes, which convert skips.
template <typename Add>
void DescribeAll(const std::vector<TensorView>& views, Add add) {
  int32_t next = 0;
  for (const TensorView& t : views) {
    for (; t.slot > next; ++next) add()->set_data_type(dd::DT_UNDEFINED);
    Describe(t, add());
    ++next;
  }
}

Status AppendTensor(WritableFile& file, const TensorView& t) {
  Status status;
  ForEachContiguousChunk(t, size_t{4} << 20, [&](const uint8_t* bytes, size_t n) {
    if (status.ok()) status = file.Append(bytes, n);
  });
  return status;
}

}  // namespace

StatusOr<uint64_t> WriteAscendDumpFile(FileSystem& fs, const std::string& path,
                                       const std::string& op_name, uint64_t dump_time,
                                       const std::vector<TensorView>& inputs,
                                       const std::vector<TensorView>& outputs) {
  dd::DumpData msg;
  msg.set_version("2.0");
  msg.set_dump_time(dump_time);
  msg.set_op_name(op_name);
  DescribeAll(inputs, [&] { return msg.add_input(); });
  DescribeAll(outputs, [&] { return msg.add_output(); });
  const std::string header = msg.SerializeAsString();
  char length[8];
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((n >> (8 * i)) & 0xff);

  GRAPHDUMP_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, fs.NewWritableFile(path));
  GRAPHDUMP_RETURN_IF_ERROR(file->Append(length, sizeof(length)));
  GRAPHDUMP_RETURN_IF_ERROR(file->Append(header.data(), header.size()));
  for (const TensorView& t : inputs) GRAPHDUMP_RETURN_IF_ERROR(AppendTensor(*file, t));
  for (const TensorView& t : outputs) GRAPHDUMP_RETURN_IF_ERROR(AppendTensor(*file, t));
  GRAPHDUMP_RETURN_IF_ERROR(file->Commit());
  uint64_t bytes = sizeof(length) + header.size();
  for (const auto& t : msg.input()) bytes += t.size();
  for (const auto& t : msg.output()) bytes += t.size();
  return bytes;
}

}  // namespace graphdump
