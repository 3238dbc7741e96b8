//! `docs/pytorch.md`'s supported-op table is the converter registry's
//! (`TORCHTRT_UPDATE_DOCS=1` rewrites it).

use std::path::Path;

const BEGIN: &str = "<!-- supported-ops:begin -->\n";
const END: &str = "<!-- supported-ops:end -->";

#[test]
fn supported_op_table_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/pytorch.md");
    let text = std::fs::read_to_string(&path).expect("docs/pytorch.md");
    let (head, rest) = text.split_once(BEGIN).expect("begin marker");
    let (_, tail) = rest.split_once(END).expect("end marker");
    let table = torchtrt_torch::supported_ops_markdown();
    let want = format!("{head}{BEGIN}{table}{END}{tail}");
    if std::env::var_os("TORCHTRT_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    assert!(
        text == want,
        "docs/pytorch.md's op table is stale: run TORCHTRT_UPDATE_DOCS=1 cargo test -p torchtrt-torch --test suite supported_op_table"
    );
}
