// librbd's list and get calls fill a buffer the caller sizes and fail -ERANGE when it is too
// small, writing the size they need into the same in/out size argument. GrowUntilFits is the one
// retry loop for all of them.
#pragma once
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace vmsnap {

// A buffer and its in/out element count: how many fit when the call starts, how many are needed
// after -ERANGE (the call's own meaning otherwise).
template <typename T, typename N>
struct Sized {
  std::vector<T>& buf;
  N& n;
};
template <typename T, typename N>
Sized(std::vector<T>&, N&) -> Sized<T, N>;

// Two attempts suffice unless the list grows between them (images or snapshots being created
// meanwhile); the bounds only stop a call that keeps asking for more, or for a size that is not
// a size, from looping forever or exhausting memory.
constexpr int kGrowAttempts = 8;
constexpr uint64_t kGrowMaxBytes = uint64_t{64} << 20;

template <typename T, typename N>
bool WithinGrowLimit(const Sized<T, N>& s) {
  if constexpr (std::is_signed_v<N>) {
    if (s.n < 0) return false;
  }
  return static_cast<uint64_t>(s.n) <= kGrowMaxBytes / sizeof(T);
}

// Resizes each buffer to its count and runs `call` (the librbd call on those buffers, returning
// its int result); again while it returns -ERANGE. -ERANGE when the bounds are reached.
template <typename Call, typename... T, typename... N>
int GrowUntilFits(Call call, Sized<T, N>... bufs) {
  for (int attempt = 0; attempt < kGrowAttempts; ++attempt) {
    if (!(WithinGrowLimit(bufs) && ...)) return -ERANGE;
    (bufs.buf.resize(static_cast<size_t>(bufs.n)), ...);
    int r = call();
    if (r != -ERANGE) return r;
  }
  return -ERANGE;
}

}  // namespace vmsnap
