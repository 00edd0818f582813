// rbd_image_options_t from a call's JS arguments, for rbd_create4 (image.cc) and rbd_clone3
// (clone.cc).
#pragma once
#include <napi.h>
#include <rbd/librbd.h>

#include <cstddef>
#include <cstdint>

namespace vmsnap {

// Read (and validated: a bad argument throws) on the JS thread; the job builds the
// rbd_image_options_t, so nothing needs freeing when an argument throws.
struct CreateOpts {
  bool has_order = false, has_features = false, has_format = false;
  uint64_t order = 0, features = 0, format = 0;
};

// An absent (null/undefined) argument leaves the option to librbd's default. format_i 0: the
// call takes no clone format.
CreateOpts ReadCreateOpts(const Napi::CallbackInfo& info, size_t order_i, size_t features_i,
                          size_t format_i);

// The caller destroys the result (rbd_image_options_destroy).
rbd_image_options_t ToRbdOptions(const CreateOpts& o);

}  // namespace vmsnap
