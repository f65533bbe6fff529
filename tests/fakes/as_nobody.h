// For tests of what a user other than root meets (file permissions, RLIMIT_NPROC: neither
// binds root): their body runs in a death test's child that becomes user nobody.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fastpath::testing {

constexpr uid_t kNobody = 65534;

// Whether a child can run as nobody: this process is not root, or root may change its user
// (not so in a user namespace that maps no other user). Tests skip where it cannot.
inline bool CanRunAsNobody() {
  if (geteuid() != 0) return true;
  const pid_t pid = fork();
  if (pid == 0) std::_Exit(setgid(kNobody) == 0 && setuid(kNobody) == 0 ? 0 : 1);
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

// Whether nobody may run the program at `path` (every folder above it may be entered).
inline bool NobodyCanExecute(const char* path) {
  if (!CanRunAsNobody()) return false;
  const pid_t pid = fork();
  if (pid == 0) {
    if (geteuid() == 0 && (setgid(kNobody) != 0 || setuid(kNobody) != 0)) std::_Exit(1);
    std::_Exit(access(path, X_OK) == 0 ? 0 : 1);
  }
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

// In the child: becomes nobody when root; exits 3, saying why, when it cannot.
inline void BecomeNobody() {
  if (geteuid() == 0 && (setgid(kNobody) != 0 || setuid(kNobody) != 0)) {
    std::fprintf(stderr, "cannot become user %d: %s\n", static_cast<int>(kNobody),
                 std::strerror(errno));
    std::_Exit(3);
  }
}

}  // namespace fastpath::testing
