#include "fastpath/common/thread_name.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <array>
#include <string>
#include <string_view>
#include <thread>

namespace fastpath {
namespace {

std::string NameOf(pthread_t thread) {
  std::array<char, 64> name{};
  EXPECT_EQ(pthread_getname_np(thread, name.data(), name.size()), 0);
  return name.data();
}

// The name a new thread reads back after naming itself `name`.
std::string NamedOnANewThread(std::string_view name) {
  std::string inside;
  std::thread worker([&] {
    NameThisThread(name);
    inside = NameOf(pthread_self());
  });
  worker.join();
  return inside;
}

TEST(ThreadNameTest, NamesTheCallingThreadOnly) {
  const std::string before = NameOf(pthread_self());
  EXPECT_EQ(NamedOnANewThread("fp-http/0"), "fp-http/0");
  EXPECT_EQ(NameOf(pthread_self()), before);
}

TEST(ThreadNameTest, CutsALongNameAtTheKernelsFifteenBytes) {
  EXPECT_EQ(NamedOnANewThread("fp-run/0123456789abcdef"), "fp-run/01234567");
}

}  // namespace
}  // namespace fastpath
