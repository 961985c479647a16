//! The descriptor a producer sends: one encoded `google.protobuf.DescriptorProto` (the root
//! message) with every message and enum it uses nested inside it. This module decodes it and
//! resolves `type_name` references against the nested types.
//!
//! Producers spell references in several ways (`.Root.Nested`, `Root.Nested`,
//! `.some.pkg.Root.Nested`), so a reference resolves to the known type whose name is its
//! longest suffix; failing that, to the only known type that ends with it (a relative name).

use prost::Message;
use prost_types::{DescriptorProto, EnumDescriptorProto};

use crate::error::SchemaError;

/// Decodes the descriptor bytes.
pub(crate) fn decode_descriptor(bytes: &[u8]) -> Result<DescriptorProto, SchemaError> {
    DescriptorProto::decode(bytes).map_err(|e| SchemaError::InvalidDescriptor {
        reason: e.to_string(),
    })
}

/// The message and enum types declared inside a root descriptor, by dotted name relative to
/// the root's package (`Root`, `Root.Nested`, `Root.Nested.Kind`).
pub(crate) struct TypeRegistry<'d> {
    messages: Vec<(String, &'d DescriptorProto)>,
    enums: Vec<(String, &'d EnumDescriptorProto)>,
}

impl<'d> TypeRegistry<'d> {
    /// Collects every type declared in `root`, `root` included.
    pub(crate) fn new(root: &'d DescriptorProto) -> Self {
        let mut registry = TypeRegistry {
            messages: Vec::new(),
            enums: Vec::new(),
        };
        registry.collect(root.name(), root);
        registry
    }

    fn collect(&mut self, name: &str, message: &'d DescriptorProto) {
        self.messages.push((name.to_owned(), message));
        for nested_enum in &message.enum_type {
            self.enums
                .push((format!("{name}.{}", nested_enum.name()), nested_enum));
        }
        for nested in &message.nested_type {
            self.collect(&format!("{name}.{}", nested.name()), nested);
        }
    }

    /// The message a reference names, with its registry name.
    pub(crate) fn message(&self, type_name: &str) -> Option<(&str, &'d DescriptorProto)> {
        resolve(&self.messages, type_name)
    }

    /// The enum a reference names.
    pub(crate) fn enumeration(&self, type_name: &str) -> Option<&'d EnumDescriptorProto> {
        resolve(&self.enums, type_name).map(|(_, e)| e)
    }
}

fn resolve<'r, T: Copy>(known: &'r [(String, T)], type_name: &str) -> Option<(&'r str, T)> {
    let wanted = type_name.trim_start_matches('.');
    let is_suffix_of_wanted = |name: &str| {
        wanted == name
            || (wanted.len() > name.len()
                && wanted.ends_with(name)
                && wanted.as_bytes().get(wanted.len() - name.len() - 1) == Some(&b'.'))
    };
    if let Some((name, item)) = known
        .iter()
        .filter(|(name, _)| is_suffix_of_wanted(name))
        .max_by_key(|(name, _)| name.len())
    {
        return Some((name.as_str(), *item));
    }
    let dotted = format!(".{wanted}");
    let mut relative = known.iter().filter(|(name, _)| name.ends_with(&dotted));
    match (relative.next(), relative.next()) {
        (Some((name, item)), None) => Some((name.as_str(), *item)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(name: &str, nested: Vec<DescriptorProto>) -> DescriptorProto {
        DescriptorProto {
            name: Some(name.into()),
            nested_type: nested,
            ..Default::default()
        }
    }

    #[test]
    fn references_resolve_by_longest_known_suffix() {
        let root = message(
            "Root",
            vec![
                message("Nested", vec![message("Inner", vec![])]),
                message("Inner", vec![]),
            ],
        );
        let registry = TypeRegistry::new(&root);
        let name = |reference: &str| registry.message(reference).map(|(n, _)| n.to_owned());
        assert_eq!(name(".Root.Nested").as_deref(), Some("Root.Nested"));
        assert_eq!(name("Root.Nested").as_deref(), Some("Root.Nested"));
        assert_eq!(
            name(".some.pkg.Root.Nested.Inner").as_deref(),
            Some("Root.Nested.Inner")
        );
        assert_eq!(name(".pkg.Root.Inner").as_deref(), Some("Root.Inner"));
        assert_eq!(name(".pkg.Root").as_deref(), Some("Root"));
        assert_eq!(name("Nested").as_deref(), Some("Root.Nested"));
        // Two types end with `.Inner`: a bare relative name is ambiguous.
        assert_eq!(name("Inner"), None);
        assert_eq!(name(".pkg.Other"), None);
        assert_eq!(name(".pkg.XRoot"), None);
    }
}
