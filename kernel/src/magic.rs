//! Magics: lines that start with `%` at the top of a cell talk to the kernel instead of the
//! language. They are the session's commands (`dep_interp::commands`, shared with the REPL's
//! `:` commands): parsed and run there, rendered here and in the executor.

use dep_interp::commands;

/// `%help`'s text: every command of the shared table, as a magic.
pub fn help() -> String {
    let mut text = String::from("Magics (lines that start with % at the top of a cell):\n");
    for (usage, doc) in commands::help_lines('%') {
        text.push_str(&format!("  {usage:<40} {doc}\n"));
    }
    text.push_str(
        "\nEverything else in a cell is dep code: each statement is pushed to the engine.\n\
         The event log holds the last cell that ran code: %timeline draws that cell (its title\n\
         names it), and %dag, %trace and %why's history read its events.\n",
    );
    text
}

/// A table as plain text, columns as wide as their widest cell.
pub(crate) fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..header.len())
        .map(|column| {
            std::iter::once(header)
                .chain(rows.iter().map(Vec::as_slice))
                .map(|row| row.get(column).map_or(0, |cell| cell.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    std::iter::once(header)
        .chain(rows.iter().map(Vec::as_slice))
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            format!("{}\n", cells.join("  ").trim_end())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lists_every_command_and_engine() {
        let text = help();
        for info in commands::COMMANDS {
            assert!(text.contains(&format!("  %{}", info.name)), "{text}");
        }
        assert!(
            text.contains("%engine naive|threaded|per-device|sim [THREADS]"),
            "{text}"
        );
        assert!(text.contains("%trace FILE"), "{text}");
        assert!(text.contains("%timeline draws that cell"), "{text}");
    }

    #[test]
    fn tables_line_up() {
        let header = ["name", "shape"].map(str::to_string).to_vec();
        let rows = vec![vec!["A".to_string(), "[2, 3]".to_string()]];
        assert_eq!(table(&header, &rows), "name  shape\nA     [2, 3]\n");
    }
}
