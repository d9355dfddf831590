#include "framework/model/safetensors.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status_macros.h"
#include "framework/core/json.h"
#include "framework/model/safetensors_header.h"
#include "framework/error_text.h"

namespace speclab {
namespace {

// Sanity bound on the JSON header; real headers are well under 100 MB.
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;
// The ATen type of each dtype name of framework/model/safetensors_header.h.
struct DtypeName {
  const char* name;
  at::ScalarType type;
};
constexpr DtypeName kDtypes[] = {
    {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"I64", at::kLong}, {"I32", at::kInt},
};

at::ScalarType DtypeFromName(const std::string& name) {
  for (const DtypeName& d : kDtypes)
    if (name == d.name) return d.type;
  return at::ScalarType::Undefined;  // unreachable: the header parser refuses other names
}

const char* NameOfDtype(at::ScalarType type) {
  for (const DtypeName& d : kDtypes) {
    if (type == d.type) return d.name;
  }
  return nullptr;
}

// Closes the descriptor on every exit path.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// pread() until `size` bytes arrived: one call moves at most ~2 GB on Linux.
absl::Status ReadFully(int fd, uint64_t offset, uint64_t size, void* out, const std::string& path) {
  char* dst = static_cast<char*>(out);
  while (size > 0) {
    const ssize_t got = ::pread(fd, dst, size, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return absl::DataLossError(absl::StrCat(path, ": read failed: ", std::strerror(errno)));
    if (got == 0) return absl::DataLossError(absl::StrCat(path, ": truncated file (unexpected end of file)"));
    dst += got;
    offset += static_cast<uint64_t>(got);
    size -= static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

absl::Status WriteFully(std::FILE* file, const void* data, size_t size, const std::string& path) {
  if (size > 0 && std::fwrite(data, 1, size, file) != size) {
    return absl::DataLossError(absl::StrCat(path, ": write failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// A view into the shared read buffer (kept alive by the deleter), or a copy
// where the offset is not aligned for the element type.
at::Tensor MakeTensor(const at::Tensor& buffer, const SafetensorsEntry& e) {
  uint8_t* base = buffer.data_ptr<uint8_t>() + e.begin;
  const at::ScalarType dtype = DtypeFromName(e.dtype);
  const auto options = at::TensorOptions().dtype(dtype);
  if (reinterpret_cast<uintptr_t>(base) % c10::elementSize(dtype) == 0) {
    return at::from_blob(base, e.shape, [keep = buffer](void*) {}, options);
  }
  at::Tensor copy = at::empty(e.shape, options);
  std::memcpy(copy.data_ptr(), base, e.end - e.begin);
  return copy;
}

absl::StatusOr<std::map<std::string, at::Tensor>> ReadImpl(const std::string& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open safetensors file: ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return absl::DataLossError(absl::StrCat(path, ": cannot stat file"));
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) {
    return absl::DataLossError(absl::StrCat(path, ": truncated file (", file_size, " bytes, no header length)"));
  }
  unsigned char length_bytes[8];
  RETURN_IF_ERROR(ReadFully(fd.get(), 0, 8, length_bytes, path));
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | length_bytes[i];  // little endian
  if (header_size > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": bad header: length ", header_size, " is implausible"));
  }
  if (8 + header_size > file_size) {
    return absl::DataLossError(absl::StrCat(path, ": truncated file (header of ", header_size,
                                            " bytes does not fit in ", file_size, " bytes)"));
  }
  std::string header(header_size, '\0');
  RETURN_IF_ERROR(ReadFully(fd.get(), 8, header_size, header.data(), path));
  const uint64_t data_size = file_size - 8 - header_size;
  ASSIGN_OR_RETURN(std::vector<SafetensorsEntry> entries, ParseSafetensorsHeader(header, data_size, path));

  // The whole data region in one read: tensors are views into this buffer.
  at::Tensor buffer = at::empty({static_cast<int64_t>(data_size)}, at::TensorOptions().dtype(at::kByte));
  RETURN_IF_ERROR(ReadFully(fd.get(), 8 + header_size, data_size, buffer.data_ptr(), path));
  std::map<std::string, at::Tensor> tensors;
  for (const SafetensorsEntry& e : entries) tensors.emplace(e.name, MakeTensor(buffer, e));
  return tensors;
}

absl::Status WriteImpl(const std::string& path, const std::map<std::string, at::Tensor>& tensors) {
  std::vector<at::Tensor> cpu;
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined()) return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", name, "' is undefined"));
    const char* dtype = NameOfDtype(tensor.scalar_type());
    if (dtype == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", name, "' has unsupported dtype ",
                                                     c10::toString(tensor.scalar_type()),
                                                     " (supported: ",
                                                     absl::StrJoin(SafetensorsDtypes(), ", ",
                                                                   [](std::string* out, const SafetensorsDtype& d) {
                                                                     out->append(d.name);
                                                                   }),
                                                     ")"));
    }
    cpu.push_back(tensor.detach().to(at::kCPU).contiguous());
    const uint64_t bytes = cpu.back().numel() * cpu.back().element_size();
    absl::StrAppend(&header, ",\"", JsonEscape(name), "\":{\"dtype\":\"", dtype, "\",\"shape\":[",
                    absl::StrJoin(tensor.sizes(), ","), "],\"data_offsets\":[", offset, ",", offset + bytes, "]}");
    offset += bytes;
  }
  header += "}";
  // Pad with spaces so the data region starts 8-byte aligned, as the format recommends.
  header.append((8 - header.size() % 8) % 8, ' ');

  const std::string tmp = path + ".tmp";
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(tmp.c_str(), "wb"), &std::fclose);
  if (!file) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot create file: ", std::strerror(errno)));
  unsigned char length_bytes[8];
  uint64_t length = header.size();
  for (int i = 0; i < 8; ++i, length >>= 8) length_bytes[i] = static_cast<unsigned char>(length & 0xff);
  RETURN_IF_ERROR(WriteFully(file.get(), length_bytes, 8, path));
  RETURN_IF_ERROR(WriteFully(file.get(), header.data(), header.size(), path));
  for (const at::Tensor& t : cpu) {
    RETURN_IF_ERROR(WriteFully(file.get(), t.data_ptr(), t.numel() * t.element_size(), path));
  }
  if (std::fclose(file.release()) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": close failed: ", std::strerror(errno)));
  }
  // Rename last, so a reader never sees a half-written file under `path`.
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": rename failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::map<std::string, at::Tensor>> ReadSafetensors(const std::string& path) {
  try {
    // Tensors must be usable outside InferenceMode too (e.g. to initialise trainable parameters).
    c10::InferenceMode normal_tensors(false);
    return ReadImpl(path);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(path, ": ", ErrorText(e)));
  }
}

absl::StatusOr<CheckpointTensors> CheckpointTensors::Read(const std::string& path, std::string what) {
  CheckpointTensors out;
  ASSIGN_OR_RETURN(out.tensors_, ReadSafetensors(path));
  out.path_ = path;
  out.what_ = std::move(what);
  return out;
}

absl::StatusOr<at::Tensor> CheckpointTensors::Take(const std::string& name, const std::vector<int64_t>& shape) {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    return absl::NotFoundError(absl::StrCat(path_, ": no tensor '", name, "' (", what_, " expected)"));
  if (it->second.sizes() != at::IntArrayRef(shape))
    return absl::InvalidArgumentError(absl::StrCat(path_, ": tensor '", name, "' has shape [",
                                                   absl::StrJoin(it->second.sizes(), ", "), "], expected [",
                                                   absl::StrJoin(shape, ", "), "] (", what_, ")"));
  at::Tensor out = std::move(it->second);
  tensors_.erase(it);
  return out;
}

absl::StatusOr<at::Tensor> CheckpointTensors::Take(const std::string& name, const std::vector<int64_t>& shape,
                                                   const at::TensorOptions& options) {
  ASSIGN_OR_RETURN(at::Tensor stored, Take(name, shape));
  return stored.to(options);
}

absl::StatusOr<std::vector<int64_t>> CheckpointTensors::Shape(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    return absl::NotFoundError(absl::StrCat(path_, ": no tensor '", name, "' (", what_, " expected)"));
  return it->second.sizes().vec();
}

std::vector<std::string> CheckpointTensors::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : tensors_) names.push_back(name);
  return names;
}

absl::Status CheckpointTensors::Finish(const std::string& hint) const {
  if (tensors_.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(path_, ": tensor '", tensors_.begin()->first, "' is not part of ", what_, " (", hint, ")"));
}

absl::Status WriteSafetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors) {
  try {
    return WriteImpl(path, tensors);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(path, ": ", ErrorText(e)));
  }
}

}  // namespace speclab
