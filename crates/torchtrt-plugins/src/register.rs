//! The built-in plugins: one line per creator (the seeds' `register_plugins.cpp`).

use std::sync::Arc;

use torchtrt_plugin_api::PluginCreator;

/// Every built-in plugin creator.
pub fn creators() -> Vec<Arc<dyn PluginCreator>> {
    vec![
        Arc::new(crate::interpolate::InterpolateCreator),
        Arc::new(crate::normalize::NormalizeCreator),
        Arc::new(crate::instance_norm::InstanceNormCreator),
        Arc::new(crate::gelu::GeluCreator),
        Arc::new(crate::nms::NmsCreator),
    ]
}
