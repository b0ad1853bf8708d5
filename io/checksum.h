// Checksums: CRC32 (zlib's, the polynomial of gzip/PNG/zip) for checkpoint
// files, and FNV-1a 64 for hashing a config or manifest that ranks compare.
//   crc32:   reflected polynomial 0xEDB88320, init and final xor 0xFFFFFFFF;
//            crc32("123456789") = 0xCBF43926.
//   fnv1a64: h = 0xcbf29ce484222325; for each byte b: h = (h ^ b) * 0x100000001b3.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mpiasr {

uint32_t crc32_of(std::string_view bytes);
// The CRC32 of a file's contents, read in 1 MiB pieces; throws Error naming
// the file when it cannot be read.
uint32_t crc32_of_file(const std::string& path);
// Eight lower-case hex digits, as stored in state.json.
std::string crc32_hex(uint32_t crc);

uint64_t fnv1a64(std::string_view bytes);
// Sixteen lower-case hex digits.
std::string hash_hex(uint64_t hash);

}  // namespace mpiasr
