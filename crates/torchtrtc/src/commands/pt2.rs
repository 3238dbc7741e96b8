//! `.pt2` programs (`torch.export` archives) for `compile`, `run`, `bench` and `inspect`.

use std::path::Path;

use anyhow::{Context, Result, bail};
use torchtrt::torch::{self, Program};
use torchtrt::{Dim, Engine};

use crate::BuildOptions;
use crate::progress::Progress;

/// Whether `path` is a `.pt2` archive (by extension, or a zip's signature).
pub fn is_pt2(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "pt2")
        || std::fs::File::open(path)
            .and_then(|mut f| {
                let mut magic = [0u8; 4];
                std::io::Read::read_exact(&mut f, &mut magic).map(|_| magic == *b"PK\x03\x04")
            })
            .unwrap_or(false)
}

/// Imports and compiles a program. Inputs are the program's user inputs by name; their
/// dynamic dims span the program's range constraints unless `--input` narrows them, and
/// `shapes` (the tensors `run` was given) fix them.
pub fn compile_pt2(
    path: &Path,
    opts: &BuildOptions,
    shapes: &[(String, Vec<usize>)],
    progress: &Progress,
) -> Result<Engine> {
    progress.stage("reading program");
    let program =
        torch::load_program(path).with_context(|| format!("importing {}", path.display()))?;
    let inputs = program.user_inputs()?;
    let names = || {
        inputs
            .iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut options = torch::ImportOptions::default();
    for spec in &opts.input_shapes {
        let (name, dims) = crate::args::parse_input_shape(spec)?;
        if !inputs.iter().any(|i| i.name == name) {
            bail!(
                "--input {spec}: the program has no input `{name}` (inputs: {})",
                names()
            );
        }
        options.input_dims.insert(name, dims);
    }
    for (name, shape) in shapes {
        let Some(input) = inputs.iter().find(|i| i.name == *name) else {
            bail!(
                "--input {name}: the program has no input `{name}` (inputs: {})",
                names()
            );
        };
        if options.input_dims.contains_key(name) {
            continue;
        }
        let allowed = program.input_dims(input, options.default_max)?;
        check_shape(name, &allowed, shape)?;
        let fixed = shape.iter().map(|&d| Dim::Fixed(d as i64)).collect();
        options.input_dims.insert(name.clone(), fixed);
    }
    progress.stage("converting");
    let net = torchtrt::import_program(&program, options)
        .with_context(|| format!("importing {}", path.display()))?;
    progress.stage("building");
    super::build_network(&net, opts)
        .with_context(|| format!("compiling {} for {}", path.display(), opts.device))
}

/// Checks a given tensor's shape against the dims the program allows for that input.
fn check_shape(name: &str, allowed: &[Dim], shape: &[usize]) -> Result<()> {
    let fits = allowed.len() == shape.len()
        && allowed.iter().zip(shape).all(|(d, &s)| {
            let (min, _, max) = d.range();
            (min..=max).contains(&(s as i64))
        });
    if !fits {
        let want: Vec<String> = allowed.iter().map(format_dim).collect();
        let got: Vec<String> = shape.iter().map(ToString::to_string).collect();
        bail!(
            "input `{name}` has shape [{}], the program allows [{}]",
            got.join(","),
            want.join(",")
        );
    }
    Ok(())
}

fn format_dim(d: &Dim) -> String {
    match d {
        Dim::Fixed(v) => v.to_string(),
        Dim::Dynamic { name, min, max, .. } => format!("{name}∈{min}..{max}"),
    }
}

/// Prints what a program is: its format, inputs with their allowed dims, outputs, and
/// the ops it uses (with those nothing converts marked).
pub fn inspect(path: &Path) -> Result<()> {
    torchtrt::init_plugins()?;
    let program =
        torch::load_program(path).with_context(|| format!("reading {}", path.display()))?;
    let ep = &program.exported;
    println!(
        "{}: torch.export program (.pt2), ExportedProgram schema {}.{}, written by torch {}, dialect {}",
        path.display(),
        ep.schema_version.major,
        ep.schema_version.minor,
        ep.torch_version,
        ep.verifiers.join(", ")
    );
    summarize(&program)
}

fn summarize(program: &Program) -> Result<()> {
    println!("inputs:");
    for input in program.user_inputs()? {
        let dims = program.input_dims(&input, torch::ImportOptions::default().default_max)?;
        let sizes: Vec<String> = dims.iter().map(format_dim).collect();
        println!("  {} {} [{}]", input.name, input.dtype, sizes.join(", "));
    }
    println!("outputs: {}", program.output_names()?.join(", "));
    let weights: usize = program.tensors.values().map(|(_, t)| t.bytes().len()).sum();
    println!(
        "weights: {} tensors, {} bytes",
        program.tensors.len(),
        weights
    );
    let converters = torch::ConverterRegistry::with_extensions();
    let unsupported =
        torch::unsupported_ops(&program.graph().nodes, &converters, torchtrt::registry());
    let mut ops: std::collections::BTreeMap<String, usize> = Default::default();
    for n in &program.graph().nodes {
        *ops.entry(torch::OpName::parse(&n.target).label())
            .or_default() += 1;
    }
    println!("ops ({} nodes):", program.graph().nodes.len());
    for (op, count) in ops {
        let mark = if unsupported.iter().any(|u| u.op == op) {
            "  (no converter, custom op or plugin)"
        } else {
            ""
        };
        println!("  {op} ×{count}{mark}");
    }
    Ok(())
}
