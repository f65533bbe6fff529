#include "fastpath/common/thread_name.h"

#include <pthread.h>

#include <algorithm>
#include <array>

namespace fastpath {

void NameThisThread(std::string_view name) {
  std::array<char, 16> buffer{};  // the kernel's TASK_COMM_LEN, NUL included
  const size_t n = std::min(name.size(), buffer.size() - 1);
  std::copy_n(name.data(), n, buffer.data());
  pthread_setname_np(pthread_self(), buffer.data());
}

}  // namespace fastpath
