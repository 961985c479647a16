//! Field paths (`loc.lat`, `tags[3]`, `attrs{key}`) that error messages use to name the value
//! at fault.
//!
//! Paths are built only on the error path: a decoder that fails deep inside a record returns
//! an error with an empty path and each enclosing level adds its own segment while the error
//! travels outwards, so a successful decode never pays for path bookkeeping.

use std::fmt;

/// One step of a [`FieldPath`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// A column or struct field, by name.
    Field(String),
    /// An element of an ARRAY, by position.
    Index(usize),
    /// A value of a MAP, by its key rendered as text.
    Key(String),
    /// Any element of an ARRAY (schema errors, which have no position).
    Element,
    /// The key of a MAP (schema errors).
    MapKey,
    /// The value of a MAP (schema errors).
    MapValue,
}

/// A path from the record's top level to one value, outermost segment first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldPath {
    segments: Vec<Segment>,
}

impl FieldPath {
    /// The empty path: the record itself.
    pub fn root() -> Self {
        Self::default()
    }

    /// A path of one field name.
    pub fn field(name: &str) -> Self {
        Self {
            segments: vec![Segment::Field(name.to_owned())],
        }
    }

    /// This path extended by `segment` at the inner end.
    pub fn child(&self, segment: Segment) -> Self {
        let mut segments = self.segments.clone();
        segments.push(segment);
        Self { segments }
    }

    /// Adds `segment` at the outer end (used while an error unwinds outwards).
    pub fn push_outer(&mut self, segment: Segment) {
        self.segments.insert(0, segment);
    }

    /// The segments, outermost first.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// True for the path of the record itself.
    pub fn is_root(&self) -> bool {
        self.segments.is_empty()
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.segments.is_empty() {
            return f.write_str("<record>");
        }
        for (i, segment) in self.segments.iter().enumerate() {
            match segment {
                Segment::Field(name) if i == 0 => f.write_str(name)?,
                Segment::Field(name) => write!(f, ".{name}")?,
                Segment::Index(index) => write!(f, "[{index}]")?,
                Segment::Key(key) => write!(f, "{{{key}}}")?,
                Segment::Element => f.write_str("[]")?,
                Segment::MapKey => f.write_str("{key}")?,
                Segment::MapValue => f.write_str("{}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_fields_indexes_and_keys() {
        let mut path = FieldPath::root();
        path.push_outer(Segment::Field("lat".into()));
        path.push_outer(Segment::Key("home".into()));
        path.push_outer(Segment::Index(3));
        path.push_outer(Segment::Field("loc".into()));
        assert_eq!(path.to_string(), "loc[3]{home}.lat");
        assert_eq!(FieldPath::root().to_string(), "<record>");
        let schema_path = FieldPath::field("tags").child(Segment::Element);
        assert_eq!(schema_path.to_string(), "tags[]");
    }
}
