//! [`Places`]: an op's line as its reader numbers it. Engine ops carry one session-wide line
//! number (a REPL or a notebook runs many inputs in one session); a front-end names it by the
//! input it came from, as its error reports do: `cell[3]:1` in a notebook, `<repl>:1` in the
//! REPL.

use std::sync::{Arc, PoisonError, RwLock};

/// The inputs a session ran, by the session-wide number of their first line. Clones share
/// the list, so a live display named once sees the inputs run after it started.
#[derive(Clone, Debug, Default)]
pub struct Places {
    inputs: Arc<RwLock<Vec<Input>>>,
}

#[derive(Debug)]
struct Input {
    first_line: u32,
    path: Arc<str>,
    file_first_line: u32,
}

impl Places {
    /// Notes an input: its session-wide lines start at `first_line`, and that line is line
    /// `file_first_line` of `path`. Inputs come in the order they ran.
    pub fn add(&self, first_line: u32, path: &str, file_first_line: u32) {
        let mut inputs = self.inputs.write().unwrap_or_else(PoisonError::into_inner);
        inputs.push(Input {
            first_line,
            path: Arc::from(path),
            file_first_line,
        });
    }

    /// Session-wide line `line` as `path:line` of its input; `None` for line 0 (no line) or a
    /// line before every input.
    pub fn name(&self, line: u32) -> Option<Arc<str>> {
        let (path, file_line) = self.input_line(line)?;
        Some(Arc::from(format!("{path}:{file_line}")))
    }

    /// Session-wide line `line` as its input's path and its line there, the line the
    /// front-end's own reports number; `None` for line 0 (no line) or a line before every
    /// input.
    pub fn input_line(&self, line: u32) -> Option<(Arc<str>, u32)> {
        if line == 0 {
            return None;
        }
        let inputs = self.inputs.read().unwrap_or_else(PoisonError::into_inner);
        let index = inputs.partition_point(|input| input.first_line <= line);
        let input = &inputs[index.checked_sub(1)?];
        let file_line = line - input.first_line + input.file_first_line;
        Some((input.path.clone(), file_line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_named_by_the_input_it_came_from() {
        let places = Places::default();
        assert_eq!(places.name(1), None);
        places.add(1, "cell[1]", 1);
        places.add(4, "cell[2]", 1);
        places.add(6, "<stdin>", 10);
        let shared = places.clone();
        assert_eq!(shared.name(0), None);
        assert_eq!(shared.name(3).as_deref(), Some("cell[1]:3"));
        assert_eq!(shared.name(4).as_deref(), Some("cell[2]:1"));
        assert_eq!(shared.name(5).as_deref(), Some("cell[2]:2"));
        assert_eq!(shared.name(7).as_deref(), Some("<stdin>:11"));
        assert_eq!(shared.input_line(7), Some((Arc::from("<stdin>"), 11)));
        assert_eq!(shared.input_line(0), None);
    }
}
