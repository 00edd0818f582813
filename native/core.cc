#include "core.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "pool.h"

namespace vmsnap {

EnvData* GetEnvData(Napi::Env env) { return env.GetInstanceData<EnvData>(); }

namespace {
// Never destroyed: pool threads and the atexit handler may use them during process exit.
std::mutex* const g_guards_mu = new std::mutex();
std::vector<std::weak_ptr<TsfnGuard>>* const g_guards = new std::vector<std::weak_ptr<TsfnGuard>>();

void CloseAllGuards() {
  std::lock_guard<std::mutex> lock(*g_guards_mu);
  for (auto& w : *g_guards) {
    if (auto g = w.lock()) g->Close();
  }
}
}  // namespace

std::shared_ptr<TsfnGuard> NewTsfnGuard() {
  static const bool registered = (std::atexit(CloseAllGuards), true);
  (void)registered;
  auto g = std::make_shared<TsfnGuard>();
  std::lock_guard<std::mutex> lock(*g_guards_mu);
  g_guards->push_back(g);
  return g;
}

Napi::Error MakeError(Napi::Env env, int r, const char* call) {
  int e = r < 0 ? -r : r;
  const char* name = strerrorname_np(e);
  std::string code = name ? name : "E" + std::to_string(e);
  std::string msg = std::string(call) + ": " + code + " (" + std::to_string(e) + ")";
  Napi::Error err = Napi::Error::New(env, msg);
  err.Set("errno", Napi::Number::New(env, e));
  err.Set("code", Napi::String::New(env, code));
  err.Set("call", Napi::String::New(env, call));
  return err;
}

Napi::Promise Rejected(Napi::Env env, int r, const char* call) {
  auto d = Napi::Promise::Deferred::New(env);
  d.Reject(MakeError(env, r, call).Value());
  return d.Promise();
}

namespace {

class Job : public Delivery {
 public:
  Job(Napi::Promise::Deferred deferred, std::function<Outcome()> work, Settled settled)
      : deferred_(deferred), work_(std::move(work)), settled_(std::move(settled)) {}

  void Run() {
    try {
      outcome_ = work_();
    } catch (const std::exception&) {
      outcome_ = Fail(-EIO, "vmsnap_rbd_internal");
    }
  }

  void Deliver(Napi::Env env) override {
    EnvData* data = GetEnvData(env);
    if (--data->pending == 0) data->tsfn.Unref(env);
    Napi::HandleScope scope(env);
    if (settled_) settled_(env, outcome_);
    if (outcome_.r < 0) {
      deferred_.Reject(MakeError(env, outcome_.r, outcome_.call).Value());
      return;
    }
    try {
      deferred_.Resolve(outcome_.value ? outcome_.value(env) : env.Undefined());
    } catch (const Napi::Error& e) {
      deferred_.Reject(e.Value());
    }
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::function<Outcome()> work_;
  Settled settled_;
  Outcome outcome_;
};

}  // namespace

void SubmitTo(Napi::Env env, Napi::Promise::Deferred deferred, std::function<Outcome()> work,
              Settled settled) {
  EnvData* data = GetEnvData(env);
  if (data->pending++ == 0) data->tsfn.Ref(env);
  Tsfn tsfn = data->tsfn;
  std::shared_ptr<TsfnGuard> guard = data->guard;
  tsfn.Acquire();  // keeps the TSFN valid for this job while the environment lives
  Job* job = new Job(deferred, std::move(work), std::move(settled));
  PoolPost([job, tsfn, guard]() mutable {
    job->Run();
    if (!guard->Use([&] { return tsfn.BlockingCall(job); })) {
      // Environment is going away; the job (holding JS references) is leaked.
    }
    guard->Use([&] { return tsfn.Release(); });
  });
}

Napi::Promise Submit(Napi::Env env, std::function<Outcome()> work, Settled settled) {
  auto deferred = Napi::Promise::Deferred::New(env);
  SubmitTo(env, deferred, std::move(work), std::move(settled));
  return deferred.Promise();
}

// ---- progress ------------------------------------------------------------

class ProgressDelivery : public Delivery {
 public:
  explicit ProgressDelivery(std::shared_ptr<Progress> p) : p_(std::move(p)) {}
  void Deliver(Napi::Env env) override {
    p_->posted_ = false;
    if (p_->callback_.IsEmpty()) return;
    Napi::HandleScope scope(env);
    try {
      p_->callback_.Call({Napi::Number::New(env, static_cast<double>(p_->done_.load())),
                          Napi::Number::New(env, static_cast<double>(p_->total_.load()))});
    } catch (const Napi::Error&) {
      // The TypeScript facade catches callback errors itself; nothing to do.
    }
  }

 private:
  std::shared_ptr<Progress> p_;
};

Progress::Progress(Tsfn tsfn, std::shared_ptr<TsfnGuard> guard, Napi::Function callback)
    : tsfn_(tsfn), guard_(std::move(guard)) {
  if (!callback.IsEmpty()) callback_ = Napi::Persistent(callback);
}

Progress::~Progress() {}

int Progress::Report(uint64_t done, uint64_t total) {
  done_ = done;
  total_ = total;
  if (!callback_.IsEmpty() && !posted_.exchange(true)) {
    // Only called while the owning job runs, i.e. while it holds the TSFN.
    auto* d = new ProgressDelivery(shared_from_this());
    if (!guard_->Use([&] { return tsfn_.NonBlockingCall(d); })) {
      posted_ = false;
    }
  }
  return cancelled_ ? -ECANCELED : 0;
}

int Progress::Callback(uint64_t done, uint64_t total, void* arg) {
  return static_cast<Progress*>(arg)->Report(done, total);
}

std::shared_ptr<Progress> MakeProgress(Napi::Env env, Napi::Value callback) {
  Napi::Function fn;
  if (callback.IsFunction()) fn = callback.As<Napi::Function>();
  EnvData* data = GetEnvData(env);
  return std::make_shared<Progress>(data->tsfn, data->guard, fn);
}

Napi::Value WithCancel(Napi::Env env, Napi::Value promise, std::shared_ptr<Progress> progress) {
  Napi::Array out = Napi::Array::New(env, 2);
  out.Set(0u, promise);
  out.Set(1u, Napi::Function::New(env, [progress](const Napi::CallbackInfo& info) {
            progress->Cancel();
            return info.Env().Undefined();
          }));
  return out;
}

// ---- handles -------------------------------------------------------------

LiveCounts& Live() {
  static LiveCounts* counts = new LiveCounts();  // never destroyed: pool threads use it at exit
  return *counts;
}

namespace {
std::atomic<int> g_close_error{0};
}  // namespace

void InjectCloseError(int err) { g_close_error = err; }

ClusterCore::ClusterCore(rados_t c) : cluster(c) { ++Live().clusters; }

ClusterCore::~ClusterCore() {
  if (!shut) {
    rados_t c = cluster;
    PoolPost([c] {
      rados_shutdown(c);
      --Live().clusters;
    });
  }
}

void ClusterCore::AdoptIoCtx() {
  ++children;
  ++Live().ioctxs;
}

void ClusterCore::AdoptImage() {
  ++children;
  ++Live().images;
}

void ClusterCore::ReleaseIoCtx(rados_ioctx_t io) {
  rados_ioctx_destroy(io);
  --Live().ioctxs;
  --children;
}

int ClusterCore::ReleaseImage(rbd_image_t img) {
  int r = rbd_close(img);
  if (int injected = g_close_error.exchange(0)) r = -injected;
  --Live().images;
  --children;
  return r;
}

void ClusterCore::Shutdown() {
  rados_shutdown(cluster);
  shut = true;
  --Live().clusters;
}

Napi::Function Handle::Define(Napi::Env env) {
  return DefineClass(env, "RbdNativeHandle", {});
}

Handle::Handle(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Handle>(info) {}

Napi::Object Handle::Create(Napi::Env env, Kind kind, std::shared_ptr<ClusterCore> core,
                            rados_ioctx_t io, rbd_image_t image) {
  Napi::Object obj;
  try {
    obj = GetEnvData(env)->handle_ctor.New({});
  } catch (...) {
    // No JS object will own it: release it here, once, as close would.
    std::shared_ptr<ClusterCore> c = core;
    if (image != nullptr) PoolPost([c, image] { c->ReleaseImage(image); });
    if (io != nullptr) PoolPost([c, io] { c->ReleaseIoCtx(io); });
    throw;
  }
  Handle* h = Unwrap(obj);
  h->kind = kind;
  h->core = std::move(core);
  h->io = io;
  h->image = image;
  return obj;
}

Handle* Handle::Arg(const Napi::CallbackInfo& info, size_t i, Kind kind) {
  Napi::Env env = info.Env();
  if (info.Length() <= i || !info[i].IsObject() ||
      !info[i].As<Napi::Object>().InstanceOf(GetEnvData(env)->handle_ctor.Value())) {
    throw Napi::TypeError::New(env, "argument " + std::to_string(i) + " must be a native handle");
  }
  Handle* h = Unwrap(info[i].As<Napi::Object>());
  if (h->kind != kind) throw Napi::TypeError::New(env, "wrong kind of native handle");
  return h;
}

Napi::Value Handle::Use(Napi::Env env, const char* call, std::function<Outcome()> work,
                        Settled settled) {
  if (!IsOpen()) return Rejected(env, -EBADF, call);
  Pin();
  return Submit(env, std::move(work), [this, settled](Napi::Env env, const Outcome& o) {
    if (settled) settled(env, o);
    Unpin(env);
  });
}

bool Handle::Pin() {
  if (!IsOpen()) return false;
  ++inflight_;
  Ref();
  return true;
}

void Handle::Unpin(Napi::Env env) {
  Unref();
  if (--inflight_ == 0 && pending_close_) {
    auto start = std::move(pending_close_);
    pending_close_ = nullptr;
    start(env);
  }
}

Napi::Value Handle::Close(Napi::Env env, const char* call, std::function<Outcome()> closer,
                          std::function<bool()> ready) {
  if (!IsOpen()) return Rejected(env, -EBADF, call);
  if (ready && !ready()) return Rejected(env, -EBUSY, call);
  closing_ = true;
  Ref();
  auto deferred = Napi::Promise::Deferred::New(env);
  auto start = [this, deferred, call, closer, ready](Napi::Env env) {
    // Asked again once the calls in flight have settled: one of them may have opened a child.
    if (ready && !ready()) {
      closing_ = false;
      deferred.Reject(MakeError(env, -EBUSY, call).Value());
      Unref();
      return;
    }
    // From here the resource belongs to `closer`, and the C call frees it whatever it returns:
    // the handle is closed now, for later calls and for the finalizer alike.
    closed_ = true;
    io = nullptr;
    image = nullptr;
    SubmitTo(env, deferred, closer, [this](Napi::Env, const Outcome&) {
      core.reset();  // a dropped connection may shut down once its last child is gone
      Unref();
    });
  };
  if (inflight_ == 0) {
    start(env);
  } else {
    pending_close_ = start;
  }
  return deferred.Promise();
}

void Handle::Finalize(Napi::Env) {
  // Garbage-collected without close(): release the resource on an addon thread. Closed handles
  // own nothing. Calls in flight or a pending close only reach here at environment teardown
  // (both hold a reference): the resource is left to the process rather than freed under them.
  if (closed_ || closing_ || inflight_ > 0) return;
  closed_ = true;
  std::shared_ptr<ClusterCore> c = core;
  if (kind == Kind::Image && image != nullptr) {
    rbd_image_t img = image;
    PoolPost([img, c] { c->ReleaseImage(img); });
  } else if (kind == Kind::IoCtx && io != nullptr) {
    rados_ioctx_t i = io;
    PoolPost([i, c] { c->ReleaseIoCtx(i); });
  }
  image = nullptr;
  io = nullptr;
  // Kind::Cluster: dropping `core` shuts the cluster down once no child holds it.
}

// ---- argument helpers ----------------------------------------------------

std::string StringArg(const Napi::CallbackInfo& info, size_t i) {
  if (info.Length() <= i || !info[i].IsString()) {
    throw Napi::TypeError::New(info.Env(), "argument " + std::to_string(i) + " must be a string");
  }
  return info[i].As<Napi::String>().Utf8Value();
}

uint64_t Uint64Arg(const Napi::CallbackInfo& info, size_t i) {
  if (info.Length() > i && info[i].IsBigInt()) {
    bool lossless = false;
    uint64_t v = info[i].As<Napi::BigInt>().Uint64Value(&lossless);
    if (lossless) return v;
  } else if (info.Length() > i && info[i].IsNumber()) {
    double d = info[i].As<Napi::Number>().DoubleValue();
    if (d >= 0 && d <= 9007199254740991.0 && d == static_cast<double>(static_cast<uint64_t>(d))) {
      return static_cast<uint64_t>(d);
    }
  }
  throw Napi::TypeError::New(info.Env(), "argument " + std::to_string(i) +
                                             " must be a non-negative integer or bigint");
}

void ExportAll(Napi::Env env, Napi::Object exports, std::initializer_list<Export> fns) {
  for (const Export& e : fns) exports.Set(e.name, Napi::Function::New(env, e.fn, e.name));
}

}  // namespace vmsnap
