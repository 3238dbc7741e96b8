//! Prints the built-in converters as the Markdown table of `docs/pytorch.md`:
//! `cargo run -p torchtrt-torch --example supported_ops`.

fn main() {
    print!("{}", torchtrt_torch::supported_ops_markdown());
}
