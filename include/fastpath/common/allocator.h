// Which malloc the process runs on, as the dynamic loader resolved it. The fastpath executable
// links jemalloc (docs/architecture.md, "Memory allocator") unless it was built with
// -DFASTPATH_ALLOCATOR=system or with a sanitizer; a library that interposes malloc by
// LD_PRELOAD wins over both. The start-up log names what was resolved, so a build or a
// container that lost the allocator says so instead of quietly keeping what it frees.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace fastpath {

struct ProcessAllocator {
  // "jemalloc", "glibc", "tcmalloc", "sanitizer" (ASan's or TSan's), or the defining file's
  // name.
  std::string name;
  std::string version;  // jemalloc's and glibc's own; empty where unknown
  std::string library;  // the file that defines malloc (the executable, under clang's ASan)
};

ProcessAllocator FindProcessAllocator();

// "jemalloc 5.3.0 (libjemalloc.so.2)", "glibc 2.36 (libc.so.6)"
std::string DescribeProcessAllocator();

// The heap as jemalloc counts it, refreshed by the call (its "epoch"). `allocated` against
// `resident` tells a leak (what live objects hold keeps rising) from an allocator that keeps
// what was freed (resident rises, allocated does not).
struct HeapStatistics {
  uint64_t allocated = 0;  // bytes that live objects hold
  uint64_t active = 0;     // bytes of the pages that hold them
  uint64_t resident = 0;   // bytes the allocator has in physical memory, its metadata included
  uint64_t retained = 0;   // bytes of address space kept for reuse, not in physical memory
};
// nullopt where the process's malloc is not jemalloc, or it keeps no statistics.
std::optional<HeapStatistics> ReadHeapStatistics();

}  // namespace fastpath
