#include "fastpath/common/allocator.h"

#include <gnu/libc-version.h>
#include <gtest/gtest.h>

namespace fastpath {
namespace {

// The test executables do not link jemalloc (only the fastpath executable does): their malloc
// is glibc's, or a sanitizer's. The server's own is checked by
// tests/integration/lifecycle_test.cc (AllocatorTest).
TEST(ProcessAllocatorTest, NamesTheObjectThatDefinesMalloc) {
  const ProcessAllocator a = FindProcessAllocator();
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  EXPECT_EQ(a.name, "sanitizer") << a.library;  // GCC's libasan.so or libtsan.so
#else
  EXPECT_EQ(a.name, "glibc");
  EXPECT_EQ(a.version, gnu_get_libc_version());
  EXPECT_EQ(a.library, "libc.so.6");
  EXPECT_EQ(DescribeProcessAllocator(),
            std::string("glibc ") + gnu_get_libc_version() + " (libc.so.6)");
#endif
}

}  // namespace
}  // namespace fastpath
