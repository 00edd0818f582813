// Promise plumbing and handles shared by every binding function.
//
// Each exported function validates its arguments on the JS thread, then runs
// exactly one blocking librbd/librados call (or a short fixed sequence) on an
// addon-owned thread (pool.h) and settles its promise on the JS thread through
// one napi_threadsafe_function per environment.
#pragma once
#include <napi.h>

#include <mutex>
#include <rados/librados.h>
#include <rbd/librbd.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>

namespace vmsnap {

// Here so that the topic files (image.cc, group.cc, ...) need not each declare them.
using Napi::CallbackInfo;
using Napi::Env;
using Napi::Value;

using Converter = std::function<Napi::Value(Napi::Env)>;

// What a blocking call produced: a negative errno plus the C call's name, or a
// converter that builds the JS result on the JS thread.
struct Outcome {
  int r = 0;
  const char* call = "";
  Converter value;
};
inline Outcome Fail(int r, const char* call) { return Outcome{r, call, nullptr}; }
inline Outcome Ok(Converter value = nullptr) { return Outcome{0, "", std::move(value)}; }

// Something delivered to the JS thread through the environment's TSFN.
class Delivery {
 public:
  virtual ~Delivery() = default;
  virtual void Deliver(Napi::Env env) = 0;
};

// Defined in addon.cc, the file that creates the TSFN (see there).
void CallDelivery(Napi::Env env, Napi::Function, void*, Delivery* d);
using Tsfn = Napi::TypedThreadSafeFunction<void, Delivery, CallDelivery>;

// Off the JS thread the TSFN is only touched through its guard. Node frees a TSFN when its
// environment is torn down, even while addon threads still hold it, and the process may exit
// while a job finishes: a Release after that aborted the CLI in uv_mutex_lock (SIGABRT at exit).
// Once the guard is closed (env cleanup hook, atexit, or a call that said napi_closing), no
// thread touches the TSFN again; results not yet delivered are dropped with the process.
class TsfnGuard {
 public:
  // Runs `call` (a napi_status-returning use of the TSFN) unless closed; true if it ran and was ok.
  template <typename F>
  bool Use(F&& call) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return false;
    napi_status s = call();
    if (s == napi_closing) closed_ = true;
    return s == napi_ok;
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }

 private:
  std::mutex mu_;
  bool closed_ = false;
};
std::shared_ptr<TsfnGuard> NewTsfnGuard();  // registered so that process exit closes it

// Progress of a long call (flatten, remove), reported from librbd's threads,
// coalesced (at most one delivery in flight) and passed to a JS callback.
// Also carries the cancel flag: librbd stops when the progress callback
// returns non-zero.
class Progress : public std::enable_shared_from_this<Progress> {
 public:
  Progress(Tsfn tsfn, std::shared_ptr<TsfnGuard> guard, Napi::Function callback);
  ~Progress();
  // Any thread. Returns -ECANCELED once Cancel() was called, else 0.
  int Report(uint64_t done, uint64_t total);
  void Cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  // librbd_progress_fn_t; arg is a Progress*.
  static int Callback(uint64_t done, uint64_t total, void* arg);

 private:
  friend class ProgressDelivery;
  Tsfn tsfn_;
  std::shared_ptr<TsfnGuard> guard_;
  Napi::FunctionReference callback_;  // JS thread only
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> posted_{false};
  std::atomic<uint64_t> done_{0};
  std::atomic<uint64_t> total_{0};
};

using Settled = std::function<void(Napi::Env, const Outcome&)>;

// Runs `work` on an addon thread and settles `deferred` with its outcome.
// `settled` runs on the JS thread just before the promise settles.
void SubmitTo(Napi::Env env, Napi::Promise::Deferred deferred, std::function<Outcome()> work,
              Settled settled = nullptr);
Napi::Promise Submit(Napi::Env env, std::function<Outcome()> work, Settled settled = nullptr);

// Error with .errno (positive), .code ('ENOENT'), .call ('rbd_open'),
// message "rbd_open: ENOENT (2)".
Napi::Error MakeError(Napi::Env env, int r, const char* call);
Napi::Promise Rejected(Napi::Env env, int r, const char* call);

std::shared_ptr<Progress> MakeProgress(Napi::Env env, Napi::Value callback);
// [promise, cancel] for a call that takes a progress callback (long-call.ts unpacks it).
Napi::Value WithCancel(Napi::Env env, Napi::Value promise, std::shared_ptr<Progress> progress);

// Process-wide counts of native resources not yet released, for tests: each successful
// rados_connect/rados_ioctx_create/rbd_open is matched by exactly one release.
struct LiveCounts {
  std::atomic<long> clusters{0};
  std::atomic<long> ioctxs{0};
  std::atomic<long> images{0};
};
LiveCounts& Live();

// Test hook: the next ReleaseImage reports -err after its (real) rbd_close. librbd's own close
// errors are rare and timing-bound (a blocklisted client's close returned 0 in every probe);
// this makes the addon's close-error path reachable on purpose.
void InjectCloseError(int err);

// A rados_t shared by the cluster handle and every ioctx/image opened from it.
//
// Ownership: every resource is released exactly once, by the Release* call here, and the C call
// frees it whatever it returns (rbd_close deletes the ImageCtx even when it reports an error).
// `children` counts the ioctx and image resources not yet released; shutdown needs it at 0.
struct ClusterCore {
  explicit ClusterCore(rados_t c);
  ~ClusterCore();  // shuts down on an addon thread if nobody did
  ClusterCore(const ClusterCore&) = delete;
  ClusterCore& operator=(const ClusterCore&) = delete;

  void AdoptIoCtx();  // after a successful rados_ioctx_create
  void AdoptImage();  // after a successful rbd_open
  void ReleaseIoCtx(rados_ioctx_t io);
  int ReleaseImage(rbd_image_t img);  // rbd_close's result
  void Shutdown();                    // rados_shutdown; only with children == 0

  rados_t const cluster;
  std::atomic<int> children{0};
  std::atomic<bool> shut{false};
};

enum class Kind { Cluster, IoCtx, Image };

// The JS object behind RadosCluster/IoCtx/Image. Tracks calls in flight so
// that close waits for them, and keeps itself alive while they run.
class Handle : public Napi::ObjectWrap<Handle> {
 public:
  static Napi::Function Define(Napi::Env env);
  static Napi::Object Create(Napi::Env env, Kind kind, std::shared_ptr<ClusterCore> core,
                             rados_ioctx_t io, rbd_image_t image);
  static Handle* Arg(const Napi::CallbackInfo& info, size_t i, Kind kind);

  explicit Handle(const Napi::CallbackInfo& info);
  void Finalize(Napi::Env env) override;

  // Runs `work` while this handle is open; EBADF (named `call`) when closed.
  Napi::Value Use(Napi::Env env, const char* call, std::function<Outcome()> work,
                  Settled settled = nullptr);
  // Marks the handle closing now (later calls get EBADF) and runs `closer` once the calls in
  // flight have settled. `ready` (JS thread) is asked now and again just before `closer`
  // starts: false rejects EBUSY and leaves the handle open. Once `closer` starts, the handle
  // is closed whatever it returns (its error is the promise's rejection).
  Napi::Value Close(Napi::Env env, const char* call, std::function<Outcome()> closer,
                    std::function<bool()> ready = nullptr);

  // Counts a call that uses this handle as a secondary argument (the child
  // ioctx of rbd_clone3) so that close waits for it. False when closed.
  bool Pin();
  bool IsOpen() const { return !closing_ && !closed_; }
  void Unpin(Napi::Env env);

  Kind kind = Kind::Cluster;
  std::shared_ptr<ClusterCore> core;
  rados_ioctx_t io = nullptr;
  rbd_image_t image = nullptr;

 private:
  size_t inflight_ = 0;
  bool closing_ = false;
  bool closed_ = false;
  std::function<void(Napi::Env)> pending_close_;
};

struct EnvData {
  Tsfn tsfn;
  std::shared_ptr<TsfnGuard> guard;
  size_t pending = 0;
  Napi::FunctionReference handle_ctor;
};
EnvData* GetEnvData(Napi::Env env);

std::string StringArg(const Napi::CallbackInfo& info, size_t i);
uint64_t Uint64Arg(const Napi::CallbackInfo& info, size_t i);

// A JS name and the function behind it; each topic file registers its table with ExportAll.
struct Export {
  const char* name;
  Napi::Value (*fn)(const Napi::CallbackInfo&);
};
void ExportAll(Napi::Env env, Napi::Object exports, std::initializer_list<Export> fns);

// One per topic file (cluster.cc, image.cc, ...), called by addon.cc's Init.
void RegisterCluster(Napi::Env env, Napi::Object exports);
void RegisterImage(Napi::Env env, Napi::Object exports);
void RegisterSnapshot(Napi::Env env, Napi::Object exports);
void RegisterClone(Napi::Env env, Napi::Object exports);
void RegisterFlatten(Napi::Env env, Napi::Object exports);
void RegisterMetadata(Napi::Env env, Napi::Object exports);
void RegisterIo(Napi::Env env, Napi::Object exports);
void RegisterGroup(Napi::Env env, Napi::Object exports);
void RegisterMirror(Napi::Env env, Napi::Object exports);

}  // namespace vmsnap
