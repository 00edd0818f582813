// librbd: images, snapshots, clone, flatten, metadata, I/O, checksum.
#include <cerrno>
#include <cstring>
#include <vector>

#include "core.h"
#include "sha256.h"

namespace vmsnap {
namespace {

using Napi::CallbackInfo;
using Napi::Env;
using Napi::Value;

bool Present(const CallbackInfo& info, size_t i) {
  return info.Length() > i && !info[i].IsNull() && !info[i].IsUndefined();
}

// Options for rbd_create4/rbd_clone3 from (order, features, format) args.
struct CreateOpts {
  bool has_order = false, has_features = false, has_format = false;
  uint64_t order = 0, features = 0, format = 0;
};

CreateOpts ReadCreateOpts(const CallbackInfo& info, size_t order_i, size_t features_i,
                          size_t format_i) {
  CreateOpts o;
  if (Present(info, order_i)) {
    o.has_order = true;
    o.order = Uint64Arg(info, order_i);
  }
  if (Present(info, features_i)) {
    o.has_features = true;
    o.features = Uint64Arg(info, features_i);
  }
  if (format_i != 0 && Present(info, format_i)) {
    o.has_format = true;
    o.format = Uint64Arg(info, format_i);
  }
  return o;
}

rbd_image_options_t ToRbdOptions(const CreateOpts& o) {
  rbd_image_options_t opts;
  rbd_image_options_create(&opts);
  if (o.has_order) rbd_image_options_set_uint64(opts, RBD_IMAGE_OPTION_ORDER, o.order);
  if (o.has_features) rbd_image_options_set_uint64(opts, RBD_IMAGE_OPTION_FEATURES, o.features);
  if (o.has_format) rbd_image_options_set_uint64(opts, RBD_IMAGE_OPTION_CLONE_FORMAT, o.format);
  return opts;
}

// Returns [promise, cancel] for calls that take a progress callback.
Value WithCancel(Env env, Value promise, std::shared_ptr<Progress> progress) {
  Napi::Array out = Napi::Array::New(env, 2);
  out.Set(0u, promise);
  out.Set(1u, Napi::Function::New(env, [progress](const CallbackInfo& info) {
            progress->Cancel();
            return info.Env().Undefined();
          }));
  return out;
}

// ---- pool-level image calls ------------------------------------------------

// rbd_list2
Value ListImages(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::IoCtx);
  rados_ioctx_t io = h->io;
  return h->Use(info.Env(), "rbd_list2", [io]() -> Outcome {
    size_t max = 64;
    std::vector<rbd_image_spec_t> specs;
    int r;
    for (;;) {
      specs.resize(max);
      r = rbd_list2(io, specs.data(), &max);
      if (r != -ERANGE) break;
    }
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

// rbd_clone3(pio, pname, psnap, cio, cname, opts{order, features, clone_format})
Value CloneImage(const CallbackInfo& info) {
  Handle* ph = Handle::Arg(info, 0, Kind::IoCtx);
  std::string pname = StringArg(info, 1);
  std::string psnap = StringArg(info, 2);
  Handle* ch = Handle::Arg(info, 3, Kind::IoCtx);
  std::string cname = StringArg(info, 4);
  CreateOpts o = ReadCreateOpts(info, 6, 5, 7);
  rados_ioctx_t pio = ph->io, cio = ch->io;
  if (!ph->IsOpen() || !ch->Pin()) return Rejected(info.Env(), -EBADF, "rbd_clone3");
  return ph->Use(
      info.Env(), "rbd_clone3",
      [pio, pname, psnap, cio, cname, o]() -> Outcome {
        rbd_image_options_t opts = ToRbdOptions(o);
        int r = rbd_clone3(pio, pname.c_str(), psnap.c_str(), cio, cname.c_str(), opts);
        rbd_image_options_destroy(opts);
        return r < 0 ? Fail(r, "rbd_clone3") : Ok();
      },
      [ch](Napi::Env env, const Outcome&) { ch->Unpin(env); });
}

// ---- image handle calls ------------------------------------------------------

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

// rbd_get_parent -> {pool, namespace, image, snap} | null (ENOENT)
Value Parent(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_get_parent", [img]() -> Outcome {
    rbd_linked_image_spec_t parent;
    rbd_snap_spec_t snap;
    int r = rbd_get_parent(img, &parent, &snap);
    if (r == -ENOENT) return Ok([](Env env) { return env.Null(); });
    if (r < 0) return Fail(r, "rbd_get_parent");
    std::string pool = parent.pool_name, ns = parent.pool_namespace, name = parent.image_name,
                sname = snap.name;
    bool trash = parent.trash;
    uint64_t snap_id = snap.id;
    rbd_linked_image_spec_cleanup(&parent);
    rbd_snap_spec_cleanup(&snap);
    return Ok([=](Env env) {
      Napi::Object o = Napi::Object::New(env);
      o.Set("pool", pool);
      o.Set("namespace", ns);
      o.Set("image", name);
      o.Set("snap", sname);
      o.Set("snapId", static_cast<double>(snap_id));
      o.Set("trash", trash);
      return o;
    });
  });
}

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
    int n;
    for (;;) {
      snaps.resize(max);
      n = rbd_snap_list(img, snaps.data(), &max);
      if (n != -ERANGE) break;
    }
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

struct ChildEntry {
  std::string pool, ns, image;
  bool trash;
};

// rbd_list_children3: children of every snapshot of the image (opened at
// HEAD) or of the opened snapshot; clone v1 and v2 alike.
Value ListChildren(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_list_children3", [img]() -> Outcome {
    size_t max = 16;
    std::vector<rbd_linked_image_spec_t> specs;
    int r;
    for (;;) {
      specs.resize(max);
      r = rbd_list_children3(img, specs.data(), &max);
      if (r != -ERANGE) break;
    }
    if (r < 0) return Fail(r, "rbd_list_children3");
    std::vector<ChildEntry> out;
    for (size_t i = 0; i < max; ++i) {
      out.push_back({specs[i].pool_name, specs[i].pool_namespace, specs[i].image_name,
                     specs[i].trash});
    }
    rbd_linked_image_spec_list_cleanup(specs.data(), max);
    return Ok([out](Env env) {
      Napi::Array a = Napi::Array::New(env, out.size());
      for (size_t i = 0; i < out.size(); ++i) {
        Napi::Object o = Napi::Object::New(env);
        o.Set("pool", out[i].pool);
        o.Set("namespace", out[i].ns);
        o.Set("image", out[i].image);
        o.Set("trash", out[i].trash);
        a.Set(i, o);
      }
      return a;
    });
  });
}

// rbd_metadata_get -> string | null (ENOENT)
Value MetadataGet(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  std::string key = StringArg(info, 1);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_metadata_get", [img, key]() -> Outcome {
    size_t len = 256;
    std::vector<char> buf;
    int r;
    for (;;) {
      buf.resize(len);
      r = rbd_metadata_get(img, key.c_str(), buf.data(), &len);
      if (r != -ERANGE) break;
    }
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
    int r;
    for (;;) {
      keys.resize(klen);
      vals.resize(vlen);
      r = rbd_metadata_list(img, "", 0, keys.data(), &klen, vals.data(), &vlen);
      if (r != -ERANGE) break;
    }
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

// rbd_flatten_with_progress -> [promise, cancel]; cancel makes the progress
// callback return non-zero and the promise reject with ECANCELED.
Value Flatten(const CallbackInfo& info) {
  Env env = info.Env();
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  auto progress = MakeProgress(env, info[1]);
  rbd_image_t img = h->image;
  Value p = h->Use(env, "rbd_flatten_with_progress", [img, progress]() -> Outcome {
    int r = rbd_flatten_with_progress(img, Progress::Callback, progress.get());
    if (r < 0 && progress->cancelled()) r = -ECANCELED;
    return r < 0 ? Fail(r, "rbd_flatten_with_progress") : Ok();
  });
  return WithCancel(env, p, progress);
}

}  // namespace

void RegisterImage(Env env, Napi::Object exports) {
  struct Entry {
    const char* name;
    Value (*fn)(const CallbackInfo&);
  };
  const Entry entries[] = {
      {"listImages", ListImages},     {"createImage", CreateImage},
      {"openImage", OpenImage},       {"closeImage", CloseImage},
      {"removeImage", RemoveImage},   {"imageExists", ImageExists},
      {"cloneImage", CloneImage},     {"stat", Stat},
      {"features", Features},         {"updateFeatures", UpdateFeatures},
      {"rebuildObjectMap", RebuildObjectMap}, {"parent", Parent},
      {"snapList", SnapList},         {"snapExists", SnapExists},
      {"snapCreate", SnapCreate},     {"snapRemove", SnapRemove},
      {"snapProtect", SnapProtect},   {"snapUnprotect", SnapUnprotect},
      {"snapIsProtected", SnapIsProtected}, {"listChildren", ListChildren},
      {"metadataGet", MetadataGet},   {"metadataSet", MetadataSet},
      {"metadataRemove", MetadataRemove}, {"metadataList", MetadataList},
      {"read", Read},                 {"write", Write},
      {"checksum", Checksum},         {"flatten", Flatten},
  };
  for (const Entry& e : entries) exports.Set(e.name, Napi::Function::New(env, e.fn, e.name));
}

}  // namespace vmsnap
