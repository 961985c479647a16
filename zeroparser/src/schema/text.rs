//! Parser of the column-list text that declares a table schema.
//!
//! ```text
//! columns := column ("," column)*
//! column  := name [":"] type ["NOT" "NULL"]
//! name    := identifier | "`" any text, "``" for a backquote "`"
//! type    := TINYINT | BYTE | SMALLINT | SHORT | INT | INTEGER | BIGINT | LONG | FLOAT
//!          | DOUBLE | STRING | BOOLEAN | BOOL | BINARY | DATE | TIMESTAMP | TIMESTAMP_NTZ
//!          | VARIANT
//!          | ARRAY "<" type ["NOT" "NULL"] ">"
//!          | MAP "<" type "," type ["NOT" "NULL"] ">"
//!          | STRUCT "<" column ("," column)* ">"
//! ```
//!
//! Keywords are case-insensitive. `NOT NULL` inside ARRAY / MAP marks the elements / values
//! as non-null (both default to nullable). Errors give the byte position and what was expected.

use super::column::{Column, ColumnType, TableSchema, MAX_DEPTH};
use crate::error::SchemaError;

impl TableSchema {
    /// Parses and validates a column list such as `id BIGINT NOT NULL, tags ARRAY<STRING>`
    /// (grammar above).
    pub fn parse(text: &str) -> Result<TableSchema, SchemaError> {
        parse_schema(text)
    }
}

/// Parses and validates a column list.
fn parse_schema(text: &str) -> Result<TableSchema, SchemaError> {
    let mut parser = Parser { text, pos: 0 };
    parser.skip_space();
    if parser.pos >= text.len() {
        return Err(SchemaError::Empty);
    }
    let columns = parser.columns(0)?;
    parser.skip_space();
    if parser.pos < text.len() {
        return Err(parser.error("`,` or end of text"));
    }
    let schema = TableSchema { columns };
    schema.validate()?;
    Ok(schema)
}

#[derive(Debug, Clone, PartialEq)]
enum Token<'a> {
    Word(&'a str),
    Quoted(String),
    Symbol(char),
    End,
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn rest(&self) -> &'a str {
        self.text.get(self.pos..).unwrap_or("")
    }

    fn skip_space(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    /// The next token and the byte length it spans, without consuming it.
    fn peek(&mut self) -> Result<(Token<'a>, usize), SchemaError> {
        self.skip_space();
        let rest = self.rest();
        let Some(first) = rest.chars().next() else {
            return Ok((Token::End, 0));
        };
        if first.is_ascii_alphanumeric() || first == '_' {
            let len = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            return Ok((Token::Word(rest.get(..len).unwrap_or("")), len));
        }
        if first == '`' {
            let mut name = String::new();
            let mut chars = rest.char_indices().skip(1).peekable();
            while let Some((i, c)) = chars.next() {
                if c == '`' {
                    if matches!(chars.peek(), Some((_, '`'))) {
                        chars.next();
                        name.push('`');
                    } else {
                        return Ok((Token::Quoted(name), i + 1));
                    }
                } else {
                    name.push(c);
                }
            }
            return Err(SchemaError::Syntax {
                position: self.text.len(),
                expected: "closing backquote".into(),
                found: "end of text".into(),
            });
        }
        Ok((Token::Symbol(first), first.len_utf8()))
    }

    fn error(&mut self, expected: &str) -> SchemaError {
        let found = match self.peek() {
            Ok((Token::Word(word), _)) => format!("`{word}`"),
            Ok((Token::Quoted(name), _)) => format!("`{name}`"),
            Ok((Token::Symbol(c), _)) => format!("`{c}`"),
            Ok((Token::End, _)) => "end of text".into(),
            Err(error) => return error,
        };
        SchemaError::Syntax {
            position: self.pos,
            expected: expected.into(),
            found,
        }
    }

    fn eat_symbol(&mut self, symbol: char) -> Result<bool, SchemaError> {
        let (token, len) = self.peek()?;
        if token == Token::Symbol(symbol) {
            self.pos += len;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn expect_symbol(&mut self, symbol: char) -> Result<(), SchemaError> {
        if self.eat_symbol(symbol)? {
            Ok(())
        } else {
            Err(self.error(&format!("`{symbol}`")))
        }
    }

    fn eat_keyword(&mut self, keyword: &str) -> Result<bool, SchemaError> {
        let (token, len) = self.peek()?;
        match token {
            Token::Word(word) if word.eq_ignore_ascii_case(keyword) => {
                self.pos += len;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// `NOT NULL` if present: returns whether the value is nullable.
    fn nullability(&mut self) -> Result<bool, SchemaError> {
        if self.eat_keyword("NOT")? {
            if !self.eat_keyword("NULL")? {
                return Err(self.error("`NULL` after `NOT`"));
            }
            return Ok(false);
        }
        Ok(true)
    }

    fn columns(&mut self, depth: usize) -> Result<Vec<Column>, SchemaError> {
        let mut columns = vec![self.column(depth)?];
        while self.eat_symbol(',')? {
            columns.push(self.column(depth)?);
        }
        Ok(columns)
    }

    fn column(&mut self, depth: usize) -> Result<Column, SchemaError> {
        let (token, len) = self.peek()?;
        let name = match token {
            Token::Word(word) => word.to_owned(),
            Token::Quoted(name) => name,
            _ => return Err(self.error("a column name")),
        };
        self.pos += len;
        self.eat_symbol(':')?;
        let data_type = self.data_type(depth)?;
        let nullable = self.nullability()?;
        Ok(Column {
            name,
            data_type,
            nullable,
        })
    }

    fn data_type(&mut self, depth: usize) -> Result<ColumnType, SchemaError> {
        let start = self.pos;
        let (token, len) = self.peek()?;
        let Token::Word(word) = token else {
            return Err(self.error("a type"));
        };
        let keyword = word.to_ascii_uppercase();
        let primitive = match keyword.as_str() {
            "TINYINT" | "BYTE" => Some(ColumnType::TinyInt),
            "SMALLINT" | "SHORT" => Some(ColumnType::SmallInt),
            "INT" | "INTEGER" => Some(ColumnType::Int),
            "BIGINT" | "LONG" => Some(ColumnType::BigInt),
            "FLOAT" => Some(ColumnType::Float),
            "DOUBLE" => Some(ColumnType::Double),
            "STRING" => Some(ColumnType::String),
            "BOOLEAN" | "BOOL" => Some(ColumnType::Boolean),
            "BINARY" => Some(ColumnType::Binary),
            "DATE" => Some(ColumnType::Date),
            "TIMESTAMP" => Some(ColumnType::Timestamp),
            "TIMESTAMP_NTZ" => Some(ColumnType::TimestampNtz),
            "VARIANT" => Some(ColumnType::Variant),
            "ARRAY" | "MAP" | "STRUCT" => None,
            _ => return Err(self.error("a type")),
        };
        self.pos += len;
        if let Some(primitive) = primitive {
            return Ok(primitive);
        }
        if depth >= MAX_DEPTH {
            return Err(SchemaError::Syntax {
                position: start,
                expected: format!("at most {MAX_DEPTH} levels of nesting"),
                found: "deeper nesting".into(),
            });
        }
        self.expect_symbol('<')?;
        let data_type = match keyword.as_str() {
            "ARRAY" => {
                let element = self.data_type(depth + 1)?;
                let contains_null = self.nullability()?;
                ColumnType::Array {
                    element: Box::new(element),
                    contains_null,
                }
            }
            "MAP" => {
                let key = self.data_type(depth + 1)?;
                self.expect_symbol(',')?;
                let value = self.data_type(depth + 1)?;
                let value_contains_null = self.nullability()?;
                ColumnType::Map {
                    key: Box::new(key),
                    value: Box::new(value),
                    value_contains_null,
                }
            }
            _ => ColumnType::Struct(self.columns(depth + 1)?),
        };
        self.expect_symbol('>')?;
        Ok(data_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_list_with_every_type_parses() {
        let text = "id BIGINT NOT NULL, device STRING, ts TIMESTAMP, temp DOUBLE, \
                    tags ARRAY<STRING>, attrs MAP<STRING,STRING>, \
                    loc STRUCT<lat: DOUBLE, lon: DOUBLE NOT NULL>, d DATE, b BINARY, \
                    v VARIANT, n TIMESTAMP_NTZ, t TINYINT, s SMALLINT, i INT";
        let schema = parse_schema(text).expect("parses");
        assert_eq!(schema.columns.len(), 14);
        assert!(!schema.columns[0].nullable);
        assert_eq!(
            schema.columns[6].data_type.sql(),
            "STRUCT<lat: DOUBLE, lon: DOUBLE NOT NULL>"
        );
        assert_eq!(parse_schema(&schema.to_sql()), Ok(schema));
    }

    #[test]
    fn keywords_and_aliases_are_case_insensitive() {
        let schema =
            parse_schema("a integer, b Long, c short, d byte, e bool not null, f struct<x int>")
                .expect("parses");
        let types: Vec<String> = schema.columns.iter().map(|c| c.data_type.sql()).collect();
        assert_eq!(
            types,
            [
                "INT",
                "BIGINT",
                "SMALLINT",
                "TINYINT",
                "BOOLEAN",
                "STRUCT<x: INT>"
            ]
        );
        assert!(!schema.columns[4].nullable);
    }

    #[test]
    fn backquoted_names_may_hold_anything() {
        let schema = parse_schema("`my col` INT, `a``b` STRING").expect("parses");
        assert_eq!(schema.columns[0].name, "my col");
        assert_eq!(schema.columns[1].name, "a`b");
    }

    #[test]
    fn array_and_map_nullability_defaults_to_true_and_can_be_switched_off() {
        let schema =
            parse_schema("a ARRAY<INT>, b ARRAY<INT NOT NULL>, c MAP<INT, STRING NOT NULL>")
                .expect("parses");
        assert!(matches!(
            schema.columns[0].data_type,
            ColumnType::Array {
                contains_null: true,
                ..
            }
        ));
        assert!(matches!(
            schema.columns[1].data_type,
            ColumnType::Array {
                contains_null: false,
                ..
            }
        ));
        assert!(matches!(
            schema.columns[2].data_type,
            ColumnType::Map {
                value_contains_null: false,
                ..
            }
        ));
    }

    #[test]
    fn syntax_errors_give_position_and_expectation() {
        let error = parse_schema("id BIGINT, name STRNG").expect_err("bad type");
        assert_eq!(
            error.to_string(),
            "schema text at position 16: expected a type, found `STRNG`"
        );
        let error = parse_schema("tags ARRAY<STRING").expect_err("unclosed");
        assert!(matches!(error, SchemaError::Syntax { position: 17, .. }));
        let error = parse_schema("a INT,").expect_err("trailing comma");
        assert!(matches!(error, SchemaError::Syntax { .. }));
        let error = parse_schema("a INT NOT").expect_err("NOT without NULL");
        assert!(error.to_string().contains("`NULL` after `NOT`"));
    }

    #[test]
    fn empty_lists_duplicate_names_and_bad_map_keys_are_rejected() {
        assert_eq!(parse_schema("  "), Err(SchemaError::Empty));
        assert!(matches!(
            parse_schema("a INT, A STRING"),
            Err(SchemaError::DuplicateColumn { .. })
        ));
        assert!(matches!(
            parse_schema("s STRUCT<x INT, X INT>"),
            Err(SchemaError::DuplicateColumn { .. })
        ));
        let error = parse_schema("m MAP<DOUBLE, INT>").expect_err("double key");
        assert!(matches!(error, SchemaError::InvalidMapKey { .. }));
        assert!(error.to_string().contains("`m`"));
    }

    #[test]
    fn absurd_nesting_is_an_error_not_a_stack_overflow() {
        let text = format!("a {}INT{}", "ARRAY<".repeat(10_000), ">".repeat(10_000));
        assert!(matches!(
            parse_schema(&text),
            Err(SchemaError::Syntax { .. })
        ));
    }
}
