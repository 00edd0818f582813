// librbd groups: create/remove, image membership, group snapshots.
//
// Ceph 16.2.15 cannot clone, export or open a group snapshot by name: the
// per-image snapshots it creates live in the "group" snapshot namespace and
// rbd_clone3 only looks up user-namespace names. vmsnap therefore takes one
// user snapshot per image inside a single guest freeze (see src/ceph/group.ts).
#include <cerrno>
#include <vector>

#include "core.h"
#include "grow.h"

namespace vmsnap {
namespace {

// Group calls taking (ioctx, name) and returning 0 or -errno.
using GroupFn = int (*)(rados_ioctx_t, const char*);

Value GroupCall(const CallbackInfo& info, GroupFn fn, const char* call) {
  Handle* h = Handle::Arg(info, 0, Kind::IoCtx);
  std::string name = StringArg(info, 1);
  rados_ioctx_t io = h->io;
  return h->Use(info.Env(), call, [io, name, fn, call]() -> Outcome {
    int r = fn(io, name.c_str());
    return r < 0 ? Fail(r, call) : Ok();
  });
}

Value GroupCreate(const CallbackInfo& info) { return GroupCall(info, rbd_group_create, "rbd_group_create"); }
Value GroupRemove(const CallbackInfo& info) { return GroupCall(info, rbd_group_remove, "rbd_group_remove"); }

// rbd_group_image_add / rbd_group_image_remove(groupIo, group, imageIo, image)
using GroupImageFn = int (*)(rados_ioctx_t, const char*, rados_ioctx_t, const char*);

Value GroupImageCall(const CallbackInfo& info, GroupImageFn fn, const char* call) {
  Handle* gh = Handle::Arg(info, 0, Kind::IoCtx);
  std::string group = StringArg(info, 1);
  Handle* ih = Handle::Arg(info, 2, Kind::IoCtx);
  std::string image = StringArg(info, 3);
  rados_ioctx_t gio = gh->io, iio = ih->io;
  if (!gh->IsOpen() || !ih->Pin()) return Rejected(info.Env(), -EBADF, call);
  return gh->Use(
      info.Env(), call,
      [gio, group, iio, image, fn, call]() -> Outcome {
        int r = fn(gio, group.c_str(), iio, image.c_str());
        return r < 0 ? Fail(r, call) : Ok();
      },
      [ih](Env env, const Outcome&) { ih->Unpin(env); });
}

Value GroupImageAdd(const CallbackInfo& info) {
  return GroupImageCall(info, rbd_group_image_add, "rbd_group_image_add");
}
Value GroupImageRemove(const CallbackInfo& info) {
  return GroupImageCall(info, rbd_group_image_remove, "rbd_group_image_remove");
}

// rbd_group_image_list -> [{image, poolId, state}]
Value GroupImageList(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::IoCtx);
  std::string group = StringArg(info, 1);
  rados_ioctx_t io = h->io;
  return h->Use(info.Env(), "rbd_group_image_list", [io, group]() -> Outcome {
    size_t n = 16;
    std::vector<rbd_group_image_info_t> v;
    int r = GrowUntilFits(
        [&] { return rbd_group_image_list(io, group.c_str(), v.data(), sizeof(rbd_group_image_info_t), &n); },
        Sized{v, n});
    if (r < 0) return Fail(r, "rbd_group_image_list");
    struct E { std::string name; int64_t pool; bool attached; };
    std::vector<E> out;
    for (size_t i = 0; i < n; ++i) {
      out.push_back({v[i].name, v[i].pool, v[i].state == RBD_GROUP_IMAGE_STATE_ATTACHED});
    }
    rbd_group_image_list_cleanup(v.data(), sizeof(rbd_group_image_info_t), n);
    return Ok([out](Env env) {
      Napi::Array a = Napi::Array::New(env, out.size());
      for (size_t i = 0; i < out.size(); ++i) {
        Napi::Object o = Napi::Object::New(env);
        o.Set("image", out[i].name);
        o.Set("poolId", static_cast<double>(out[i].pool));
        o.Set("state", out[i].attached ? "attached" : "incomplete");
        a.Set(i, o);
      }
      return a;
    });
  });
}

// rbd_group_snap_create / rbd_group_snap_remove(io, group, snap)
using GroupSnapFn = int (*)(rados_ioctx_t, const char*, const char*);

Value GroupSnapCall(const CallbackInfo& info, GroupSnapFn fn, const char* call) {
  Handle* h = Handle::Arg(info, 0, Kind::IoCtx);
  std::string group = StringArg(info, 1);
  std::string snap = StringArg(info, 2);
  rados_ioctx_t io = h->io;
  return h->Use(info.Env(), call, [io, group, snap, fn, call]() -> Outcome {
    int r = fn(io, group.c_str(), snap.c_str());
    return r < 0 ? Fail(r, call) : Ok();
  });
}

Value GroupSnapCreate(const CallbackInfo& info) {
  return GroupSnapCall(info, rbd_group_snap_create, "rbd_group_snap_create");
}
Value GroupSnapRemove(const CallbackInfo& info) {
  return GroupSnapCall(info, rbd_group_snap_remove, "rbd_group_snap_remove");
}

// rbd_group_snap_list -> [{name, state}]
Value GroupSnapList(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::IoCtx);
  std::string group = StringArg(info, 1);
  rados_ioctx_t io = h->io;
  return h->Use(info.Env(), "rbd_group_snap_list", [io, group]() -> Outcome {
    size_t n = 16;
    std::vector<rbd_group_snap_info_t> v;
    int r = GrowUntilFits(
        [&] { return rbd_group_snap_list(io, group.c_str(), v.data(), sizeof(rbd_group_snap_info_t), &n); },
        Sized{v, n});
    if (r < 0) return Fail(r, "rbd_group_snap_list");
    std::vector<std::pair<std::string, bool>> out;
    for (size_t i = 0; i < n; ++i) {
      out.emplace_back(v[i].name, v[i].state == RBD_GROUP_SNAP_STATE_COMPLETE);
    }
    rbd_group_snap_list_cleanup(v.data(), sizeof(rbd_group_snap_info_t), n);
    return Ok([out](Env env) {
      Napi::Array a = Napi::Array::New(env, out.size());
      for (size_t i = 0; i < out.size(); ++i) {
        Napi::Object o = Napi::Object::New(env);
        o.Set("name", out[i].first);
        o.Set("state", out[i].second ? "complete" : "incomplete");
        a.Set(i, o);
      }
      return a;
    });
  });
}

}  // namespace

void RegisterGroup(Env env, Napi::Object exports) {
  ExportAll(env, exports, {
      {"groupCreate", GroupCreate},
      {"groupRemove", GroupRemove},
      {"groupImageAdd", GroupImageAdd},
      {"groupImageRemove", GroupImageRemove},
      {"groupImageList", GroupImageList},
      {"groupSnapCreate", GroupSnapCreate},
      {"groupSnapRemove", GroupSnapRemove},
      {"groupSnapList", GroupSnapList},
  });
}

}  // namespace vmsnap
