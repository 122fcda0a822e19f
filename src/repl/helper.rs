//! The line editor's helper: completion of names, builtins, keywords and colon commands; a hint
//! with a builtin's signature (followed by the live panel, see [`crate::repl::panel`]); and
//! syntax colouring from the grammar's token classifier.
//!
//! The helper lives inside rustyline's `Editor` while the session lives in the REPL loop, so what
//! it needs from the session (the names in scope) is copied into [`Shared`] before each prompt.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};

use dep_grammar as grammar;
use dep_interp::builtins;
use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::highlight::{CmdKind, Highlighter};
use rustyline::hint::{Hint, Hinter};
use rustyline::validate::Validator;
use rustyline::{Context, Helper};

use crate::repl::panel::Panel;
use crate::repl::style::Style;
use dep_interp::commands;

/// What the helper shares with the REPL loop.
#[derive(Default)]
pub(crate) struct Shared {
    /// The session's names (variables and functions), refreshed before each prompt.
    pub(crate) names: Mutex<Vec<String>>,
    /// The recorded graphs' names, refreshed with `names`.
    pub(crate) graphs: Mutex<Vec<String>>,
}

/// The rustyline helper of the REPL.
pub(crate) struct DepHelper {
    pub(crate) shared: Arc<Shared>,
    pub(crate) panel: Arc<Panel>,
    pub(crate) style: Style,
    filenames: FilenameCompleter,
}

impl DepHelper {
    pub(crate) fn new(shared: Arc<Shared>, panel: Arc<Panel>, style: Style) -> DepHelper {
        DepHelper {
            shared,
            panel,
            style,
            filenames: FilenameCompleter::new(),
        }
    }

    fn names(&self) -> Vec<String> {
        self.shared
            .names
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn graphs(&self) -> Vec<String> {
        self.shared
            .graphs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A hint that is only shown: the right arrow must not insert a signature or the panel.
pub(crate) struct ShownHint(String);

impl Hint for ShownHint {
    fn display(&self) -> &str {
        &self.0
    }

    fn completion(&self) -> Option<&str> {
        None
    }
}

impl Helper for DepHelper {}

impl Validator for DepHelper {}

impl Completer for DepHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        if let Some(command_line) = before.trim_start().strip_prefix(':') {
            return match command_line.split_once(char::is_whitespace) {
                None => {
                    let start = pos - command_line.len();
                    Ok((
                        start,
                        matching(
                            commands::COMMANDS.iter().map(|info| info.name),
                            command_line,
                        ),
                    ))
                }
                Some((command, _)) => self.complete_argument(command, line, pos, ctx),
            };
        }
        let start = word_start(before);
        let word = &before[start..];
        if word.is_empty() || word.starts_with(|c: char| c.is_ascii_digit()) {
            return Ok((pos, Vec::new()));
        }
        let names = self.names();
        let candidates = names
            .iter()
            .map(String::as_str)
            .chain(builtins::BUILTINS.iter().map(|info| info.name))
            .chain(builtins::OTHER_FUNCTIONS.iter().map(|(name, _, _)| *name))
            .chain(grammar::KEYWORDS.iter().copied());
        Ok((start, matching(candidates, word)))
    }
}

impl DepHelper {
    /// Completes the argument of a colon command: a file, a variable, a recorded graph, an
    /// engine, on/off.
    fn complete_argument(
        &self,
        command: &str,
        line: &str,
        pos: usize,
        ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        let start = before
            .rfind(char::is_whitespace)
            .map_or(0, |offset| offset + 1);
        let word = &before[start..];
        let fixed: &[&str] = match command {
            "load" | "timeline" | "trace" => {
                return self.filenames.complete(line, pos, ctx);
            }
            "dag" => {
                // A recorded graph's name, or a file to write the DAG to.
                let graphs = self.graphs();
                let mut found = matching(graphs.iter().map(String::as_str), word);
                let (file_start, files) = self.filenames.complete(line, pos, ctx)?;
                if found.is_empty() {
                    return Ok((file_start, files));
                }
                if file_start == start {
                    found.extend(files);
                }
                return Ok((start, found));
            }
            "graph" => {
                let graphs = self.graphs();
                return Ok((start, matching(graphs.iter().map(String::as_str), word)));
            }
            "why" => {
                let names = self.names();
                return Ok((start, matching(names.iter().map(String::as_str), word)));
            }
            "engine" => {
                return Ok((start, matching(commands::engine_names().into_iter(), word)));
            }
            "watch" => &["on", "off"],
            _ => &[],
        };
        Ok((start, matching(fixed.iter().copied(), word)))
    }
}

impl Hinter for DepHelper {
    type Hint = ShownHint;

    fn hint(&self, line: &str, pos: usize, _ctx: &Context<'_>) -> Option<ShownHint> {
        let mut hint = if pos == line.len() {
            signature_hint(line)
        } else {
            String::new()
        };
        let panel = match self.panel.is_left_out_now() {
            true => String::new(),
            false => self.panel.refresh(),
        };
        if !panel.is_empty() {
            hint.push('\n');
            hint.push_str(&panel);
        }
        (!hint.is_empty()).then_some(ShownHint(hint))
    }
}

impl Highlighter for DepHelper {
    fn highlight<'l>(&self, line: &'l str, _pos: usize) -> Cow<'l, str> {
        if !self.style.colour || line.trim_start().starts_with(':') {
            return Cow::Borrowed(line);
        }
        Cow::Owned(self.style.highlight_source(line))
    }

    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(
        &'s self,
        prompt: &'p str,
        _default: bool,
    ) -> Cow<'b, str> {
        Cow::Owned(self.style.prompt(prompt))
    }

    fn highlight_hint<'h>(&self, hint: &'h str) -> Cow<'h, str> {
        // The hint is a signature (on the input line), then the panel's lines. The panel keeps a
        // coloured twin of its plain text; the signature is dimmed.
        let (signature, panel) = match hint.split_once('\n') {
            Some((signature, panel)) => (signature, Some(panel)),
            None => (hint, None),
        };
        let mut out = self.style.dim(signature);
        if let Some(panel) = panel {
            out.push('\n');
            out.push_str(&self.panel.coloured_text_for(panel));
        }
        Cow::Owned(out)
    }

    fn highlight_char(&self, _line: &str, _pos: usize, kind: CmdKind) -> bool {
        // Colours depend on whole words, so redraw on every edit; moving the cursor changes
        // nothing.
        self.style.colour && kind != CmdKind::MoveCursor
    }
}

/// The signature of the builtin being typed: its rest after a complete name (`zeros` shows
/// `(d...)  a tensor of zeros...`), or the whole signature inside its call's brackets.
pub(crate) fn signature_hint(line: &str) -> String {
    let start = word_start(line);
    let word = &line[start..];
    if let Some((signature, doc)) = lookup_signature(word) {
        let rest = signature.strip_prefix(word).unwrap_or(signature);
        return format!("{rest}  {doc}");
    }
    // Inside a call: the innermost bracket left open, if a function name comes right before it.
    let mut depth = 0usize;
    for (offset, character) in line.char_indices().rev() {
        match character {
            ')' | ']' => depth += 1,
            '(' | '[' if depth > 0 => depth -= 1,
            '(' => {
                let callee_end = line[..offset].trim_end().len();
                let callee = &line[word_start(&line[..callee_end])..callee_end];
                return match lookup_signature(callee) {
                    Some((signature, _)) => format!("    {signature}"),
                    None => String::new(),
                };
            }
            '[' => return String::new(),
            _ => {}
        }
    }
    String::new()
}

fn lookup_signature(name: &str) -> Option<(&'static str, &'static str)> {
    if name.is_empty() {
        return None;
    }
    if let Some(info) = builtins::lookup(name) {
        return Some((info.signature, info.doc));
    }
    builtins::OTHER_FUNCTIONS
        .iter()
        .find(|(other, _, _)| *other == name)
        .map(|(_, signature, doc)| (*signature, *doc))
}

/// The byte offset where the identifier that ends `text` starts.
fn word_start(text: &str) -> usize {
    // After the last character that is no part of a word, however many bytes it takes (`ü`).
    text.char_indices()
        .rev()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
        .map_or(0, |(offset, c)| offset + c.len_utf8())
}

/// The candidates starting with `prefix`, sorted, without duplicates.
fn matching<'a>(candidates: impl Iterator<Item = &'a str>, prefix: &str) -> Vec<Pair> {
    let mut found: Vec<&str> = candidates
        .filter(|candidate| candidate.starts_with(prefix))
        .collect();
    found.sort_unstable();
    found.dedup();
    found
        .into_iter()
        .map(|candidate| Pair {
            display: candidate.to_string(),
            replacement: candidate.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_hints_follow_names_and_open_calls() {
        assert_eq!(
            signature_hint("X = zeros"),
            "(d...)  a tensor of zeros with dimensions d"
        );
        assert_eq!(signature_hint("X = zeros(3, "), "    zeros(d...)");
        assert_eq!(signature_hint("X = matmul(A, ones(2)"), "    matmul(a, b)");
        assert_eq!(signature_hint("X = A[1, "), "");
        assert_eq!(signature_hint("X = A + 1"), "");
        assert_eq!(signature_hint(""), "");
    }

    fn complete(line: &str, names: &[&str]) -> (usize, Vec<String>) {
        let shared = Arc::new(Shared::default());
        *shared.names.lock().unwrap() = names.iter().map(|name| name.to_string()).collect();
        let style = Style { colour: false };
        let helper = DepHelper::new(shared, Arc::new(Panel::new(None, style)), style);
        let history = rustyline::history::DefaultHistory::new();
        let (start, pairs) = helper
            .complete(line, line.len(), &Context::new(&history))
            .unwrap();
        (
            start,
            pairs.into_iter().map(|pair| pair.replacement).collect(),
        )
    }

    #[test]
    fn completes_names_builtins_keywords_and_commands() {
        assert_eq!(complete("X = ze", &[]), (4, vec!["zeros".to_string()]));
        assert_eq!(
            complete("print we", &["weights", "W"]),
            (6, vec!["weights".to_string()])
        );
        assert_eq!(
            complete("f", &["fc"]),
            (
                0,
                vec!["fc".to_string(), "for".to_string(), "full".to_string()]
            )
        );
        assert_eq!(
            complete(":w", &[]),
            (1, vec!["watch".to_string(), "why".to_string()])
        );
        assert_eq!(
            complete(":why Lo", &["Loss", "A"]),
            (5, vec!["Loss".to_string()])
        );
        assert_eq!(
            complete(":engine th", &[]),
            (8, vec!["threaded".to_string()])
        );
        assert_eq!(complete("X = 1", &[]), (5, Vec::<String>::new()));
    }

    #[test]
    fn words_end_at_non_identifier_characters() {
        assert_eq!(word_start("X = ze"), 4);
        assert_eq!(word_start("ze"), 0);
        assert_eq!(word_start("f(a_1"), 2);
        // A character of several bytes before the word (it panicked, ending the session, as
        // `c = load("ü` was typed).
        assert_eq!(word_start("load(\"ü"), 8);
        assert_eq!(word_start("x = 日本ze"), 10);
        assert_eq!(signature_hint("c = load(\"ünï 日本"), "    load(path)");
    }
}
