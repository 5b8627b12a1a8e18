use serde::{Deserialize, Serialize};

use crate::validate::{join_pointer, Violation, ViolationKind};
use crate::Contract;

/// A table: headers and rows of cells, every row as wide as the headers.
#[derive(Contract, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[contract(check = TableValue::check_shape)]
pub struct TableValue {
    /// Column headers, as written.
    #[contract(len = 1..)]
    pub headers: Vec<String>,
    /// Rows, each with one cell per header, as written.
    pub rows: Vec<Vec<String>>,
}

impl TableValue {
    /// Checks that every row has exactly one cell per header (reports the first bad row).
    pub fn check_shape(&self) -> Result<(), Violation> {
        let width = self.headers.len();
        for (i, row) in self.rows.iter().enumerate() {
            if row.len() != width {
                return Err(Violation::new(
                    join_pointer("/rows", &i.to_string()),
                    ViolationKind::TableShape,
                    format!(
                        "row {i} has {} cells but there are {width} headers",
                        row.len()
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ragged_rows_are_reported() {
        let err = TableValue::from_json(r#"{"headers": ["a", "b"], "rows": [["1", "2"], ["3"]]}"#)
            .unwrap_err();
        assert_eq!(err.len(), 1);
        assert_eq!(err.0[0].kind, ViolationKind::TableShape);
        assert_eq!(err.0[0].path, "/rows/1");
        assert!(TableValue::from_json(r#"{"headers": ["a"], "rows": [["1"], ["2"]]}"#).is_ok());
    }
}
