// Data of an open image: read, write, and the SHA-256 of all of it.
#include <memory>
#include <string>
#include <vector>

#include "core.h"
#include "sha256.h"

namespace vmsnap {
namespace {

// rbd_read2 -> Buffer (short at end of image)
Value Read(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  uint64_t off = Uint64Arg(info, 1);
  uint64_t len = Uint64Arg(info, 2);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_read2", [img, off, len]() -> Outcome {
    auto buf = std::make_shared<std::vector<char>>(len);
    ssize_t n = rbd_read2(img, off, len, buf->data(), 0);
    if (n < 0) return Fail(static_cast<int>(n), "rbd_read2");
    buf->resize(static_cast<size_t>(n));
    return Ok([buf](Env env) { return Napi::Buffer<char>::Copy(env, buf->data(), buf->size()); });
  });
}

// rbd_write2 -> bytes written
Value Write(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  uint64_t off = Uint64Arg(info, 1);
  if (!info[2].IsBuffer()) throw Napi::TypeError::New(info.Env(), "argument 2 must be a Buffer");
  auto b = info[2].As<Napi::Buffer<char>>();
  auto data = std::make_shared<std::string>(b.Data(), b.Length());
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_write2", [img, off, data]() -> Outcome {
    ssize_t n = rbd_write2(img, off, data->size(), data->data(), 0);
    if (n < 0) return Fail(static_cast<int>(n), "rbd_write2");
    return Ok([n](Env env) { return Napi::Number::New(env, static_cast<double>(n)); });
  });
}

// SHA-256 of the whole image (or opened snapshot): rbd_get_size + pipelined
// rbd_aio_read of 4 MiB chunks, hashed on the addon thread.
Value Checksum(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_aio_read", [img]() -> Outcome {
    uint64_t size = 0;
    int r = rbd_get_size(img, &size);
    if (r < 0) return Fail(r, "rbd_get_size");
    constexpr uint64_t kChunk = 4 << 20;
    constexpr int kWindow = 4;
    struct Slot {
      std::vector<char> buf;
      rbd_completion_t c = nullptr;
      uint64_t len = 0;
    };
    Slot slots[kWindow];
    uint64_t next = 0;
    auto issue = [&](Slot& s) -> int {
      s.len = size - next < kChunk ? size - next : kChunk;
      s.buf.resize(s.len);
      int r = rbd_aio_create_completion(nullptr, nullptr, &s.c);
      if (r < 0) return r;
      r = rbd_aio_read(img, next, s.len, s.buf.data(), s.c);
      if (r < 0) {
        rbd_aio_release(s.c);
        s.c = nullptr;
        return r;
      }
      next += s.len;
      return 0;
    };
    Sha256 sha;
    int err = 0;
    for (int i = 0; i < kWindow && next < size && err == 0; ++i) err = issue(slots[i]);
    for (int i = 0; ; i = (i + 1) % kWindow) {
      Slot& s = slots[i];
      if (s.c == nullptr) break;  // slots complete in issue order
      rbd_aio_wait_for_complete(s.c);
      ssize_t n = rbd_aio_get_return_value(s.c);
      rbd_aio_release(s.c);
      s.c = nullptr;
      if (n < 0 && err == 0) err = static_cast<int>(n);
      if (err == 0) {
        sha.Update(reinterpret_cast<const uint8_t*>(s.buf.data()), s.len);
        if (next < size) err = issue(s);
      }
      if (err != 0) {
        // drain the remaining reads before returning
        for (Slot& o : slots) {
          if (o.c != nullptr) {
            rbd_aio_wait_for_complete(o.c);
            rbd_aio_release(o.c);
            o.c = nullptr;
          }
        }
        break;
      }
    }
    if (err < 0) return Fail(err, "rbd_aio_read");
    std::string hex = sha.HexDigest();
    return Ok([hex](Env env) { return Napi::String::New(env, hex); });
  });
}

}  // namespace

void RegisterIo(Env env, Napi::Object exports) {
  ExportAll(env, exports, {
      {"read", Read},
      {"write", Write},
      {"checksum", Checksum},
  });
}

}  // namespace vmsnap
