//! Aligned plain-text tables.

/// How a column's cells line up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Align {
    /// Text: padded on the right.
    Left,
    /// Numbers: padded on the left so digits line up.
    Right,
}

/// A table with a header row; rendered with two spaces between columns.
#[derive(Debug)]
pub(crate) struct Table {
    headers: Vec<&'static str>,
    aligns: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns.
    pub(crate) fn new(columns: &[(&'static str, Align)]) -> Table {
        Table {
            headers: columns.iter().map(|c| c.0).collect(),
            aligns: columns.iter().map(|c| c.1).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are empty, extra cells are dropped.
    pub(crate) fn row(&mut self, mut cells: Vec<String>) {
        cells.resize(self.headers.len(), String::new());
        self.rows.push(cells);
    }

    /// The table, each line indented by `indent` spaces and ending in `\n`.
    pub(crate) fn render(&self, indent: usize) -> String {
        let widths = self.widths();
        let headers: Vec<String> = self.headers.iter().map(|h| (*h).to_owned()).collect();
        let mut out = String::new();
        for row in std::iter::once(&headers).chain(&self.rows) {
            out.push_str(&" ".repeat(indent));
            let line = self.line(row, &widths);
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    /// The widest cell of each column, in characters.
    fn widths(&self) -> Vec<usize> {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        widths
    }

    /// One row, padded.
    fn line(&self, row: &[String], widths: &[usize]) -> String {
        let cells = row.iter().zip(widths).zip(&self.aligns);
        let padded: Vec<String> = cells
            .map(|((cell, &width), align)| match align {
                Align::Left => format!("{cell:<width$}"),
                Align::Right => format!("{cell:>width$}"),
            })
            .collect();
        padded.join("  ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align() {
        let mut t = Table::new(&[("NAME", Align::Left), ("COUNT", Align::Right)]);
        t.row(vec!["a".into(), "1".into()]);
        t.row(vec!["longer-name".into(), "12345678".into()]);
        t.row(vec!["ü→".into()]);
        let expect = concat!(
            "  NAME            COUNT\n",
            "  a                   1\n",
            "  longer-name  12345678\n",
            "  ü→\n",
        );
        assert_eq!(t.render(2), expect);
    }
}
