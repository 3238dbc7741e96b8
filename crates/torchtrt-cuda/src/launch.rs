//! Kernel launch geometry and arguments.

use std::ffi::c_void;

/// Grid or block dimensions `(x, y, z)`.
pub type Dim3 = (u32, u32, u32);

/// A kernel's arguments in order. Each is stored in its own 8-byte slot, which the driver
/// reads at the parameter's size (little-endian, so smaller scalars sit at the start).
#[derive(Clone, Debug, Default)]
pub struct KernelArgs {
    slots: Vec<u64>,
}

impl KernelArgs {
    /// No arguments yet.
    pub fn new() -> KernelArgs {
        KernelArgs::default()
    }

    /// Appends a device pointer.
    pub fn ptr(mut self, ptr: u64) -> KernelArgs {
        self.slots.push(ptr);
        self
    }

    /// Appends a 64-bit integer.
    pub fn i64(mut self, v: i64) -> KernelArgs {
        self.slots.push(v as u64);
        self
    }

    /// Appends a 32-bit integer.
    pub fn i32(mut self, v: i32) -> KernelArgs {
        self.slots.push(v as u32 as u64);
        self
    }

    /// Appends a 32-bit unsigned integer.
    pub fn u32(mut self, v: u32) -> KernelArgs {
        self.slots.push(v as u64);
        self
    }

    /// Appends a 32-bit float.
    pub fn f32(mut self, v: f32) -> KernelArgs {
        self.slots.push(v.to_bits() as u64);
        self
    }

    pub(crate) fn pointers(&mut self) -> Vec<*mut c_void> {
        self.slots
            .iter_mut()
            .map(|s| s as *mut u64 as *mut c_void)
            .collect()
    }
}
