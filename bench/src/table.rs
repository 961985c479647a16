//! Plain-text tables for benchmark output.

/// A table with a header row, printed with aligned columns.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Renders the table as Markdown.
    pub fn render(&self) -> String {
        let cols = self.header.len();
        let mut width = vec![0; cols];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(cols) {
                width[i] = width[i].max(c.len());
            }
        }
        let line = |r: &Vec<String>| {
            let cells: Vec<String> = (0..cols)
                .map(|i| {
                    format!(
                        "{:<w$}",
                        r.get(i).map(String::as_str).unwrap_or(""),
                        w = width[i]
                    )
                })
                .collect();
            format!("| {} |\n", cells.join(" | "))
        };
        let mut out = line(&self.header);
        let sep: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
        out.push_str(&format!("|-{}-|\n", sep.join("-|-")));
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_renders_aligned_markdown() {
        let mut t = Table::new(&["a", "bbb"]);
        t.row(vec!["long cell".into(), "x".into()]);
        let s = t.render();
        assert!(s.starts_with("| a         | bbb |\n|-----------|-----|\n"));
        assert!(s.contains("| long cell | x   |"));
    }
}
