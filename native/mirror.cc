// librbd image mirroring: enable/disable, info and mode, global status, mirror snapshots, and the
// mirror namespace of a snapshot (what a mirror snapshot on a non-primary image was copied from);
// and a pool's side of it, read only: its mirror mode, its mirror uuid and its peer sites.
//
// A mirror snapshot of a live image (rbd_mirror_image_create_snapshot), like enable (which takes
// the first one) and disable (which removes them), is a snapshot operation: it goes through the
// image's exclusive-lock owner and blocks while that owner does not answer. The facade bounds
// none of them; src/ceph/snapshotter.ts runs them on live images.
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "core.h"
#include "grow.h"

namespace vmsnap {
namespace {

const char* ImageModeName(rbd_mirror_image_mode_t m) {
  switch (m) {
    case RBD_MIRROR_IMAGE_MODE_JOURNAL: return "journal";
    case RBD_MIRROR_IMAGE_MODE_SNAPSHOT: return "snapshot";
  }
  return "unknown";
}

const char* ImageStateName(rbd_mirror_image_state_t s) {
  switch (s) {
    case RBD_MIRROR_IMAGE_DISABLING: return "disabling";
    case RBD_MIRROR_IMAGE_ENABLED: return "enabled";
    case RBD_MIRROR_IMAGE_DISABLED: return "disabled";
  }
  return "unknown";
}

const char* StatusStateName(rbd_mirror_image_status_state_t s) {
  switch (s) {
    case MIRROR_IMAGE_STATUS_STATE_UNKNOWN: return "unknown";
    case MIRROR_IMAGE_STATUS_STATE_ERROR: return "error";
    case MIRROR_IMAGE_STATUS_STATE_SYNCING: return "syncing";
    case MIRROR_IMAGE_STATUS_STATE_STARTING_REPLAY: return "starting_replay";
    case MIRROR_IMAGE_STATUS_STATE_REPLAYING: return "replaying";
    case MIRROR_IMAGE_STATUS_STATE_STOPPING_REPLAY: return "stopping_replay";
    case MIRROR_IMAGE_STATUS_STATE_STOPPED: return "stopped";
  }
  return "unknown";
}

const char* SnapMirrorStateName(rbd_snap_mirror_state_t s) {
  switch (s) {
    case RBD_SNAP_MIRROR_STATE_PRIMARY: return "primary";
    case RBD_SNAP_MIRROR_STATE_PRIMARY_DEMOTED: return "primary-demoted";
    case RBD_SNAP_MIRROR_STATE_NON_PRIMARY: return "non-primary";
    case RBD_SNAP_MIRROR_STATE_NON_PRIMARY_DEMOTED: return "non-primary-demoted";
  }
  return "unknown";
}

std::string Str(const char* s) { return s ? std::string(s) : std::string(); }

struct Info {
  std::string global_id;
  const char* state;
  bool primary;
};

Info ToInfo(const rbd_mirror_image_info_t& i) {
  return {Str(i.global_id), ImageStateName(i.state), i.primary};
}

Napi::Object InfoObject(Env env, const Info& i) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("globalId", i.global_id);
  o.Set("state", i.state);
  o.Set("primary", i.primary);
  return o;
}

// rbd_mirror_image_enable2(image, 'journal' | 'snapshot')
Value MirrorImageEnable(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  std::string mode = StringArg(info, 1);
  rbd_mirror_image_mode_t m;
  if (mode == "snapshot") {
    m = RBD_MIRROR_IMAGE_MODE_SNAPSHOT;
  } else if (mode == "journal") {
    m = RBD_MIRROR_IMAGE_MODE_JOURNAL;
  } else {
    throw Napi::TypeError::New(info.Env(), "argument 1 must be 'snapshot' or 'journal'");
  }
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_mirror_image_enable2", [img, m]() -> Outcome {
    int r = rbd_mirror_image_enable2(img, m);
    return r < 0 ? Fail(r, "rbd_mirror_image_enable2") : Ok();
  });
}

// rbd_mirror_image_disable(image, force)
Value MirrorImageDisable(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  if (info.Length() < 2 || !info[1].IsBoolean()) {
    throw Napi::TypeError::New(info.Env(), "argument 1 must be a boolean");
  }
  bool force = info[1].As<Napi::Boolean>().Value();
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_mirror_image_disable", [img, force]() -> Outcome {
    int r = rbd_mirror_image_disable(img, force);
    return r < 0 ? Fail(r, "rbd_mirror_image_disable") : Ok();
  });
}

// rbd_mirror_image_get_info -> {globalId, state, primary}
Value MirrorImageGetInfo(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_mirror_image_get_info", [img]() -> Outcome {
    rbd_mirror_image_info_t mi;
    std::memset(&mi, 0, sizeof(mi));
    int r = rbd_mirror_image_get_info(img, &mi, sizeof(mi));
    if (r < 0) return Fail(r, "rbd_mirror_image_get_info");
    Info out = ToInfo(mi);
    rbd_mirror_image_get_info_cleanup(&mi);
    return Ok([out](Env env) { return InfoObject(env, out); });
  });
}

// rbd_mirror_image_get_mode -> 'journal' | 'snapshot'
Value MirrorImageGetMode(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_mirror_image_get_mode", [img]() -> Outcome {
    rbd_mirror_image_mode_t m = RBD_MIRROR_IMAGE_MODE_JOURNAL;
    int r = rbd_mirror_image_get_mode(img, &m);
    if (r < 0) return Fail(r, "rbd_mirror_image_get_mode");
    const char* name = ImageModeName(m);
    return Ok([name](Env env) { return Napi::String::New(env, name); });
  });
}

// rbd_mirror_image_create_snapshot -> the new snapshot's id
Value MirrorImageCreateSnapshot(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_mirror_image_create_snapshot", [img]() -> Outcome {
    uint64_t id = 0;
    int r = rbd_mirror_image_create_snapshot(img, &id);
    if (r < 0) return Fail(r, "rbd_mirror_image_create_snapshot");
    return Ok([id](Env env) { return Napi::Number::New(env, static_cast<double>(id)); });
  });
}

// rbd_mirror_image_get_global_status -> {name, info, siteStatuses: [{mirrorUuid, state, ...}]}
Value MirrorImageGetGlobalStatus(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_mirror_image_get_global_status", [img]() -> Outcome {
    rbd_mirror_image_global_status_t gs;
    std::memset(&gs, 0, sizeof(gs));
    int r = rbd_mirror_image_get_global_status(img, &gs, sizeof(gs));
    if (r < 0) return Fail(r, "rbd_mirror_image_get_global_status");
    struct Site {
      std::string mirror_uuid;
      const char* state;
      std::string description;
      double last_update;
      bool up;
    };
    std::string name = Str(gs.name);
    Info mi = ToInfo(gs.info);
    std::vector<Site> sites;
    for (uint32_t i = 0; i < gs.site_statuses_count; ++i) {
      const rbd_mirror_image_site_status_t& s = gs.site_statuses[i];
      sites.push_back({Str(s.mirror_uuid), StatusStateName(s.state), Str(s.description),
                       static_cast<double>(s.last_update), s.up});
    }
    rbd_mirror_image_global_status_cleanup(&gs);
    return Ok([name, mi, sites](Env env) {
      Napi::Object o = Napi::Object::New(env);
      o.Set("name", name);
      o.Set("info", InfoObject(env, mi));
      Napi::Array a = Napi::Array::New(env, sites.size());
      for (size_t i = 0; i < sites.size(); ++i) {
        Napi::Object s = Napi::Object::New(env);
        s.Set("mirrorUuid", sites[i].mirror_uuid);
        s.Set("state", sites[i].state);
        s.Set("description", sites[i].description);
        s.Set("lastUpdate", sites[i].last_update);
        s.Set("up", sites[i].up);
        a.Set(i, s);
      }
      o.Set("siteStatuses", a);
      return o;
    });
  });
}

// rbd_snap_get_mirror_namespace(image, snapId) -> {state, mirrorPeerUuids, complete, ...}
Value SnapGetMirrorNamespace(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Image);
  uint64_t snap_id = Uint64Arg(info, 1);
  rbd_image_t img = h->image;
  return h->Use(info.Env(), "rbd_snap_get_mirror_namespace", [img, snap_id]() -> Outcome {
    rbd_snap_mirror_namespace_t ns;
    std::memset(&ns, 0, sizeof(ns));
    int r = rbd_snap_get_mirror_namespace(img, snap_id, &ns, sizeof(ns));
    if (r < 0) return Fail(r, "rbd_snap_get_mirror_namespace");
    // mirror_peer_uuids: mirror_peer_uuids_count NUL-terminated strings, one after the other.
    std::vector<std::string> peers;
    const char* p = ns.mirror_peer_uuids;
    for (size_t i = 0; p != nullptr && i < ns.mirror_peer_uuids_count; ++i) {
      peers.emplace_back(p);
      p += peers.back().size() + 1;
    }
    const char* state = SnapMirrorStateName(ns.state);
    bool complete = ns.complete;
    std::string primary_uuid = Str(ns.primary_mirror_uuid);
    double primary_snap_id = static_cast<double>(ns.primary_snap_id);
    double last_copied = static_cast<double>(ns.last_copied_object_number);
    rbd_snap_mirror_namespace_cleanup(&ns, sizeof(ns));
    return Ok([state, peers, complete, primary_uuid, primary_snap_id, last_copied](Env env) {
      Napi::Object o = Napi::Object::New(env);
      o.Set("state", state);
      Napi::Array a = Napi::Array::New(env, peers.size());
      for (size_t i = 0; i < peers.size(); ++i) a.Set(i, peers[i]);
      o.Set("mirrorPeerUuids", a);
      o.Set("complete", complete);
      o.Set("primaryMirrorUuid", primary_uuid);
      o.Set("primarySnapId", primary_snap_id);
      o.Set("lastCopiedObjectNumber", last_copied);
      return o;
    });
  });
}

const char* PoolModeName(rbd_mirror_mode_t m) {
  switch (m) {
    case RBD_MIRROR_MODE_DISABLED: return "disabled";
    case RBD_MIRROR_MODE_IMAGE: return "image";
    case RBD_MIRROR_MODE_POOL: return "pool";
  }
  return "unknown";
}

const char* PeerDirectionName(rbd_mirror_peer_direction_t d) {
  switch (d) {
    case RBD_MIRROR_PEER_DIRECTION_RX: return "rx-only";
    case RBD_MIRROR_PEER_DIRECTION_TX: return "tx-only";
    case RBD_MIRROR_PEER_DIRECTION_RX_TX: return "rx-tx";
  }
  return "unknown";
}

// rbd_mirror_mode_get(ioctx) -> 'disabled' | 'image' | 'pool' (the pool's, or its namespace's)
Value MirrorModeGet(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::IoCtx);
  rados_ioctx_t io = h->io;
  return h->Use(info.Env(), "rbd_mirror_mode_get", [io]() -> Outcome {
    rbd_mirror_mode_t m = RBD_MIRROR_MODE_DISABLED;
    int r = rbd_mirror_mode_get(io, &m);
    if (r < 0) return Fail(r, "rbd_mirror_mode_get");
    const char* name = PoolModeName(m);
    return Ok([name](Env env) { return Napi::String::New(env, name); });
  });
}

// rbd_mirror_uuid_get(ioctx) -> this pool's mirror uuid (what peers' statuses name it by)
Value MirrorUuidGet(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::IoCtx);
  rados_ioctx_t io = h->io;
  return h->Use(info.Env(), "rbd_mirror_uuid_get", [io]() -> Outcome {
    size_t n = 64;
    std::vector<char> buf;
    int r = GrowUntilFits([&] { return rbd_mirror_uuid_get(io, buf.data(), &n); }, Sized{buf, n});
    if (r < 0) return Fail(r, "rbd_mirror_uuid_get");
    std::string uuid(buf.data(), strnlen(buf.data(), buf.size()));
    return Ok([uuid](Env env) { return Napi::String::New(env, uuid); });
  });
}

// rbd_mirror_peer_site_list(ioctx) -> [{uuid, direction, siteName, mirrorUuid, clientName, lastSeen}]
Value MirrorPeerSiteList(const CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::IoCtx);
  rados_ioctx_t io = h->io;
  return h->Use(info.Env(), "rbd_mirror_peer_site_list", [io]() -> Outcome {
    int n = 8;
    std::vector<rbd_mirror_peer_site_t> v;
    int r = GrowUntilFits([&] { return rbd_mirror_peer_site_list(io, v.data(), &n); }, Sized{v, n});
    if (r < 0) return Fail(r, "rbd_mirror_peer_site_list");
    struct Peer {
      std::string uuid;
      const char* direction;
      std::string site_name, mirror_uuid, client_name;
      double last_seen;
    };
    std::vector<Peer> out;
    for (int i = 0; i < n; ++i) {
      out.push_back({Str(v[i].uuid), PeerDirectionName(v[i].direction), Str(v[i].site_name),
                     Str(v[i].mirror_uuid), Str(v[i].client_name), static_cast<double>(v[i].last_seen)});
    }
    rbd_mirror_peer_site_list_cleanup(v.data(), n);
    return Ok([out](Env env) {
      Napi::Array a = Napi::Array::New(env, out.size());
      for (size_t i = 0; i < out.size(); ++i) {
        Napi::Object o = Napi::Object::New(env);
        o.Set("uuid", out[i].uuid);
        o.Set("direction", out[i].direction);
        o.Set("siteName", out[i].site_name);
        o.Set("mirrorUuid", out[i].mirror_uuid);
        o.Set("clientName", out[i].client_name);
        o.Set("lastSeen", out[i].last_seen);
        a.Set(i, o);
      }
      return a;
    });
  });
}

}  // namespace

void RegisterMirror(Env env, Napi::Object exports) {
  ExportAll(env, exports, {
      {"mirrorImageEnable", MirrorImageEnable},
      {"mirrorImageDisable", MirrorImageDisable},
      {"mirrorImageGetInfo", MirrorImageGetInfo},
      {"mirrorImageGetMode", MirrorImageGetMode},
      {"mirrorImageCreateSnapshot", MirrorImageCreateSnapshot},
      {"mirrorImageGetGlobalStatus", MirrorImageGetGlobalStatus},
      {"snapGetMirrorNamespace", SnapGetMirrorNamespace},
      {"mirrorModeGet", MirrorModeGet},
      {"mirrorUuidGet", MirrorUuidGet},
      {"mirrorPeerSiteList", MirrorPeerSiteList},
  });
}

}  // namespace vmsnap
