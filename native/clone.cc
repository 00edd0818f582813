// librbd clones and their links: rbd_clone3, the parent of an image, the children of a snapshot.
#include <cerrno>
#include <vector>

#include "core.h"
#include "grow.h"
#include "options.h"

namespace vmsnap {
namespace {

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
    int r = GrowUntilFits([&] { return rbd_list_children3(img, specs.data(), &max); },
                          Sized{specs, max});
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

}  // namespace

void RegisterClone(Env env, Napi::Object exports) {
  ExportAll(env, exports, {
      {"cloneImage", CloneImage},
      {"parent", Parent},
      {"listChildren", ListChildren},
  });
}

}  // namespace vmsnap
