//! Arrow columns shaped by the target table's Arrow types, written value by value: the
//! OTLP transcoders fill them straight from the prost messages (no JSON or value tree in
//! between). Scalars, STRUCTs (one child per field, a validity bit per row) and LISTs
//! (offsets, one child) nest as the table's types do; `finish` gives the Arrow array of
//! exactly the type the column was made from (a writer that does not follow the types
//! leaves columns of unequal lengths, which the batch check refuses).

use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, BooleanBuilder, Date32Builder, Float64Builder, Int32Builder, Int64Builder,
    StringBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, ListArray, StructArray};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, FieldRef, Fields, TimeUnit};

/// One column being built.
pub enum Col {
    /// STRING and VARIANT (JSON text).
    Utf8(StringBuilder),
    /// BIGINT.
    Int64(Int64Builder),
    /// INT.
    Int32(Int32Builder),
    /// DOUBLE.
    Float64(Float64Builder),
    /// BOOLEAN.
    Boolean(BooleanBuilder),
    /// TIMESTAMP (µs, with the column's time zone).
    Timestamp(TimestampMicrosecondBuilder, Option<Arc<str>>),
    /// DATE.
    Date(Date32Builder),
    /// STRUCT.
    Struct {
        /// The struct's fields.
        fields: Fields,
        /// One column per field.
        children: Vec<Col>,
        /// Row validity.
        nulls: NullBufferBuilder,
        /// Rows.
        len: usize,
    },
    /// ARRAY.
    List {
        /// The element field.
        field: FieldRef,
        /// Row ends into `child`, after a leading 0.
        offsets: Vec<i32>,
        /// The elements.
        child: Box<Col>,
        /// Row validity.
        nulls: NullBufferBuilder,
    },
}

impl Col {
    /// An empty column of Arrow type `data_type` (None: a type OTLP tables never have).
    pub fn new(data_type: &DataType) -> Option<Col> {
        Some(match data_type {
            DataType::Utf8 => Col::Utf8(StringBuilder::new()),
            DataType::Int64 => Col::Int64(Int64Builder::new()),
            DataType::Int32 => Col::Int32(Int32Builder::new()),
            DataType::Float64 => Col::Float64(Float64Builder::new()),
            DataType::Boolean => Col::Boolean(BooleanBuilder::new()),
            DataType::Timestamp(TimeUnit::Microsecond, zone) => {
                Col::Timestamp(TimestampMicrosecondBuilder::new(), zone.clone())
            }
            DataType::Date32 => Col::Date(Date32Builder::new()),
            DataType::Struct(fields) => Col::Struct {
                children: fields
                    .iter()
                    .map(|f| Col::new(f.data_type()))
                    .collect::<Option<Vec<_>>>()?,
                fields: fields.clone(),
                nulls: NullBufferBuilder::new(0),
                len: 0,
            },
            DataType::List(field) => Col::List {
                child: Box::new(Col::new(field.data_type())?),
                field: field.clone(),
                offsets: vec![0],
                nulls: NullBufferBuilder::new(0),
            },
            _ => return None,
        })
    }

    /// Appends a text value (STRING, VARIANT).
    pub fn str(&mut self, value: Option<&str>) {
        if let Col::Utf8(b) = self {
            b.append_option(value);
        }
    }

    /// Appends a BIGINT value.
    pub fn i64(&mut self, value: Option<i64>) {
        match self {
            Col::Int64(b) => b.append_option(value),
            Col::Timestamp(b, _) => b.append_option(value),
            _ => {}
        }
    }

    /// Appends an INT value.
    pub fn i32(&mut self, value: Option<i32>) {
        match self {
            Col::Int32(b) => b.append_option(value),
            Col::Date(b) => b.append_option(value),
            _ => {}
        }
    }

    /// Appends a DOUBLE value.
    pub fn f64(&mut self, value: Option<f64>) {
        if let Col::Float64(b) = self {
            b.append_option(value);
        }
    }

    /// Appends a BOOLEAN value.
    pub fn bool(&mut self, value: Option<bool>) {
        if let Col::Boolean(b) = self {
            b.append_option(value);
        }
    }

    /// Child `i` of a STRUCT column, or the element column of an ARRAY (any `i`).
    pub fn child(&mut self, i: usize) -> &mut Col {
        let fits = match self {
            Col::Struct { children, .. } => i < children.len(),
            _ => true,
        };
        if !fits {
            return self;
        }
        match self {
            Col::Struct { children, .. } => &mut children[i],
            Col::List { child, .. } => child,
            other => other,
        }
    }

    /// Ends a STRUCT row whose children were written, or an ARRAY row whose elements were
    /// written.
    pub fn close(&mut self) {
        self.end_row(true);
    }

    /// Appends a NULL row (a STRUCT's children get a NULL row too).
    pub fn null(&mut self) {
        self.end_row(false);
    }

    fn end_row(&mut self, valid: bool) {
        match self {
            Col::Struct {
                children,
                nulls,
                len,
                ..
            } => {
                if !valid {
                    children.iter_mut().for_each(Col::null);
                }
                nulls.append(valid);
                *len += 1;
            }
            Col::List {
                offsets,
                child,
                nulls,
                ..
            } => {
                offsets.push(child.len() as i32);
                nulls.append(valid);
            }
            // A scalar row is written by its value; only its NULL ends one here.
            _ if valid => {}
            Col::Utf8(b) => b.append_null(),
            Col::Int64(b) => b.append_null(),
            Col::Int32(b) => b.append_null(),
            Col::Float64(b) => b.append_null(),
            Col::Boolean(b) => b.append_null(),
            Col::Timestamp(b, _) => b.append_null(),
            Col::Date(b) => b.append_null(),
        }
    }

    /// Rows so far.
    pub fn len(&self) -> usize {
        match self {
            Col::Utf8(b) => b.len(),
            Col::Int64(b) => b.len(),
            Col::Int32(b) => b.len(),
            Col::Float64(b) => b.len(),
            Col::Boolean(b) => b.len(),
            Col::Timestamp(b, _) => b.len(),
            Col::Date(b) => b.len(),
            Col::Struct { len, .. } => *len,
            Col::List { offsets, .. } => offsets.len() - 1,
        }
    }

    /// Whether no row was written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The column's rows as an Arrow array; the column starts empty again.
    pub fn finish(&mut self) -> Result<ArrayRef, String> {
        Ok(match self {
            Col::Utf8(b) => Arc::new(b.finish()),
            Col::Int64(b) => Arc::new(b.finish()),
            Col::Int32(b) => Arc::new(b.finish()),
            Col::Float64(b) => Arc::new(b.finish()),
            Col::Boolean(b) => Arc::new(b.finish()),
            Col::Timestamp(b, zone) => Arc::new(b.finish().with_timezone_opt(zone.clone())),
            Col::Date(b) => Arc::new(b.finish()),
            Col::Struct {
                fields,
                children,
                nulls,
                len,
            } => {
                let arrays = children
                    .iter_mut()
                    .map(Col::finish)
                    .collect::<Result<Vec<_>, _>>()?;
                *len = 0;
                let array = StructArray::try_new(fields.clone(), arrays, nulls.finish())
                    .map_err(|e| e.to_string())?;
                Arc::new(array)
            }
            Col::List {
                field,
                offsets,
                child,
                nulls,
            } => {
                let values = child.finish()?;
                let ends = std::mem::replace(offsets, vec![0]);
                let array = ListArray::try_new(
                    field.clone(),
                    OffsetBuffer::new(ScalarBuffer::from(ends)),
                    values,
                    nulls.finish(),
                )
                .map_err(|e| e.to_string())?;
                Arc::new(array)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::Array;
    use arrow_schema::Field;

    #[test]
    fn a_list_of_structs_keeps_rows_elements_and_nulls() {
        let element = Field::new(
            "element",
            DataType::Struct(Fields::from(vec![
                Field::new("a", DataType::Int64, true),
                Field::new("b", DataType::Utf8, true),
            ])),
            true,
        );
        let mut col = Col::new(&DataType::List(Arc::new(element))).expect("type");
        let item = col.child(0);
        item.child(0).i64(Some(1));
        item.child(1).str(Some("x"));
        item.close();
        item.child(0).i64(None);
        item.child(1).str(Some("y"));
        item.close();
        col.close();
        col.null();
        col.close();
        assert_eq!(col.len(), 3);
        let array = col.finish().expect("finish");
        let list = array.as_list::<i32>();
        assert_eq!(list.value_offsets(), &[0, 2, 2, 2]);
        assert!(list.is_null(1) && list.is_valid(2));
        let items = list.values().as_struct();
        assert_eq!(items.column(1).as_string::<i32>().value(1), "y");
        assert!(items.column(0).is_null(1));
        assert_eq!(col.len(), 0);
    }
}
