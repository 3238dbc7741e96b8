//! Kernel-plugin specs built in code: the same spec a TOML file gives, written with Rust
//! calls and rendered to that TOML, so it goes through the same checks and an engine
//! carries it the same way.
//!
//! ```ignore
//! let creator = SpecBuilder::new("example", "Scale", "1")
//!     .types("T", &[DType::F32])
//!     .float_field("alpha", Some(2.0), "the factor")
//!     .input("x", "T")
//!     .output_like("y", "T", "x")
//!     .cpu(Device::new(C_SOURCE).kernel(KernelDef::new("scale_{T}").args(&["x", "y", "numel(x)", "alpha"])))
//!     .build()?;
//! ```

use std::fmt::Write as _;

use torchtrt_plugin_api::DType;

use super::package::load_spec_text;
use super::plugin::KernelPluginCreator;

/// One kernel of a [`Device`].
#[derive(Clone, Debug, Default)]
pub struct KernelDef {
    name: String,
    tactic: Option<String>,
    args: Vec<String>,
    grid: Vec<String>,
    block: Vec<String>,
    shared_bytes: Option<String>,
}

impl KernelDef {
    /// A kernel calling the function `name` (`{T}` stands for a type variable's dtype).
    pub fn new(name: &str) -> KernelDef {
        KernelDef {
            name: name.to_string(),
            ..KernelDef::default()
        }
    }

    /// Its tactic name (default: the function name).
    pub fn tactic(mut self, tactic: &str) -> KernelDef {
        self.tactic = Some(tactic.to_string());
        self
    }

    /// Its arguments: port names, float field names, integer expressions.
    pub fn args(mut self, args: &[&str]) -> KernelDef {
        self.args = args.iter().map(|a| a.to_string()).collect();
        self
    }

    /// The CUDA launch: grid and block (1 to 3 expressions each).
    pub fn launch(mut self, grid: &[&str], block: &[&str]) -> KernelDef {
        self.grid = grid.iter().map(|a| a.to_string()).collect();
        self.block = block.iter().map(|a| a.to_string()).collect();
        self
    }

    /// Dynamic shared memory per block, an expression (CUDA).
    pub fn shared_bytes(mut self, bytes: &str) -> KernelDef {
        self.shared_bytes = Some(bytes.to_string());
        self
    }
}

/// A device's part of a spec: its source, dtype subsets, flags and kernels.
#[derive(Clone, Debug, Default)]
pub struct Device {
    source: String,
    types: Vec<(String, Vec<DType>)>,
    cflags: Vec<String>,
    prelude: bool,
    kernels: Vec<KernelDef>,
}

impl Device {
    /// A part with this C (CPU) or CUDA C source.
    pub fn new(source: &str) -> Device {
        Device {
            source: source.to_string(),
            ..Device::default()
        }
    }

    /// The dtypes of type variable `var` this device implements.
    pub fn types(mut self, var: &str, dtypes: &[DType]) -> Device {
        self.types.push((var.to_string(), dtypes.to_vec()));
        self
    }

    /// An extra C compiler option (CPU).
    pub fn cflag(mut self, flag: &str) -> Device {
        self.cflags.push(flag.to_string());
        self
    }

    /// Prepends torchtrt's CUDA C elements (CUDA).
    pub fn prelude(mut self) -> Device {
        self.prelude = true;
        self
    }

    /// Adds a kernel; the first is the default, more are tactics.
    pub fn kernel(mut self, kernel: KernelDef) -> Device {
        self.kernels.push(kernel);
        self
    }
}

/// How an output's shape is given.
#[derive(Clone, Debug)]
enum Shape {
    Dims(Vec<String>),
    Like(String),
    Alias(String),
}

/// A kernel-plugin spec built in code.
#[derive(Clone, Debug)]
pub struct SpecBuilder {
    key: [String; 3],
    doc: String,
    types: Vec<(String, Vec<DType>)>,
    fields: Vec<(String, &'static str, Option<String>, String)>,
    inputs: Vec<(String, String, bool)>,
    outputs: Vec<(String, String, Shape)>,
    cpu: Option<Device>,
    cuda: Option<Device>,
}

impl SpecBuilder {
    /// A spec for the key `namespace::name@version`.
    pub fn new(namespace: &str, name: &str, version: &str) -> SpecBuilder {
        SpecBuilder {
            key: [namespace.into(), name.into(), version.into()],
            doc: String::new(),
            types: Vec::new(),
            fields: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            cpu: None,
            cuda: None,
        }
    }

    /// What it computes.
    pub fn doc(mut self, doc: &str) -> SpecBuilder {
        self.doc = doc.to_string();
        self
    }

    /// A type variable and the dtypes it may take.
    pub fn types(mut self, var: &str, dtypes: &[DType]) -> SpecBuilder {
        self.types.push((var.to_string(), dtypes.to_vec()));
        self
    }

    /// An integer (i64) field, with its default when it has one.
    pub fn int_field(mut self, name: &str, default: Option<i64>, doc: &str) -> SpecBuilder {
        let default = default.map(|v| v.to_string());
        self.fields
            .push((name.to_string(), "i64", default, doc.to_string()));
        self
    }

    /// A float (f32) field, with its default when it has one.
    pub fn float_field(mut self, name: &str, default: Option<f32>, doc: &str) -> SpecBuilder {
        let default = default.map(|v| format!("{:?}", f64::from(v)));
        self.fields
            .push((name.to_string(), "f32", default, doc.to_string()));
        self
    }

    /// An input of a dtype name (`f32`) or type variable (`T`).
    pub fn input(mut self, name: &str, dtype: &str) -> SpecBuilder {
        self.inputs
            .push((name.to_string(), dtype.to_string(), false));
        self
    }

    /// A shape input (i64 or i32) whose values may size outputs.
    pub fn shape_input(mut self, name: &str, dtype: &str) -> SpecBuilder {
        self.inputs
            .push((name.to_string(), dtype.to_string(), true));
        self
    }

    /// An output whose dimensions are these entries (expressions or input-shape slices).
    pub fn output(mut self, name: &str, dtype: &str, dims: &[&str]) -> SpecBuilder {
        let dims = dims.iter().map(|d| d.to_string()).collect();
        self.outputs
            .push((name.to_string(), dtype.to_string(), Shape::Dims(dims)));
        self
    }

    /// An output of input `like`'s shape.
    pub fn output_like(mut self, name: &str, dtype: &str, like: &str) -> SpecBuilder {
        let shape = Shape::Like(like.to_string());
        self.outputs
            .push((name.to_string(), dtype.to_string(), shape));
        self
    }

    /// An output aliasing input `input` (updated in place).
    pub fn output_alias(mut self, name: &str, dtype: &str, input: &str) -> SpecBuilder {
        let shape = Shape::Alias(input.to_string());
        self.outputs
            .push((name.to_string(), dtype.to_string(), shape));
        self
    }

    /// The CPU part.
    pub fn cpu(mut self, device: Device) -> SpecBuilder {
        self.cpu = Some(device);
        self
    }

    /// The CUDA part.
    pub fn cuda(mut self, device: Device) -> SpecBuilder {
        self.cuda = Some(device);
        self
    }

    /// The spec as TOML, as a file would give it.
    pub fn to_toml(&self) -> String {
        let mut t = String::new();
        let [ns, name, version] = &self.key;
        let _ = writeln!(t, "namespace = {}", quote(ns));
        let _ = writeln!(t, "name = {}", quote(name));
        let _ = writeln!(t, "version = {}", quote(version));
        let _ = writeln!(t, "doc = {}", quote(&self.doc));
        if !self.types.is_empty() {
            t.push_str("[types]\n");
            for (var, dtypes) in &self.types {
                let _ = writeln!(t, "{} = {}", quote(var), dtype_list(dtypes));
            }
        }
        for (name, ty, default, doc) in &self.fields {
            let _ = writeln!(t, "[[fields]]\nname = {}\ntype = \"{ty}\"", quote(name));
            if let Some(d) = default {
                let _ = writeln!(t, "default = {d}");
            }
            let _ = writeln!(t, "doc = {}", quote(doc));
        }
        for (name, dtype, shape_input) in &self.inputs {
            let _ = writeln!(
                t,
                "[[inputs]]\nname = {}\ndtype = {}\nshape_input = {shape_input}",
                quote(name),
                quote(dtype)
            );
        }
        for (name, dtype, shape) in &self.outputs {
            let _ = writeln!(
                t,
                "[[outputs]]\nname = {}\ndtype = {}",
                quote(name),
                quote(dtype)
            );
            let _ = match shape {
                Shape::Dims(d) => writeln!(t, "shape = {}", list(d)),
                Shape::Like(i) => writeln!(t, "like = {}", quote(i)),
                Shape::Alias(i) => writeln!(t, "alias = {}", quote(i)),
            };
        }
        for (table, device) in [("cpu", &self.cpu), ("cuda", &self.cuda)] {
            let Some(d) = device else { continue };
            let _ = writeln!(t, "[{table}]\nsource = {}", quote(&d.source));
            if !d.cflags.is_empty() {
                let _ = writeln!(t, "cflags = {}", list(&d.cflags));
            }
            if d.prelude {
                t.push_str("prelude = true\n");
            }
            if !d.types.is_empty() {
                let entries: Vec<String> = d
                    .types
                    .iter()
                    .map(|(v, ds)| format!("{} = {}", quote(v), dtype_list(ds)))
                    .collect();
                let _ = writeln!(t, "types = {{ {} }}", entries.join(", "));
            }
            for k in &d.kernels {
                let _ = writeln!(t, "[[{table}.kernels]]\nname = {}", quote(&k.name));
                if let Some(tactic) = &k.tactic {
                    let _ = writeln!(t, "tactic = {}", quote(tactic));
                }
                let _ = writeln!(t, "args = {}", list(&k.args));
                if !k.grid.is_empty() {
                    let _ = writeln!(t, "grid = {}\nblock = {}", list(&k.grid), list(&k.block));
                }
                if let Some(s) = &k.shared_bytes {
                    let _ = writeln!(t, "shared_bytes = {}", quote(s));
                }
            }
        }
        t
    }

    /// Checks the spec, compiles its CPU part, and returns its creator (as
    /// [`super::load_spec`] does for a file).
    pub fn build(&self) -> Result<KernelPluginCreator, String> {
        load_spec_text(&self.to_toml(), &[])
    }
}

/// `s` as a TOML basic string.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| quote(s)).collect();
    format!("[{}]", quoted.join(", "))
}

fn dtype_list(dtypes: &[DType]) -> String {
    let names: Vec<String> = dtypes.iter().map(|d| d.name().to_string()).collect();
    list(&names)
}
