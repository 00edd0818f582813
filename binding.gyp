{
  "targets": [
    {
      "target_name": "vmsnap_rbd",
      "sources": [
        "native/addon.cc",
        "native/core.cc",
        "native/pool.cc",
        "native/cluster.cc",
        "native/options.cc",
        "native/image.cc",
        "native/snapshot.cc",
        "native/clone.cc",
        "native/flatten.cc",
        "native/metadata.cc",
        "native/io.cc",
        "native/group.cc",
        "native/mirror.cc",
        "native/sha256.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions"],
      "cflags_cc": ["-std=c++17", "-fexceptions", "-Wall", "-Wno-unused-parameter"],
      "libraries": ["-lrbd", "-lrados", "-lpthread"]
    }
  ]
}
