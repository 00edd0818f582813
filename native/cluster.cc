// librados: cluster connection, pools, ioctx; rbd namespaces.
#include <cerrno>
#include <cstdlib>
#include <vector>

#include "core.h"
#include "pool.h"

namespace vmsnap {
namespace {

// connect(conf, id, keyring|null, connectTimeoutSec|null) -> cluster handle.
// rados_create, rados_conf_read_file, rados_conf_set, rados_connect.
Napi::Value Connect(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string conf = StringArg(info, 0);
  std::string id = StringArg(info, 1);
  std::string keyring = info[2].IsString() ? info[2].As<Napi::String>().Utf8Value() : "";
  std::string timeout =
      info[3].IsNumber() ? std::to_string(info[3].As<Napi::Number>().Int64Value()) : "";
  return Submit(env, [conf, id, keyring, timeout]() -> Outcome {
    rados_t c = nullptr;
    int r = rados_create(&c, id.c_str());
    if (r < 0) return Fail(r, "rados_create");
    auto fail = [c](int r, const char* call) {
      rados_shutdown(c);
      return Fail(r, call);
    };
    if ((r = rados_conf_read_file(c, conf.c_str())) < 0) return fail(r, "rados_conf_read_file");
    if (!keyring.empty() && (r = rados_conf_set(c, "keyring", keyring.c_str())) < 0) {
      return fail(r, "rados_conf_set");
    }
    if (!timeout.empty() && (r = rados_conf_set(c, "client_mount_timeout", timeout.c_str())) < 0) {
      return fail(r, "rados_conf_set");
    }
    if ((r = rados_connect(c)) < 0) return fail(r, "rados_connect");
    auto core = std::make_shared<ClusterCore>(c);
    return Ok([core](Napi::Env env) {
      return Handle::Create(env, Kind::Cluster, core, nullptr, nullptr);
    });
  });
}

// rados_shutdown; EBUSY while ioctx or image resources from it are not released (open handles,
// handles being closed, dropped handles the finalizer is still closing). Every open of a child
// goes through an open handle of this cluster, so 0 at the start of the closer stays 0.
Napi::Value Shutdown(const Napi::CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Cluster);
  auto core = h->core;
  return h->Close(
      info.Env(), "rados_shutdown",
      [core]() -> Outcome {
        core->Shutdown();
        return Ok();
      },
      [core] { return core->children == 0; });
}

// rados_cluster_fsid
Napi::Value Fsid(const Napi::CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Cluster);
  auto core = h->core;
  return h->Use(info.Env(), "rados_cluster_fsid", [core]() -> Outcome {
    char buf[64] = {0};
    int r = rados_cluster_fsid(core->cluster, buf, sizeof(buf) - 1);
    if (r < 0) return Fail(r, "rados_cluster_fsid");
    std::string fsid(buf);
    return Ok([fsid](Napi::Env env) { return Napi::String::New(env, fsid); });
  });
}

// rados_pool_lookup -> pool id (ENOENT when absent)
Napi::Value PoolLookup(const Napi::CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Cluster);
  std::string pool = StringArg(info, 1);
  auto core = h->core;
  return h->Use(info.Env(), "rados_pool_lookup", [core, pool]() -> Outcome {
    int64_t id = rados_pool_lookup(core->cluster, pool.c_str());
    if (id < 0) return Fail(static_cast<int>(id), "rados_pool_lookup");
    return Ok([id](Napi::Env env) { return Napi::Number::New(env, static_cast<double>(id)); });
  });
}

// rados_ioctx_create + rados_ioctx_set_namespace -> ioctx handle
Napi::Value IoCtxCreate(const Napi::CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Cluster);
  std::string pool = StringArg(info, 1);
  std::string ns = info[2].IsString() ? info[2].As<Napi::String>().Utf8Value() : "";
  auto core = h->core;
  return h->Use(info.Env(), "rados_ioctx_create", [core, pool, ns]() -> Outcome {
    rados_ioctx_t io = nullptr;
    int r = rados_ioctx_create(core->cluster, pool.c_str(), &io);
    if (r < 0) return Fail(r, "rados_ioctx_create");
    rados_ioctx_set_namespace(io, ns.c_str());
    core->AdoptIoCtx();
    return Ok([core, io](Napi::Env env) {
      return Handle::Create(env, Kind::IoCtx, core, io, nullptr);
    });
  });
}

// rados_ioctx_destroy
Napi::Value IoCtxDestroy(const Napi::CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::IoCtx);
  auto core = h->core;
  rados_ioctx_t io = h->io;
  return h->Close(info.Env(), "rados_ioctx_destroy", [core, io]() -> Outcome {
    core->ReleaseIoCtx(io);
    return Ok();
  });
}

// rbd_namespace_create
Napi::Value NamespaceCreate(const Napi::CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::IoCtx);
  std::string name = StringArg(info, 1);
  rados_ioctx_t io = h->io;
  return h->Use(info.Env(), "rbd_namespace_create", [io, name]() -> Outcome {
    int r = rbd_namespace_create(io, name.c_str());
    return r < 0 ? Fail(r, "rbd_namespace_create") : Ok();
  });
}

// rbd_namespace_remove
Napi::Value NamespaceRemove(const Napi::CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::IoCtx);
  std::string name = StringArg(info, 1);
  rados_ioctx_t io = h->io;
  return h->Use(info.Env(), "rbd_namespace_remove", [io, name]() -> Outcome {
    int r = rbd_namespace_remove(io, name.c_str());
    return r < 0 ? Fail(r, "rbd_namespace_remove") : Ok();
  });
}

// rbd_namespace_exists
Napi::Value NamespaceExists(const Napi::CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::IoCtx);
  std::string name = StringArg(info, 1);
  rados_ioctx_t io = h->io;
  return h->Use(info.Env(), "rbd_namespace_exists", [io, name]() -> Outcome {
    bool exists = false;
    int r = rbd_namespace_exists(io, name.c_str(), &exists);
    if (r < 0) return Fail(r, "rbd_namespace_exists");
    return Ok([exists](Napi::Env env) { return Napi::Boolean::New(env, exists); });
  });
}

// rados_getaddrs: this client's address(es), e.g. "[v2:127.0.0.1:0/123]".
Napi::Value GetAddrs(const Napi::CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Cluster);
  auto core = h->core;
  return h->Use(info.Env(), "rados_getaddrs", [core]() -> Outcome {
    char* addrs = nullptr;
    int r = rados_getaddrs(core->cluster, &addrs);
    if (r < 0) return Fail(r, "rados_getaddrs");
    std::string s(addrs ? addrs : "");
    free(addrs);
    return Ok([s](Napi::Env env) { return Napi::String::New(env, s); });
  });
}

// rados_blocklist_add(client_address, expire_seconds)
Napi::Value BlocklistAdd(const Napi::CallbackInfo& info) {
  Handle* h = Handle::Arg(info, 0, Kind::Cluster);
  std::string addr = StringArg(info, 1);
  uint32_t expire = info[2].IsNumber() ? info[2].As<Napi::Number>().Uint32Value() : 0;
  auto core = h->core;
  return h->Use(info.Env(), "rados_blocklist_add", [core, addr, expire]() -> Outcome {
    int r = rados_blocklist_add(core->cluster, const_cast<char*>(addr.c_str()), expire);
    return r < 0 ? Fail(r, "rados_blocklist_add") : Ok();
  });
}

// rbd_version (synchronous, no I/O)
Napi::Value Version(const Napi::CallbackInfo& info) {
  int major = 0, minor = 0, extra = 0;
  rbd_version(&major, &minor, &extra);
  return Napi::String::New(info.Env(), std::to_string(major) + "." + std::to_string(minor) + "." +
                                           std::to_string(extra));
}

// Native resources not yet released, process-wide (synchronous), for tests.
Napi::Value HandleCounts(const Napi::CallbackInfo& info) {
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("clusters", static_cast<double>(Live().clusters.load()));
  o.Set("ioctxs", static_cast<double>(Live().ioctxs.load()));
  o.Set("images", static_cast<double>(Live().images.load()));
  return o;
}

// injectCloseError(errno): the next rbd_close the addon makes reports -errno (test hook).
Napi::Value InjectCloseErrorFn(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsNumber()) {
    throw Napi::TypeError::New(info.Env(), "argument 0 must be an errno");
  }
  int err = info[0].As<Napi::Number>().Int32Value();
  if (err <= 0 || err > 4095) throw Napi::RangeError::New(info.Env(), "errno must be in 1..4095");
  InjectCloseError(err);
  return info.Env().Undefined();
}

// Addon thread pool counters (synchronous), for tests.
Napi::Value ThreadStats(const Napi::CallbackInfo& info) {
  PoolStats s = PoolGetStats();
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("threads", static_cast<double>(s.threads));
  o.Set("idle", static_cast<double>(s.idle));
  o.Set("queued", static_cast<double>(s.queued));
  return o;
}

}  // namespace

void RegisterCluster(Napi::Env env, Napi::Object exports) {
  ExportAll(env, exports, {
      {"connect", Connect},
      {"shutdown", Shutdown},
      {"fsid", Fsid},
      {"poolLookup", PoolLookup},
      {"ioctxCreate", IoCtxCreate},
      {"ioctxDestroy", IoCtxDestroy},
      {"namespaceCreate", NamespaceCreate},
      {"namespaceRemove", NamespaceRemove},
      {"namespaceExists", NamespaceExists},
      {"version", Version},
      {"getAddrs", GetAddrs},
      {"blocklistAdd", BlocklistAdd},
      {"threadStats", ThreadStats},
      {"handleCounts", HandleCounts},
      {"injectCloseError", InjectCloseErrorFn},
  });
}

}  // namespace vmsnap
