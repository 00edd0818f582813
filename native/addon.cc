// vmsnap_rbd: a Node-API addon over librbd/librados (Ceph 16 C API).
// Entry point: creates the per-environment state and registers the calls.
#include "core.h"

namespace vmsnap {
namespace {

void FreeEnvData(Napi::Env, EnvData* d) {
  d->tsfn.Release();
  delete d;
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  auto* data = new EnvData();
  data->tsfn = Tsfn::New(env, "vmsnap-rbd", 0, 1);
  data->tsfn.Unref(env);  // referenced only while calls are pending
  data->handle_ctor = Napi::Persistent(Handle::Define(env));
  env.SetInstanceData<EnvData, FreeEnvData>(data);
  RegisterCluster(env, exports);
  RegisterImage(env, exports);
  RegisterGroup(env, exports);
  return exports;
}

}  // namespace
}  // namespace vmsnap

static Napi::Object InitModule(Napi::Env env, Napi::Object exports) {
  return vmsnap::Init(env, exports);
}

NODE_API_MODULE(vmsnap_rbd, InitModule)
