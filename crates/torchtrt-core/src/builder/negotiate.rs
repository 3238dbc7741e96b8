//! Plugin format negotiation: pick input dtypes each plugin supports (inserting casts),
//! the device it runs on, and configure it.

use std::sync::Arc;

use torchtrt_plugin_api::{DType, DeviceKind, PortDesc, TensorDesc};

use super::{BuildConfig, Work};
use crate::error::{Error, Result};
use crate::layers::{PluginLayer, TypeShape};
use crate::network::TensorId;
use crate::registry::guard_plugin;

fn layer_error(name: &str, message: String) -> Error {
    Error::Layer {
        layer: name.to_string(),
        kind: "Plugin",
        message,
    }
}

/// Chooses the device and input dtypes for a plugin layer, casting inputs where the plugin
/// needs another dtype. Tries the target device first, then the CPU.
pub(crate) fn plugin_inputs(
    work: &mut Work,
    name: &str,
    layer: &mut PluginLayer,
    inputs: &mut [TensorId],
    config: &BuildConfig,
) -> Result<DeviceKind> {
    let plugin = layer.plugin().map_err(|m| layer_error(name, m))?.clone();
    let n = inputs.len();
    let mut devices = vec![config.device];
    if config.device != DeviceKind::Cpu {
        devices.push(DeviceKind::Cpu);
    }
    let mut failure = String::new();
    for device in devices {
        let mut io: Vec<PortDesc> = Vec::with_capacity(n);
        for (pos, t) in inputs.iter().enumerate() {
            let dtype = work.ty(*t).dtype;
            let mut candidates = vec![dtype];
            if dtype.is_float() {
                candidates.extend([config.precision, DType::F32, DType::F16, DType::BF16]);
            }
            let chosen = candidates.into_iter().find(|&c| {
                io.push(PortDesc::linear(c));
                let ok = guard_plugin(|| Ok(plugin.supports(pos, &io, n, device))).unwrap_or(false);
                io.pop();
                ok
            });
            match chosen {
                Some(c) => io.push(PortDesc::linear(c)),
                None => {
                    failure = format!(
                        "plugin {} does not accept {dtype} at input {pos} on {device}",
                        layer.key
                    );
                    break;
                }
            }
        }
        if io.len() == n {
            for (t, port) in inputs.iter_mut().zip(&io) {
                if work.ty(*t).dtype != port.dtype {
                    *t = work.emit_cast(*t, port.dtype, device)?;
                }
            }
            return Ok(device);
        }
    }
    Err(layer_error(name, failure))
}

/// Checks the plugin accepts its output dtypes and configures a copy of it with the
/// build-time descriptions.
pub(crate) fn configure(
    work: &Work,
    name: &str,
    layer: &mut PluginLayer,
    inputs: &[TensorId],
    outputs: &[TypeShape],
    device: DeviceKind,
) -> Result<()> {
    let plugin = layer.plugin().map_err(|m| layer_error(name, m))?.clone();
    let in_descs: Vec<TensorDesc> = inputs.iter().map(|&t| work.ty(t).build_desc()).collect();
    let out_descs: Vec<TensorDesc> = outputs.iter().map(TypeShape::build_desc).collect();
    let io: Vec<PortDesc> = in_descs
        .iter()
        .chain(&out_descs)
        .map(TensorDesc::port)
        .collect();
    for pos in inputs.len()..io.len() {
        let ok = guard_plugin(|| Ok(plugin.supports(pos, &io[..=pos], inputs.len(), device)))
            .unwrap_or(false);
        if !ok {
            return Err(layer_error(
                name,
                format!(
                    "plugin {} does not accept {} at output {} on {device}",
                    layer.key,
                    io[pos].dtype,
                    pos - inputs.len()
                ),
            ));
        }
    }
    let configured = guard_plugin(|| {
        let mut p = plugin.clone_plugin();
        p.configure(&in_descs, &out_descs)?;
        Ok(p)
    })
    .map_err(|source| Error::Plugin {
        context: format!("layer `{name}` (plugin {})", layer.key),
        source,
    })?;
    layer.fields = configured.fields_to_serialize();
    layer.set_plugin(Arc::from(configured));
    Ok(())
}
