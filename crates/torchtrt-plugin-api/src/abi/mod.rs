//! The C ABI (see `include/torchtrt_plugin.h`).
