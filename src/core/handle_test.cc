#include "graphdump/handle.h"

#include <gtest/gtest.h>

#include <memory>
#include <utility>

namespace graphdump {
namespace {

// An object that counts its own references, as LibTorch's TensorImpl does.
struct Counted {
  int refs = 0;
};
void* Retain(void* ref) {
  ++static_cast<Counted*>(ref)->refs;
  return ref;
}
void Release(void* ref) { --static_cast<Counted*>(ref)->refs; }
constexpr Handle::Ops kCountedOps{&Retain, &Release};

TEST(HandleTest, CopiesTakeAndDestructionDropsTheObjectsOwnReferences) {
  Counted object;
  object.refs = 1;  // the reference the first handle adopts
  {
    Handle a(&object, &object, &kCountedOps);
    EXPECT_EQ(a.get(), &object);
    Handle b = a;
    EXPECT_EQ(object.refs, 2);
    Handle c = std::move(b);
    EXPECT_EQ(object.refs, 2);
    EXPECT_FALSE(b);  // NOLINT(bugprone-use-after-move): defined as emptied
    EXPECT_TRUE(b == nullptr);
    EXPECT_TRUE(a == c);
    b = c;
    EXPECT_EQ(object.refs, 3);
    b = nullptr;
    EXPECT_EQ(object.refs, 2);
  }
  EXPECT_EQ(object.refs, 0);
}

TEST(HandleTest, HoldsASharedPtrUntilTheLastCopyGoes) {
  auto value = std::make_shared<int>(7);
  std::weak_ptr<int> watch = value;
  Handle a = value;
  EXPECT_EQ(a.get(), value.get());
  value.reset();
  Handle b = a;
  a = Handle();
  EXPECT_FALSE(watch.expired());
  EXPECT_FALSE(a);
  b = Handle();
  EXPECT_TRUE(watch.expired());
  EXPECT_FALSE(Handle(std::shared_ptr<int>()));
}

}  // namespace
}  // namespace graphdump
