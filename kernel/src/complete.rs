//! Completion, inspection and the completeness check: pure functions of the code, the cursor
//! and what the session knows, so that they can be tested without a kernel.
//!
//! Jupyter counts cursor positions in Unicode code points (protocol 5.2 and later), Rust
//! strings in bytes: every position crosses that boundary here and nowhere else.

use dep_grammar as grammar;
use dep_interp as interp;

use interp::commands::COMMANDS as MAGICS;

/// What completion and inspection may name.
pub(crate) struct Scope {
    /// The names the session defines (variables and functions).
    pub(crate) names: Vec<String>,
    /// A summary of each tensor variable.
    pub(crate) variables: Vec<interp::VariableInfo>,
    /// The recorded graphs (`graph NAME { ... }`), for `%dag NAME` and `%graph NAME`.
    pub(crate) graphs: Vec<String>,
}

/// A completion: the matches and the code-point range of the text they replace.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Completion {
    pub(crate) matches: Vec<String>,
    pub(crate) cursor_start: usize,
    pub(crate) cursor_end: usize,
}

/// Completes the word that ends at the cursor: a magic after `%` at the start of a line, a
/// recorded graph after `%dag` or `%graph`, a name after `%why`, else a name, a builtin or a
/// keyword.
pub(crate) fn complete(code: &str, cursor_pos: usize, scope: &Scope) -> Completion {
    let cursor = byte_offset(code, cursor_pos);
    let start = word_start(code, cursor);
    let word = &code[start..cursor];
    let line_start = code[..start].rfind('\n').map_or(0, |idx| idx + 1);
    let is_magic = code[..start].ends_with('%') && code[line_start..start - 1].trim().is_empty();
    // `%dag st|`: the magic whose argument is being typed.
    let magic_of_argument = code[line_start..start]
        .trim_start()
        .strip_prefix('%')
        .and_then(|rest| rest.strip_suffix(|c: char| c.is_whitespace()))
        .map(str::trim_end)
        .filter(|magic| !magic.contains(char::is_whitespace));
    let mut matches: Vec<String> = if let Some(magic) = magic_of_argument {
        let candidates: &[String] = match magic {
            "dag" | "graph" => &scope.graphs,
            "why" => &scope.names,
            _ => &[],
        };
        candidates
            .iter()
            .filter(|candidate| candidate.starts_with(word))
            .cloned()
            .collect()
    } else if is_magic {
        MAGICS
            .iter()
            .filter(|magic| magic.name.starts_with(word))
            .map(|magic| magic.name.to_string())
            .collect()
    } else if word.is_empty() {
        Vec::new()
    } else {
        let candidates = scope
            .names
            .iter()
            .map(String::as_str)
            .chain(interp::builtins::BUILTINS.iter().map(|info| info.name))
            .chain(
                interp::builtins::OTHER_FUNCTIONS
                    .iter()
                    .map(|(name, _, _)| *name),
            )
            .chain(grammar::KEYWORDS.iter().copied());
        candidates
            .filter(|candidate| candidate.starts_with(word))
            .map(str::to_string)
            .collect()
    };
    matches.sort();
    matches.dedup();
    Completion {
        matches,
        cursor_start: code[..start].chars().count(),
        cursor_end: cursor_pos.min(code.chars().count()),
    }
}

/// The text `inspect_request` shows for the word at the cursor (plain text), if any.
pub(crate) fn inspect(code: &str, cursor_pos: usize, scope: &Scope) -> Option<String> {
    let cursor = byte_offset(code, cursor_pos);
    let start = word_start(code, cursor);
    let end = cursor
        + code[cursor..]
            .find(|c: char| !is_word_char(c))
            .unwrap_or(code.len() - cursor);
    let word = &code[start..end];
    // A cursor just after `name(` asks about `name`.
    let word = if word.is_empty() {
        let before = code[..cursor].trim_end_matches('(');
        &before[word_start(before, before.len())..]
    } else {
        word
    };
    if word.is_empty() {
        return None;
    }
    let is_magic = code[..start].ends_with('%');
    if is_magic {
        let magic = MAGICS.iter().find(|magic| magic.name == word)?;
        return Some(format!("{}\n\n{}", magic.usage('%'), magic.doc));
    }
    if let Some(variable) = scope
        .variables
        .iter()
        .find(|variable| variable.name == word)
    {
        let shape = match &variable.shape {
            Some(shape) => format!("{shape:?}"),
            None => "not known yet (ops on it are pending)".to_string(),
        };
        return Some(format!(
            "{name}: tensor variable\nshape:  {shape}\ndevice: {device}\nstate:  {state}",
            name = variable.name,
            device = variable.device,
            state = variable.state
        ));
    }
    if let Some(info) = interp::builtins::lookup(word) {
        return Some(format!("{}\n\n{}", info.signature, info.doc));
    }
    if let Some((_, signature, doc)) = interp::builtins::OTHER_FUNCTIONS
        .iter()
        .find(|(name, _, _)| *name == word)
    {
        return Some(format!("{signature}\n\n{doc}"));
    }
    if scope.names.iter().any(|name| name == word) {
        return Some(format!("{word}: a function defined in this session"));
    }
    if grammar::is_keyword(word) {
        return Some(format!("{word}: a keyword of the dep language"));
    }
    None
}

/// The `is_complete` verdict: `complete`, or `incomplete` with the indent of the next line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Completeness {
    Complete,
    Incomplete { indent: String },
}

/// Whether `code` is complete, by the grammar's own rule (open brackets, strings, trailing
/// operators); magic lines are always complete.
pub(crate) fn completeness(code: &str) -> Completeness {
    let code_without_magics = without_magics(code);
    if grammar::is_complete(&code_without_magics) {
        return Completeness::Complete;
    }
    let depth = code_without_magics
        .chars()
        .filter(|c| *c == '{')
        .count()
        .saturating_sub(code_without_magics.chars().filter(|c| *c == '}').count());
    Completeness::Incomplete {
        indent: "    ".repeat(depth),
    }
}

/// Whether complete `code` has a syntax error (`is_complete` then answers `invalid`).
pub(crate) fn is_invalid(code: &str) -> bool {
    let code_without_magics = without_magics(code);
    !grammar::parse(&code_without_magics).diagnostics.is_empty()
}

fn without_magics(code: &str) -> String {
    code.lines()
        .map(|line| {
            if line.trim_start().starts_with('%') {
                ""
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn word_start(code: &str, cursor: usize) -> usize {
    code[..cursor]
        .char_indices()
        .rev()
        .take_while(|(_, c)| is_word_char(*c))
        .last()
        .map_or(cursor, |(idx, _)| idx)
}

/// The byte offset of code point `cursor_pos` (clamped to the end).
fn byte_offset(code: &str, cursor_pos: usize) -> usize {
    code.char_indices()
        .nth(cursor_pos)
        .map_or(code.len(), |(offset, _)| offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> Scope {
        Scope {
            names: vec!["Alpha".to_string(), "Amp".to_string(), "step".to_string()],
            variables: vec![interp::VariableInfo {
                name: "Alpha".to_string(),
                shape: Some(vec![2, 3]),
                device: "cpu".to_string(),
                state: "ready".to_string(),
            }],
            graphs: vec!["step".to_string(), "stage".to_string()],
        }
    }

    #[test]
    fn completes_names_builtins_keywords_and_magics() {
        let completion = complete("B = A", 5, &scope());
        assert_eq!(completion.matches, vec!["Alpha", "Amp"]);
        assert_eq!((completion.cursor_start, completion.cursor_end), (4, 5));
        assert_eq!(
            complete("x = ma", 6, &scope()).matches,
            vec!["matmul", "max"]
        );
        assert_eq!(
            complete("pri", 3, &scope()).matches,
            vec!["print", "priority"]
        );
        assert_eq!(complete("%ti", 3, &scope()).matches, vec!["timeline"]);
        assert_eq!(complete("%ti", 3, &scope()).cursor_start, 1);
        assert_eq!(
            complete("%dag st", 7, &scope()).matches,
            vec!["stage", "step"]
        );
        assert_eq!(
            complete("%graph ", 7, &scope()).matches,
            vec!["stage", "step"]
        );
        assert_eq!(complete("%why Al", 7, &scope()).matches, vec!["Alpha"]);
        assert_eq!(
            complete("%reset ", 7, &scope()).matches,
            Vec::<String>::new()
        );
    }

    #[test]
    fn cursor_positions_are_code_points() {
        // "é" is two bytes, one code point.
        let code = "# é\nB = Al";
        let cursor = code.chars().count();
        let completion = complete(code, cursor, &scope());
        assert_eq!(completion.matches, vec!["Alpha"]);
        assert_eq!(completion.cursor_start, cursor - 2);
        assert_eq!(completion.cursor_end, cursor);
    }

    #[test]
    fn inspects_variables_builtins_and_magics() {
        let text = inspect("B = Alpha + 1", 6, &scope()).unwrap();
        assert!(text.contains("shape:  [2, 3]"), "{text}");
        let text = inspect("x = matmul(", 11, &scope()).unwrap();
        assert!(text.starts_with("matmul(a, b)"), "{text}");
        assert!(inspect("%why", 3, &scope()).unwrap().starts_with("%why"));
        assert_eq!(inspect("   ", 1, &scope()), None);
    }

    #[test]
    fn completeness_follows_the_grammar() {
        assert_eq!(completeness("A = 1"), Completeness::Complete);
        assert_eq!(
            completeness("for i in 0..3 {"),
            Completeness::Incomplete {
                indent: "    ".to_string()
            }
        );
        assert_eq!(
            completeness("B = A +"),
            Completeness::Incomplete {
                indent: String::new()
            }
        );
        assert_eq!(completeness("%timeline"), Completeness::Complete);
        assert!(is_invalid("B = A + )"));
        assert!(!is_invalid("%why A\nB = A + 1"));
    }
}
