#include "fastpath/common/thread_name.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <array>
#include <string>
#include <thread>

namespace fastpath {
namespace {

std::string NameOf(pthread_t thread) {
  std::array<char, 64> name{};
  EXPECT_EQ(pthread_getname_np(thread, name.data(), name.size()), 0);
  return name.data();
}

TEST(ThreadNameTest, NamesTheCallingThreadOnly) {
  const std::string before = NameOf(pthread_self());
  std::string inside;
  std::thread worker([&] {
    NameThisThread("fp-http/0");
    inside = NameOf(pthread_self());
  });
  worker.join();
  EXPECT_EQ(inside, "fp-http/0");
  EXPECT_EQ(NameOf(pthread_self()), before);
}

TEST(ThreadNameTest, CutsALongNameAtTheKernelsFifteenBytes) {
  std::string inside;
  std::thread worker([&] {
    NameThisThread("fp-run/0123456789abcdef");
    inside = NameOf(pthread_self());
  });
  worker.join();
  EXPECT_EQ(inside, "fp-run/01234567");
}

}  // namespace
}  // namespace fastpath
