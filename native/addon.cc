// vmsnap_rbd: a Node-API addon over librbd/librados (Ceph 16 C API).
// Entry point: creates the per-environment state and registers the calls.
#include <malloc.h>

#include "core.h"

namespace vmsnap {

// Defined in the file that calls Tsfn::New: under -fsanitize=null (the UBSan build, see
// scripts/build-addon.mjs) GCC cannot fold node-addon-api's `CallJs != nullptr` template test
// for a function that is only declared in the translation unit (or inline).
void CallDelivery(Napi::Env env, Napi::Function, void*, Delivery* d) {
  if (env != nullptr) d->Deliver(env);
  delete d;
}

namespace {

// malloc_trim(0): hands freed heap pages of every glibc arena back to the kernel. librbd and
// librados free a lot after a clone, flatten or verify, and glibc keeps it otherwise.
Napi::Value TrimMemory(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), malloc_trim(0) != 0);
}

void FreeEnvData(Napi::Env, EnvData* d) {
  d->tsfn.Release();
  delete d;
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  // librados/librbd run dozens of threads; glibc would give each its own arena (up to 8 per core,
  // 64 MiB reserved each) and keep their freed memory. Two arenas: a worker with 50 runs in
  // flight peaked at 404 instead of 466-480 MiB RSS (bench). Set at load, before Ceph's threads.
  mallopt(M_ARENA_MAX, 2);
  auto* data = new EnvData();
  data->tsfn = Tsfn::New(env, "vmsnap-rbd", 0, 1);
  data->tsfn.Unref(env);  // referenced only while calls are pending
  data->guard = NewTsfnGuard();
  // Registered after the TSFN, so it runs before Node's own teardown of it (hooks run in reverse).
  // The hook owns a reference of its own: the instance data may be freed before it runs.
  napi_add_env_cleanup_hook(
      env,
      [](void* arg) {
        auto* g = static_cast<std::shared_ptr<TsfnGuard>*>(arg);
        (*g)->Close();
        delete g;
      },
      new std::shared_ptr<TsfnGuard>(data->guard));
  data->handle_ctor = Napi::Persistent(Handle::Define(env));
  env.SetInstanceData<EnvData, FreeEnvData>(data);
  RegisterCluster(env, exports);
  RegisterImage(env, exports);
  RegisterSnapshot(env, exports);
  RegisterClone(env, exports);
  RegisterFlatten(env, exports);
  RegisterMetadata(env, exports);
  RegisterIo(env, exports);
  RegisterGroup(env, exports);
  RegisterMirror(env, exports);
  exports.Set("trimMemory", Napi::Function::New(env, TrimMemory, "trimMemory"));
  return exports;
}

}  // namespace
}  // namespace vmsnap

static Napi::Object InitModule(Napi::Env env, Napi::Object exports) {
  return vmsnap::Init(env, exports);
}

NODE_API_MODULE(vmsnap_rbd, InitModule)
