// Minimal SHA-256 (FIPS 180-4) so checksums need no extra library.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace vmsnap {

class Sha256 {
 public:
  Sha256();
  void Update(const uint8_t* data, size_t len);
  std::string HexDigest();  // finalizes

 private:
  void Block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

}  // namespace vmsnap
