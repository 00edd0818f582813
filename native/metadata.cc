// librbd image metadata (key/value pairs in the image header).
#include <cerrno>
#include <cstring>
#include <vector>

#include "core.h"
#include "grow.h"

namespace vmsnap {
namespace {

// rbd_metadata_get -> string | null (ENOENT)
Value MetadataGet(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  std::string key = StringArg(info, 1);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_metadata_get", [img, key]() -> Outcome {
    size_t len = 256;
    std::vector<char> buf;
    int r = GrowUntilFits([&] { return rbd_metadata_get(img, key.c_str(), buf.data(), &len); },
                          Sized{buf, len});
    if (r == -ENOENT) return Ok([](Env env) { return env.Null(); });
    if (r < 0) return Fail(r, "rbd_metadata_get");
    std::string value(buf.data(), len > 0 ? strnlen(buf.data(), len) : 0);
    return Ok([value](Env env) { return Napi::String::New(env, value); });
  });
}

// rbd_metadata_set
Value MetadataSet(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  std::string key = StringArg(info, 1);
  std::string value = StringArg(info, 2);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_metadata_set", [img, key, value]() -> Outcome {
    int r = rbd_metadata_set(img, key.c_str(), value.c_str());
    return r < 0 ? Fail(r, "rbd_metadata_set") : Ok();
  });
}

// rbd_metadata_remove
Value MetadataRemove(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  std::string key = StringArg(info, 1);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_metadata_remove", [img, key]() -> Outcome {
    int r = rbd_metadata_remove(img, key.c_str());
    return r < 0 ? Fail(r, "rbd_metadata_remove") : Ok();
  });
}

// rbd_metadata_list -> {key: value}
Value MetadataList(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_metadata_list", [img]() -> Outcome {
    size_t klen = 1024, vlen = 4096;
    std::vector<char> keys, vals;
    int r = GrowUntilFits(
        [&] { return rbd_metadata_list(img, "", 0, keys.data(), &klen, vals.data(), &vlen); },
        Sized{keys, klen}, Sized{vals, vlen});
    if (r < 0) return Fail(r, "rbd_metadata_list");
    std::vector<std::pair<std::string, std::string>> out;
    size_t ki = 0, vi = 0;
    while (ki < klen && keys[ki] != '\0') {
      std::string k(&keys[ki]);
      std::string v(vi < vlen ? &vals[vi] : "");
      ki += k.size() + 1;
      vi += v.size() + 1;
      out.emplace_back(k, v);
    }
    return Ok([out](Env env) {
      Napi::Object o = Napi::Object::New(env);
      for (auto& kv : out) o.Set(kv.first, kv.second);
      return o;
    });
  });
}

}  // namespace

void RegisterMetadata(Env env, Napi::Object exports) {
  ExportAll(env, exports, {
      {"metadataGet", MetadataGet},
      {"metadataSet", MetadataSet},
      {"metadataRemove", MetadataRemove},
      {"metadataList", MetadataList},
  });
}

}  // namespace vmsnap
