// WriteTensor end to end: files written to a temporary directory are read back with NumPy
// (the project's Python, $GRAPHDUMP_PYTHON), the way users read dumps.
#include "graphdump/internal/tensor_writer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <sstream>

#include "graphdump/npy.h"
#include "testing/fault_file_system.h"
#include "testing/testing.h"

namespace graphdump {
namespace {

using testing::RunPython;
using testing::TempDir;

// Element `i` (C order) of every test tensor has a value from a formula that the Python check
// repeats: small integers and halves, exact in every dtype.
int64_t IntValue(int64_t i) { return (i * 7) % 23 - 11; }

void StoreElement(DType dtype, int64_t i, uint8_t* dst) {
  const int64_t v = IntValue(i);
  const double f = static_cast<double>(v) * 0.5;
  auto put = [&](auto value) { std::memcpy(dst, &value, sizeof(value)); };
  switch (dtype) {
    case DType::kBool:
      return put(static_cast<uint8_t>(i % 3 == 0));
    case DType::kInt8:
      return put(static_cast<int8_t>(v));
    case DType::kInt16:
      return put(static_cast<int16_t>(v * 1000));
    case DType::kInt32:
      return put(static_cast<int32_t>(v * 100000));
    case DType::kInt64:
      return put(static_cast<int64_t>(v * 10000000000LL));
    case DType::kUInt8:
      return put(static_cast<uint8_t>(v + 11));
    case DType::kUInt16:
      return put(static_cast<uint16_t>((v + 11) * 1000));
    case DType::kUInt32:
      return put(static_cast<uint32_t>((v + 11) * 100000));
    case DType::kUInt64:
      return put(static_cast<uint64_t>((v + 11) * 10000000000LL));
    case DType::kFloat16: {
      // Halves of small integers: build the float16 bits from the float32 bits (exact here).
      const float x = static_cast<float>(f);
      uint32_t b;
      std::memcpy(&b, &x, 4);
      uint16_t h = static_cast<uint16_t>((b >> 16) & 0x8000);
      if (x != 0) {
        const int exponent = static_cast<int>((b >> 23) & 0xff) - 127 + 15;
        h |= static_cast<uint16_t>((exponent << 10) | ((b >> 13) & 0x3ff));
      }
      return put(h);
    }
    case DType::kBFloat16: {
      const float x = static_cast<float>(f);
      uint32_t b;
      std::memcpy(&b, &x, 4);
      return put(static_cast<uint16_t>(b >> 16));
    }
    case DType::kFloat32:
      return put(static_cast<float>(f));
    case DType::kFloat64:
      return put(f);
    case DType::kComplex64: {
      const float parts[2] = {static_cast<float>(f), static_cast<float>(i) * 0.25f};
      std::memcpy(dst, parts, sizeof(parts));
      return;
    }
    case DType::kComplex128: {
      const double parts[2] = {f, static_cast<double>(i) * 0.25};
      std::memcpy(dst, parts, sizeof(parts));
      return;
    }
    case DType::kInt4:
      break;  // packed: see MakeInt4
  }
}

// Python twin of StoreElement: the expected array for `n` elements of a dump dtype.
constexpr char kExpectedPython[] = R"PY(
import sys, numpy as np
def expected(dtype, n):
    i = np.arange(n, dtype=np.int64)
    v = (i * 7) % 23 - 11
    f = v * 0.5
    table = {
        'bool': lambda: i % 3 == 0, 'int8': lambda: v.astype(np.int8),
        'int16': lambda: (v * 1000).astype(np.int16), 'int32': lambda: (v * 100000).astype(np.int32),
        'int64': lambda: v * 10000000000, 'uint8': lambda: (v + 11).astype(np.uint8),
        'uint16': lambda: ((v + 11) * 1000).astype(np.uint16),
        'uint32': lambda: ((v + 11) * 100000).astype(np.uint32),
        'uint64': lambda: ((v + 11) * 10000000000).astype(np.uint64),
        'float16': lambda: f.astype(np.float16), 'bfloat16': lambda: f.astype(np.float32),
        'float32': lambda: f.astype(np.float32), 'float64': lambda: f,
        'complex64': lambda: (f + 1j * (i * 0.25)).astype(np.complex64),
        'complex128': lambda: f + 1j * (i * 0.25),
        'int4': lambda: ((i * 5) % 16 - 8).astype(np.int8),
    }
    return table[dtype]()
)PY";

// A view of `dtype` with logical `shape` and element `strides` over a fresh buffer, whose
// element i in C order has the value of StoreElement(i). `offset` elements precede the first.
struct TestTensor {
  std::vector<uint8_t> buffer;
  TensorView view;
};

TestTensor MakeTensor(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides = {},
                      int64_t offset = 0) {
  TestTensor t;
  const size_t item = DTypeBits(dtype) / 8;
  t.view.dtype = dtype;
  t.view.shape = shape;
  t.view.strides = strides;
  const int64_t count = t.view.NumElements();
  std::vector<int64_t> s = strides;
  if (s.empty()) {
    s.assign(shape.size(), 1);
    for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  }
  int64_t span = offset + 1;
  for (size_t d = 0; d < shape.size(); ++d) span += (shape[d] - 1) * s[d];
  t.buffer.assign(static_cast<size_t>(std::max<int64_t>(span, 1)) * item, 0xEE);
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t pos = offset;
    for (size_t d = 0; d < shape.size(); ++d) pos += index[d] * s[d];
    StoreElement(dtype, i, t.buffer.data() + pos * item);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  t.view.data = t.buffer.data() + offset * item;
  return t;
}

TestTensor MakeInt4(std::vector<int64_t> shape) {
  TestTensor t;
  t.view.dtype = DType::kInt4;
  t.view.shape = shape;
  const int64_t count = t.view.NumElements();
  t.buffer.assign(DTypeStorageBytes(DType::kInt4, count), 0);
  if (count % 2 == 1) t.buffer.back() = 0x70;  // junk in the unused high nibble
  for (int64_t i = 0; i < count; ++i) {
    const uint8_t nibble = static_cast<uint8_t>(((i * 5) % 16 - 8) & 0x0f);
    t.buffer[i / 2] |= (i % 2 == 0) ? nibble : static_cast<uint8_t>(nibble << 4);
  }
  t.view.data = t.buffer.data();
  return t;
}

using testing::MakeView;

std::string ShapeTuple(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (int64_t dim : shape) text += std::to_string(dim) + ",";
  return text + ")";
}

// One file to check: path, dump dtype name, expected .npy descr and shape.
struct Expectation {
  std::string path;
  DType dtype;
  std::vector<int64_t> shape;
};

// Loads every file with numpy.load and compares descr, shape and values; prints one line each.
void CheckWithNumpy(const std::vector<Expectation>& files) {
  std::ostringstream script;
  script << kExpectedPython << R"PY(
ok = 0
for line in open(sys.argv[1]).read().splitlines():
    path, dtype, descr, shape = line.split('\t')
    shape = eval(shape)
    a = np.load(path)
    n = int(np.prod(shape))
    want = expected(dtype, n).reshape(shape)
    if a.dtype.str != descr or a.shape != shape or not np.array_equal(a, want):
        print('FAIL', path, a.dtype.str, descr, a.shape, shape, a.ravel()[:8], want.ravel()[:8])
    else:
        ok += 1
print('checked', ok)
)PY";
  std::string list;
  for (const Expectation& e : files) {
    list += e.path + "\t" + std::string(DTypeName(e.dtype)) + "\t" +
            std::string(NpyDescr(e.dtype)) + "\t" + ShapeTuple(e.shape) + "\n";
  }
  TempDir dir;
  testing::WriteFile(dir.Sub("files.txt"), list);
  const testing::CommandResult result = RunPython(script.str(), {dir.Sub("files.txt")});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "checked " + std::to_string(files.size()) + "\n");
}

TEST(TensorWriterTest, EveryDTypeAndLayoutLoadsInNumpy) {
  TempDir dir;
  auto fs = NewPosixFileSystem();
  std::vector<Expectation> files;
  auto write = [&](const TestTensor& t, const std::string& name, size_t chunk_bytes) {
    const std::string path = dir.Sub(name + "." + std::string(DTypeName(t.view.dtype)) + ".npy");
    TensorWriteOptions options;
    options.chunk_bytes = chunk_bytes;
    auto result = WriteTensor(*fs, path, t.view, options);
    ASSERT_TRUE(result.ok()) << result.status().message();
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), result->file_bytes) << path;
    EXPECT_EQ(st.st_mode & 0777, 0400u) << path;
    files.push_back({path, t.view.dtype, t.view.shape.ToVector()});
  };
  for (DType dtype : kAllDTypes) {
    if (dtype == DType::kInt4) continue;
    for (size_t chunk : {size_t{64}, size_t{1} << 20}) {
      const std::string c = std::to_string(chunk);
      write(MakeTensor(dtype, {2, 3, 4}), "contiguous" + c, chunk);
      write(MakeTensor(dtype, {5}), "vector" + c, chunk);
      write(MakeTensor(dtype, {}), "scalar" + c, chunk);
      write(MakeTensor(dtype, {0, 3}), "empty" + c, chunk);
      write(MakeTensor(dtype, {4, 0}, {1, 4}), "empty_strided" + c, chunk);
      // The transpose of a 3x4 buffer, and every third column of every second row of a 6x8
      // buffer starting one element in.
      write(MakeTensor(dtype, {4, 3}, {1, 4}), "transposed" + c, chunk);
      write(MakeTensor(dtype, {3, 3}, {16, 3}, 1), "sliced" + c, chunk);
      write(MakeTensor(dtype, {2, 3, 50}, {1, 2, 6}), "permuted" + c, chunk);
      write(MakeTensor(dtype, {3, 1, 4}, {4, 99, 1}), "size1dim" + c, chunk);
      // The last two dimensions of a 2x30x40 buffer swapped (rows gathered in tiles), and a
      // transpose whose row length does not divide the piece size.
      write(MakeTensor(dtype, {2, 40, 30}, {1200, 1, 40}), "swapped" + c, chunk);
      write(MakeTensor(dtype, {37, 3}, {1, 37}), "tall_transposed" + c, chunk);
      // Tiles of 16 rows and a last one of 3 or 5, rows of 45 or 100 elements: whole 8x8
      // blocks and every kind of remainder of the vector transposes.
      write(MakeTensor(dtype, {3, 67, 45}, {3015, 1, 67}), "swapped_large" + c, chunk);
      write(MakeTensor(dtype, {37, 100}, {1, 37}), "wide_transposed" + c, chunk);
    }
  }
  for (size_t chunk : {size_t{64}, size_t{1} << 20}) {
    const std::string c = std::to_string(chunk);
    write(MakeInt4({2, 3}), "contiguous" + c, chunk);
    write(MakeInt4({5}), "odd" + c, chunk);
    write(MakeInt4({301}), "long_odd" + c, chunk);
    write(MakeInt4({}), "scalar" + c, chunk);
    write(MakeInt4({0}), "empty" + c, chunk);
  }
  CheckWithNumpy(files);
}

TEST(TensorWriterTest, BFloat16AndInt4ValuesAreWidened) {
  TempDir dir;
  auto fs = NewPosixFileSystem();
  // bfloat16 0x3fc0 = 1.5, 0xc2f7 = -123.5, 0x7f80 = inf, 0x0001 = smallest subnormal.
  const uint16_t bf16[] = {0x3fc0, 0xc2f7, 0x7f80, 0x0001};
  TensorView bview = MakeView(DType::kBFloat16, {4}, {}, bf16);
  // int4 bytes: (1, -1), (7, -8), (0, junk): values 1 -1 7 -8 0.
  const uint8_t int4[] = {0xf1, 0x87, 0xa0};
  TensorView iview = MakeView(DType::kInt4, {5}, {}, int4);
  ASSERT_TRUE(WriteTensor(*fs, dir.Sub("b.npy"), bview, {}).ok());
  ASSERT_TRUE(WriteTensor(*fs, dir.Sub("i.npy"), iview, {}).ok());
  const auto result = RunPython(R"PY(
import sys, numpy as np
b = np.load(sys.argv[1]); i = np.load(sys.argv[2])
print(b.dtype, b.tolist(), b[3] == np.float32(2.0**-133))
print(i.dtype, i.tolist())
)PY",
                                {dir.Sub("b.npy"), dir.Sub("i.npy")});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output,
            "float32 [1.5, -123.5, inf, 9.183549615799121e-41] True\n"
            "int8 [1, -1, 7, -8, 0]\n");
}

TEST(TensorWriterTest, SampleModeWritesThePrefixAndStatsCoverAll) {
  TempDir dir;
  auto fs = NewPosixFileSystem();
  TensorWriteOptions options;
  options.max_elements = 7;
  options.stats = StatsRequest{.counts = true, .md5 = true};
  const TestTensor contiguous = MakeTensor(DType::kFloat32, {4, 5});
  const TestTensor transposed = MakeTensor(DType::kFloat32, {5, 4}, {1, 5});
  const TestTensor small = MakeTensor(DType::kFloat32, {7});
  const TestTensor int4 = MakeInt4({4, 5});
  auto a = WriteTensor(*fs, dir.Sub("a.npy"), contiguous.view, options);
  auto b = WriteTensor(*fs, dir.Sub("b.npy"), transposed.view, options);
  auto c = WriteTensor(*fs, dir.Sub("c.npy"), small.view, options);
  auto d = WriteTensor(*fs, dir.Sub("d.npy"), int4.view, options);
  options.stats.reset();
  auto e = WriteTensor(*fs, dir.Sub("e.npy"), contiguous.view, options);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok() && e.ok());
  EXPECT_EQ(a->stats.count, 20u);
  EXPECT_EQ(b->stats.count, 20u);
  EXPECT_EQ(c->stats.count, 7u);
  EXPECT_EQ(d->stats.count, 20u);
  EXPECT_EQ(a->stats.md5, ComputeStats(DType::kFloat32, contiguous.buffer.data(), 20, true).md5);
  EXPECT_EQ(a->stats.md5, b->stats.md5);  // same values in C order
  EXPECT_EQ(a->stats.max, 5.5);
  CheckWithNumpy({{dir.Sub("a.npy"), DType::kFloat32, {7}},
                  {dir.Sub("b.npy"), DType::kFloat32, {7}},
                  {dir.Sub("c.npy"), DType::kFloat32, {7}},
                  {dir.Sub("d.npy"), DType::kInt4, {7}},
                  {dir.Sub("e.npy"), DType::kFloat32, {7}}});
}

// Records the pieces each file write hands to the file system: {first, second} for AppendTwo,
// {size, 0} for Append.
class RecordingFileSystem : public testing::FaultFileSystem {
 public:
  using Calls = std::vector<std::pair<size_t, size_t>>;
  RecordingFileSystem() : FaultFileSystem(NewPosixFileSystem()) {}
  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    GRAPHDUMP_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                               FaultFileSystem::NewWritableFile(path));
    calls.clear();
    return std::unique_ptr<WritableFile>(new Recorder(std::move(file), &calls));
  }
  Calls calls;  // the last file's

 private:
  class Recorder : public WritableFile {
   public:
    Recorder(std::unique_ptr<WritableFile> base, Calls* calls)
        : base_(std::move(base)), calls_(calls) {}
    Status Append(const void* data, size_t size) override {
      calls_->emplace_back(size, 0);
      return base_->Append(data, size);
    }
    Status AppendTwo(const void* first, size_t first_size, const void* second,
                     size_t second_size) override {
      calls_->emplace_back(first_size, second_size);
      return base_->AppendTwo(first, first_size, second, second_size);
    }
    Status Commit() override { return base_->Commit(); }

   private:
    std::unique_ptr<WritableFile> base_;
    Calls* calls_;
  };
};

// A tensor whose bytes are gathered (transposed) or read for statistics on the way goes to the
// file in pieces from their own memory, behind the header, without being copied again.
TEST(TensorWriterTest, LargePiecesAreNotCopiedBehindTheHeader) {
  TempDir dir;
  RecordingFileSystem fs;
  const TestTensor transposed = MakeTensor(DType::kFloat32, {256, 256}, {1, 256});  // 256 KiB
  const TestTensor contiguous = MakeTensor(DType::kFloat32, {64, 1024});
  const std::string header = NpyHeader(DType::kFloat32, {256, 256});
  ASSERT_EQ(NpyHeader(DType::kFloat32, {64, 1024}).size(), header.size());
  const size_t bytes = size_t{256} << 10;
  TensorWriteOptions options;
  ASSERT_TRUE(WriteTensor(fs, dir.Sub("t.npy"), transposed.view, options).ok());
  EXPECT_EQ(fs.calls, (RecordingFileSystem::Calls{{header.size(), bytes}}));
  options.stats = StatsRequest{};
  ASSERT_TRUE(WriteTensor(fs, dir.Sub("c.npy"), contiguous.view, options).ok());
  EXPECT_EQ(fs.calls, (RecordingFileSystem::Calls{{header.size(), bytes}}));
  options.chunk_bytes = 100 << 10;  // a gather in three pieces: 100 KiB, 100 KiB, 56 KiB
  ASSERT_TRUE(WriteTensor(fs, dir.Sub("t3.npy"), transposed.view, options).ok());
  EXPECT_EQ(fs.calls, (RecordingFileSystem::Calls{
                          {header.size(), 100 << 10}, {0, 100 << 10}, {0, 56 << 10}}));
  CheckWithNumpy({{dir.Sub("t.npy"), DType::kFloat32, {256, 256}},
                  {dir.Sub("c.npy"), DType::kFloat32, {64, 1024}},
                  {dir.Sub("t3.npy"), DType::kFloat32, {256, 256}}});
}

TEST(TensorWriterTest, StatisticOnlyWritesNoFile) {
  TempDir dir;
  auto fs = NewPosixFileSystem();
  const TestTensor t = MakeTensor(DType::kInt32, {3, 3}, {16, 3}, 1);
  TensorWriteOptions options;
  options.write_npy = false;
  options.stats = StatsRequest{};
  auto result = WriteTensor(*fs, dir.Sub("x.npy"), t.view, options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->file_bytes, 0u);
  EXPECT_EQ(result->stats.count, 9u);
  EXPECT_TRUE(testing::ListFilesRecursive(dir.path()).empty());
  // Logical values: IntValue(0..8) * 100000.
  double sum = 0, max = -1e300, min = 1e300;
  for (int i = 0; i < 9; ++i) {
    const double v = IntValue(i) * 100000.0;
    sum += v;
    max = std::max(max, v);
    min = std::min(min, v);
  }
  EXPECT_EQ(result->stats.max, max);
  EXPECT_EQ(result->stats.min, min);
  EXPECT_DOUBLE_EQ(result->stats.avg, sum / 9);
  EXPECT_TRUE(result->stats.md5.empty());
}

TEST(TensorWriterTest, RejectsMalformedViews) {
  TempDir dir;
  auto fs = NewPosixFileSystem();
  const float data[4] = {};
  TensorView bad_strides = MakeView(DType::kFloat32, {2, 2}, {1}, data);
  auto r1 = WriteTensor(*fs, dir.Sub("a.npy"), bad_strides, {});
  EXPECT_EQ(r1.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r1.status().message().find(dir.Sub("a.npy")), std::string::npos);
  TensorView null_data = MakeView(DType::kFloat32, {2}, {}, nullptr);
  EXPECT_EQ(WriteTensor(*fs, dir.Sub("b.npy"), null_data, {}).status().code(),
            StatusCode::kInvalidArgument);
  TensorView gpu = MakeView(DType::kFloat32, {2}, {}, data, "cuda:0");
  auto r3 = WriteTensor(*fs, dir.Sub("c.npy"), gpu, {});
  EXPECT_EQ(r3.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r3.status().message().find("cuda:0"), std::string::npos);
  TensorView strided_int4 = MakeView(DType::kInt4, {2, 2}, {1, 2}, data);
  EXPECT_EQ(WriteTensor(*fs, dir.Sub("d.npy"), strided_int4, {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(testing::ListFilesRecursive(dir.path()).empty());
}

TEST(TensorWriterTest, FullDiskLeavesNoPartialFileAndKeepsEarlierFiles) {
  TempDir dir;
  auto fault = std::make_shared<testing::FaultFileSystem>(NewPosixFileSystem());
  const TestTensor first = MakeTensor(DType::kFloat32, {10, 10});
  const TestTensor second = MakeTensor(DType::kFloat64, {64, 64});
  TensorWriteOptions options;
  options.chunk_bytes = 4096;
  ASSERT_TRUE(WriteTensor(*fault, dir.Sub("first.npy"), first.view, options).ok());
  const std::string before = testing::ReadFile(dir.Sub("first.npy"));
  // Room for the header and a few chunks of the second tensor, then ENOSPC.
  fault->FailAfterBytes(fault->bytes_written() + 10000);
  auto result = WriteTensor(*fault, dir.Sub("second.npy"), second.view, options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kIOError);
  EXPECT_EQ(result.status().message(), testing::NoSpaceMessage(dir.Sub("second.npy")));
  EXPECT_EQ(testing::ListFilesRecursive(dir.path()), std::vector<std::string>{"first.npy"});
  EXPECT_EQ(testing::ReadFile(dir.Sub("first.npy")), before);
  CheckWithNumpy({{dir.Sub("first.npy"), DType::kFloat32, {10, 10}}});
}

TEST(TensorWriterTest, FailingFileCreationIsReported) {
  TempDir dir;
  auto fault = std::make_shared<testing::FaultFileSystem>(NewPosixFileSystem());
  fault->FailOnFile(2);
  const TestTensor t = MakeTensor(DType::kInt8, {3});
  EXPECT_TRUE(WriteTensor(*fault, dir.Sub("a.npy"), t.view, {}).ok());
  auto failed = WriteTensor(*fault, dir.Sub("b.npy"), t.view, {});
  EXPECT_EQ(failed.status().code(), StatusCode::kIOError);
  EXPECT_NE(failed.status().message().find(dir.Sub("b.npy")), std::string::npos);
  EXPECT_TRUE(WriteTensor(*fault, dir.Sub("c.npy"), t.view, {}).ok());
  EXPECT_EQ(testing::ListFilesRecursive(dir.path()), (std::vector<std::string>{"a.npy", "c.npy"}));
}

}  // namespace
}  // namespace graphdump
