// librbd flatten: copy a clone's parent data into it and drop the link (a long, cancellable call).
#include <cerrno>

#include "core.h"

namespace vmsnap {
namespace {

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

void RegisterFlatten(Env env, Napi::Object exports) {
  ExportAll(env, exports, {
      {"flatten", Flatten},
  });
}

}  // namespace vmsnap
