// CRC32 through zlib (fast, table/braided), FNV-1a 64 by its definition.
#include "io/checksum.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "src/base/error.h"
#include "src/base/file.h"

namespace mpiasr {

namespace {
uint32_t crc32_update(uint32_t crc, const char* data, size_t size) {
  uLong value = crc;
  while (size > 0) {
    uInt piece = static_cast<uInt>(std::min<size_t>(size, std::numeric_limits<uInt>::max()));
    value = ::crc32(value, reinterpret_cast<const Bytef*>(data), piece);
    data += piece;
    size -= piece;
  }
  return static_cast<uint32_t>(value);
}
}  // namespace

uint32_t crc32_of(std::string_view bytes) {
  return crc32_update(static_cast<uint32_t>(::crc32(0, nullptr, 0)), bytes.data(), bytes.size());
}

uint32_t crc32_of_file(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file)
    MPIASR_FAIL(ExitCode::kCheckpoint, "cannot open " << path << ": " << file_error_text(errno));
  std::vector<char> buffer(1 << 20);
  uint32_t crc = static_cast<uint32_t>(::crc32(0, nullptr, 0));
  size_t got;
  while ((got = std::fread(buffer.data(), 1, buffer.size(), file.get())) > 0) {
    crc = crc32_update(crc, buffer.data(), got);
  }
  if (std::ferror(file.get())) {
    MPIASR_FAIL(ExitCode::kCheckpoint, "cannot read " << path << ": " << file_error_text(errno));
  }
  return crc;
}

std::string crc32_hex(uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char byte : bytes) {
    hash ^= byte;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::string hash_hex(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

}  // namespace mpiasr
