//! Build script: for the `decoders` feature, compiles `proto/zeroparser_bench.proto` into prost
//! structs plus a descriptor set, and generates a `Touch` impl per message that reads every
//! field once (the "parse and touch every field" mode of `zeroparser-bench`).

fn main() {
    #[cfg(feature = "decoders")]
    decoders::generate();
}

#[cfg(feature = "decoders")]
mod decoders {
    use std::path::PathBuf;

    const PROTO: &str = "proto/zeroparser_bench.proto";

    pub fn generate() {
        println!("cargo:rerun-if-changed={PROTO}");
        let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into()));
        let protoc = protoc_bin_vendored::protoc_bin_path().unwrap_or_else(|e| panic!("{e}"));
        std::env::set_var("PROTOC", protoc);
        prost_build::Config::new()
            .file_descriptor_set_path(out.join("zeroparser_bench.bin"))
            .compile_protos(&[PROTO], &["proto"])
            .unwrap_or_else(|e| panic!("compiling {PROTO}: {e}"));
        let text = std::fs::read_to_string(PROTO).unwrap_or_else(|e| panic!("{PROTO}: {e}"));
        std::fs::write(out.join("touch_impls.rs"), touch_impls(&text))
            .unwrap_or_else(|e| panic!("writing touch_impls.rs: {e}"));
    }

    /// `impl Touch for <Message>` summing `touch()` of every field, from the .proto text
    /// (one field per line: `[optional|repeated] type name = number;`); nested messages get
    /// their prost path (`parent_name::Child`).
    fn touch_impls(proto: &str) -> String {
        let mut code = String::new();
        // Open messages: (prost path, impl text so far).
        let mut open: Vec<(String, String)> = Vec::new();
        let mut in_enum = false;
        for line in proto.lines().map(str::trim) {
            if line.starts_with("enum ") {
                in_enum = true;
            } else if in_enum {
                in_enum = line != "}";
            } else if let Some(rest) = line.strip_prefix("message ") {
                let name = rest.trim_end_matches('{').trim();
                let path = match open.last() {
                    Some((parent, _)) => format!("{}::{name}", module_path(parent)),
                    None => name.to_owned(),
                };
                let text = format!(
                    "impl Touch for {path} {{\n    fn touch(&self) -> u64 {{\n        0u64"
                );
                open.push((path, text));
            } else if line == "}" {
                if let Some((_, text)) = open.pop() {
                    code.push_str(&text);
                    code.push_str("\n    }\n}\n");
                }
            } else if line.ends_with(';') && line.contains(" = ") {
                let before_eq = line.split(" = ").next().unwrap_or("");
                if let (Some(field), Some((_, text))) =
                    (before_eq.split_whitespace().last(), open.last_mut())
                {
                    text.push_str(&format!(
                        "\n            .wrapping_add(self.{field}.touch())"
                    ));
                }
            }
        }
        code
    }

    /// The module prost puts the nested types of message `path` in (`a::BcD` -> `a::bc_d`).
    fn module_path(path: &str) -> String {
        let (parent, name) = match path.rsplit_once("::") {
            Some((parent, name)) => (format!("{parent}::"), name),
            None => (String::new(), path),
        };
        let mut snake = String::new();
        for (i, c) in name.chars().enumerate() {
            if c.is_ascii_uppercase() {
                if i > 0 {
                    snake.push('_');
                }
                snake.push(c.to_ascii_lowercase());
            } else {
                snake.push(c);
            }
        }
        format!("{parent}{snake}")
    }
}
