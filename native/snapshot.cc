// librbd image snapshots: list, exists, create/remove, protect/unprotect.
#include <vector>

#include "core.h"
#include "grow.h"

namespace vmsnap {
namespace {

const char* SnapNamespaceName(rbd_snap_namespace_type_t t) {
  switch (t) {
    case RBD_SNAP_NAMESPACE_TYPE_USER: return "user";
    case RBD_SNAP_NAMESPACE_TYPE_GROUP: return "group";
    case RBD_SNAP_NAMESPACE_TYPE_TRASH: return "trash";
    case RBD_SNAP_NAMESPACE_TYPE_MIRROR: return "mirror";
  }
  return "unknown";
}

struct SnapEntry {
  uint64_t id;
  uint64_t size;
  std::string name;
  const char* ns;
};

// rbd_snap_list (+ rbd_snap_get_namespace_type per snapshot)
Value SnapList(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_snap_list", [img]() -> Outcome {
    int max = 16;
    std::vector<rbd_snap_info_t> snaps;
    int n =
        GrowUntilFits([&] { return rbd_snap_list(img, snaps.data(), &max); }, Sized{snaps, max});
    if (n < 0) return Fail(n, "rbd_snap_list");
    std::vector<SnapEntry> out;
    for (int i = 0; i < n; ++i) {
      rbd_snap_namespace_type_t t = RBD_SNAP_NAMESPACE_TYPE_USER;
      rbd_snap_get_namespace_type(img, snaps[i].id, &t);
      out.push_back({snaps[i].id, snaps[i].size, snaps[i].name, SnapNamespaceName(t)});
    }
    rbd_snap_list_end(snaps.data());
    return Ok([out](Env env) {
      Napi::Array a = Napi::Array::New(env, out.size());
      for (size_t i = 0; i < out.size(); ++i) {
        Napi::Object o = Napi::Object::New(env);
        o.Set("id", static_cast<double>(out[i].id));
        o.Set("name", out[i].name);
        o.Set("size", static_cast<double>(out[i].size));
        o.Set("namespace", out[i].ns);
        a.Set(i, o);
      }
      return a;
    });
  });
}

// rbd_snap_exists
Value SnapExists(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  std::string name = StringArg(info, 1);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_snap_exists", [img, name]() -> Outcome {
    bool exists = false;
    int r = rbd_snap_exists(img, name.c_str(), &exists);
    if (r < 0) return Fail(r, "rbd_snap_exists");
    return Ok([exists](Env env) { return Napi::Boolean::New(env, exists); });
  });
}

// One-argument snapshot calls returning 0 or -errno.
using SnapFn = int (*)(rbd_image_t, const char*);

Value SnapCall(const CallbackInfo& info, SnapFn fn, const char* call) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  std::string name = StringArg(info, 1);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), call, [img, name, fn, call]() -> Outcome {
    int r = fn(img, name.c_str());
    return r < 0 ? Fail(r, call) : Ok();
  });
}

Value SnapCreate(const CallbackInfo& info) { return SnapCall(info, rbd_snap_create, "rbd_snap_create"); }
Value SnapRemove(const CallbackInfo& info) { return SnapCall(info, rbd_snap_remove, "rbd_snap_remove"); }
Value SnapProtect(const CallbackInfo& info) { return SnapCall(info, rbd_snap_protect, "rbd_snap_protect"); }
Value SnapUnprotect(const CallbackInfo& info) {
  return SnapCall(info, rbd_snap_unprotect, "rbd_snap_unprotect");
}

// rbd_snap_is_protected
Value SnapIsProtected(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  std::string name = StringArg(info, 1);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_snap_is_protected", [img, name]() -> Outcome {
    int is = 0;
    int r = rbd_snap_is_protected(img, name.c_str(), &is);
    if (r < 0) return Fail(r, "rbd_snap_is_protected");
    return Ok([is](Env env) { return Napi::Boolean::New(env, is != 0); });
  });
}

}  // namespace

void RegisterSnapshot(Env env, Napi::Object exports) {
  ExportAll(env, exports, {
      {"snapList", SnapList},
      {"snapExists", SnapExists},
      {"snapCreate", SnapCreate},
      {"snapRemove", SnapRemove},
      {"snapProtect", SnapProtect},
      {"snapUnprotect", SnapUnprotect},
      {"snapIsProtected", SnapIsProtected},
  });
}

}  // namespace vmsnap
