// librbd images: list, create, open/close, remove, exists; stat and features of an open image.
#include <cerrno>
#include <vector>

#include "core.h"
#include "grow.h"
#include "options.h"

namespace vmsnap {
namespace {

// rbd_list2
Value ListImages(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::IoCtx);
  rados_ioctx_t io = h->io;
  return h->Use(info.Env(), "rbd_list2", [io]() -> Outcome {
    size_t max = 64;
    std::vector<rbd_image_spec_t> specs;
    int r = GrowUntilFits([&] { return rbd_list2(io, specs.data(), &max); }, Sized{specs, max});
    if (r < 0) return Fail(r, "rbd_list2");
    std::vector<std::string> names;
    for (size_t i = 0; i < max; ++i) names.emplace_back(specs[i].name);
    rbd_image_spec_list_cleanup(specs.data(), max);
    return Ok([names](Env env) {
      Napi::Array a = Napi::Array::New(env, names.size());
      for (size_t i = 0; i < names.size(); ++i) a.Set(i, names[i]);
      return a;
    });
  });
}

// rbd_create4(io, name, size, opts{order, features})
Value CreateImage(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::IoCtx);
  std::string name = StringArg(info, 1);
  uint64_t size = Uint64Arg(info, 2);
  CreateOpts o = ReadCreateOpts(info, 3, 4, 0);
  rados_ioctx_t io = h->io;
  return h->Use(info.Env(), "rbd_create4", [io, name, size, o]() -> Outcome {
    rbd_image_options_t opts = ToRbdOptions(o);
    int r = rbd_create4(io, name.c_str(), size, opts);
    rbd_image_options_destroy(opts);
    return r < 0 ? Fail(r, "rbd_create4") : Ok();
  });
}

// rbd_open / rbd_open_read_only(io, name, snap) -> image handle
Value OpenImage(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::IoCtx);
  std::string name = StringArg(info, 1);
  bool has_snap = info[2].IsString();
  std::string snap = has_snap ? info[2].As<Napi::String>().Utf8Value() : "";
  bool read_only = info[3].IsBoolean() && info[3].As<Napi::Boolean>().Value();
  rados_ioctx_t io = h->io;
  auto core = h->core;
  const char* call = read_only ? "rbd_open_read_only" : "rbd_open";
  return h->Use(info.Env(), call, [io, core, name, has_snap, snap, read_only, call]() -> Outcome {
    rbd_image_t img = nullptr;
    const char* s = has_snap ? snap.c_str() : nullptr;
    int r = read_only ? rbd_open_read_only(io, name.c_str(), &img, s)
                      : rbd_open(io, name.c_str(), &img, s);
    if (r < 0) return Fail(r, call);
    core->AdoptImage();
    return Ok([core, img](Env env) { return Handle::Create(env, Kind::Image, core, nullptr, img); });
  });
}

// rbd_close
Value CloseImage(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  rbd_image_t img = h->image;
  auto core = h->core;
  return h->Close(info.Env(), "rbd_close", [img, core]() -> Outcome {
    int r = core->ReleaseImage(img);
    return r < 0 ? Fail(r, "rbd_close") : Ok();
  });
}

// rbd_remove_with_progress -> [promise, cancel]
Value RemoveImage(const CallbackInfo& info) {
  Env env = info.Env();
  Handle* h = Handle::Arg(info, 0, Kind::IoCtx);
  std::string name = StringArg(info, 1);
  auto progress = MakeProgress(env, info[2]);
  rados_ioctx_t io = h->io;
  Value p = h->Use(env, "rbd_remove_with_progress", [io, name, progress]() -> Outcome {
    int r = rbd_remove_with_progress(io, name.c_str(), Progress::Callback, progress.get());
    if (r < 0 && progress->cancelled()) r = -ECANCELED;
    return r < 0 ? Fail(r, "rbd_remove_with_progress") : Ok();
  });
  return WithCancel(env, p, progress);
}

// rbd_open_read_only + rbd_close: false on ENOENT
Value ImageExists(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::IoCtx);
  std::string name = StringArg(info, 1);
  rados_ioctx_t io = h->io;
  return h->Use(info.Env(), "rbd_open_read_only", [io, name]() -> Outcome {
    rbd_image_t img = nullptr;
    int r = rbd_open_read_only(io, name.c_str(), &img, nullptr);
    if (r < 0 && r != -ENOENT) return Fail(r, "rbd_open_read_only");
    if (r == 0) rbd_close(img);
    bool exists = r == 0;
    return Ok([exists](Env env) { return Napi::Boolean::New(env, exists); });
  });
}

// rbd_stat
Value Stat(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_stat", [img]() -> Outcome {
    rbd_image_info_t st;
    int r = rbd_stat(img, &st, sizeof(st));
    if (r < 0) return Fail(r, "rbd_stat");
    return Ok([st](Env env) {
      Napi::Object o = Napi::Object::New(env);
      o.Set("size", static_cast<double>(st.size));
      o.Set("objSize", static_cast<double>(st.obj_size));
      o.Set("numObjs", static_cast<double>(st.num_objs));
      o.Set("order", st.order);
      o.Set("blockNamePrefix", st.block_name_prefix);
      return o;
    });
  });
}

// rbd_get_features
Value Features(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_get_features", [img]() -> Outcome {
    uint64_t f = 0;
    int r = rbd_get_features(img, &f);
    if (r < 0) return Fail(r, "rbd_get_features");
    return Ok([f](Env env) { return Napi::BigInt::New(env, f); });
  });
}

// rbd_update_features
Value UpdateFeatures(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  uint64_t f = Uint64Arg(info, 1);
  bool enabled = info[2].ToBoolean().Value();
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_update_features", [img, f, enabled]() -> Outcome {
    int r = rbd_update_features(img, f, enabled ? 1 : 0);
    return r < 0 ? Fail(r, "rbd_update_features") : Ok();
  });
}

int NoProgress(uint64_t, uint64_t, void*) { return 0; }

// rbd_rebuild_object_map
Value RebuildObjectMap(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_rebuild_object_map", [img]() -> Outcome {
    int r = rbd_rebuild_object_map(img, NoProgress, nullptr);
    return r < 0 ? Fail(r, "rbd_rebuild_object_map") : Ok();
  });
}

}  // namespace

void RegisterImage(Env env, Napi::Object exports) {
  ExportAll(env, exports, {
      {"listImages", ListImages},
      {"createImage", CreateImage},
      {"openImage", OpenImage},
      {"closeImage", CloseImage},
      {"removeImage", RemoveImage},
      {"imageExists", ImageExists},
      {"stat", Stat},
      {"features", Features},
      {"updateFeatures", UpdateFeatures},
      {"rebuildObjectMap", RebuildObjectMap},
  });
}

}  // namespace vmsnap
