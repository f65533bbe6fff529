#include "ep_library.h"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <utility>
#include <vector>

namespace fastpath::onnxruntime {
namespace {

// Reads `size` bytes at `offset`; false when the file is shorter.
bool ReadAt(std::ifstream& file, uint64_t offset, uint64_t size, void* out) {
  file.seekg(static_cast<std::streamoff>(offset));
  file.read(static_cast<char*>(out), static_cast<std::streamsize>(size));
  return file.good();
}

struct DependencyKind {
  std::string_view prefix;
  std::string_view explanation;
};

// The libraries GPU providers need that a machine may lack, by soname prefix.
constexpr DependencyKind kDependencyKinds[] = {
    {"libcuda.so",
     "the NVIDIA driver's library: no driver is installed, or the container was started "
     "without the NVIDIA container toolkit"},
    {"libnvidia-ml.so", "the NVIDIA driver's NVML library: no driver is installed"},
    {"libcudart.so", "a CUDA runtime library: install CUDA's runtime libraries"},
    {"libcublas", "a CUDA runtime library (cuBLAS): install CUDA's runtime libraries"},
    {"libcurand.so", "a CUDA runtime library (cuRAND): install CUDA's runtime libraries"},
    {"libcufft.so", "a CUDA runtime library (cuFFT): install CUDA's runtime libraries"},
    {"libcudnn", "cuDNN: install cuDNN 9 for CUDA 13"},
    {"libnvinfer", "TensorRT: install TensorRT 10"},
    {"libnvonnxparser", "TensorRT's ONNX parser: install TensorRT 10"},
};

}  // namespace

const char* EpLibraryInterfaceName(EpLibraryInterface interface) {
  switch (interface) {
    case EpLibraryInterface::kPluginEp:
      return "plugin EP (CreateEpFactories)";
    case EpLibraryInterface::kProviderBridge:
      return "provider bridge (GetProvider)";
    case EpLibraryInterface::kNone:
      return "no ONNX Runtime provider interface";
  }
  return "unknown";
}

StatusOr<EpLibraryInterface> ReadEpLibraryInterface(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return NotFound("cannot open '" + path.string() + "'");
  const auto malformed = [&](std::string_view what) {
    std::string message = "'";  // built by appending: GCC 12 warns wrongly on "'" + string
    message.append(path.string()).append("' is not a 64-bit ELF shared library (");
    message.append(what).append(")");
    return InvalidArgument(std::move(message));
  };
  Elf64_Ehdr header{};
  file.read(reinterpret_cast<char*>(&header), sizeof(header));
  if (file.gcount() < SELFMAG || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) {
    return malformed("no ELF magic");
  }
  if (!file.good()) return malformed("too short");
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB) {
    return malformed("not 64-bit little-endian");
  }
  if (header.e_shentsize != sizeof(Elf64_Shdr) || header.e_shnum == 0) {
    return malformed("no section table");
  }
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  if (!ReadAt(file, header.e_shoff, sizeof(Elf64_Shdr) * sections.size(), sections.data())) {
    return malformed("truncated section table");
  }
  bool plugin = false;
  bool bridge = false;
  for (const Elf64_Shdr& symtab : sections) {
    if (symtab.sh_type != SHT_DYNSYM) continue;
    if (symtab.sh_link >= sections.size() || symtab.sh_entsize != sizeof(Elf64_Sym)) {
      return malformed("bad .dynsym");
    }
    const Elf64_Shdr& strtab = sections[symtab.sh_link];
    // A dynamic string table of a provider library is a few hundred kilobytes at most.
    if (strtab.sh_size > (64u << 20) || symtab.sh_size > (64u << 20)) {
      return malformed("implausibly large .dynsym");
    }
    std::vector<char> names(strtab.sh_size + 1, '\0');
    std::vector<Elf64_Sym> symbols(symtab.sh_size / sizeof(Elf64_Sym));
    if (!ReadAt(file, strtab.sh_offset, strtab.sh_size, names.data()) ||
        !ReadAt(file, symtab.sh_offset, symbols.size() * sizeof(Elf64_Sym), symbols.data())) {
      return malformed("truncated .dynsym");
    }
    for (const Elf64_Sym& symbol : symbols) {
      if (symbol.st_shndx == SHN_UNDEF || symbol.st_name >= strtab.sh_size) continue;
      if (ELF64_ST_TYPE(symbol.st_info) != STT_FUNC) continue;
      const std::string_view name(names.data() + symbol.st_name);
      plugin |= name == "CreateEpFactories";
      bridge |= name == "GetProvider";
    }
  }
  if (plugin) return EpLibraryInterface::kPluginEp;
  if (bridge) return EpLibraryInterface::kProviderBridge;
  return EpLibraryInterface::kNone;
}

std::optional<MissingDependency> FindMissingDependency(std::string_view loader_message) {
  // glibc: "<soname>: cannot open shared object file: No such file or directory", possibly
  // after ORT's own prefix ("Failed to load library X with error: ").
  constexpr std::string_view kCannotOpen = ": cannot open shared object file";
  const size_t at = loader_message.find(kCannotOpen);
  if (at == std::string_view::npos || at == 0) return std::nullopt;
  size_t start = loader_message.find_last_of(" :", at - 1);
  start = start == std::string_view::npos ? 0 : start + 1;
  MissingDependency missing;
  missing.library = std::string(loader_message.substr(start, at - start));
  if (missing.library.empty()) return std::nullopt;
  missing.explanation = "a library it depends on";
  for (const DependencyKind& kind : kDependencyKinds) {
    if (missing.library.rfind(kind.prefix, 0) == 0) {
      missing.explanation = std::string(kind.explanation);
      break;
    }
  }
  return missing;
}

}  // namespace fastpath::onnxruntime
