// rbd_image_options_t from a call's JS arguments (see options.h).
#include "options.h"

#include "core.h"

namespace vmsnap {
namespace {

bool Present(const Napi::CallbackInfo& info, size_t i) {
  return info.Length() > i && !info[i].IsNull() && !info[i].IsUndefined();
}

}  // namespace

CreateOpts ReadCreateOpts(const Napi::CallbackInfo& info, size_t order_i, size_t features_i,
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

}  // namespace vmsnap
