//! The names a function's locals take in the engine (`y'` for `y`), the label of their
//! deletion (`del y'`) and the key of their frame's map (`y`), made once per name rather than
//! at every call, which makes each local anew and deletes it when the call ends.

use std::sync::Arc;

use rustc_hash::FxHashMap;

/// The engine's names of the locals made so far, by the name in the source.
#[derive(Default)]
pub(crate) struct LocalNames {
    by_name: FxHashMap<Arc<str>, Names>,
}

/// What a local named `y` in the source is called in the engine.
pub(crate) struct Names {
    /// `y`, shared by every call's map of locals.
    pub(crate) name: Arc<str>,
    /// Its variable's name, `y'`.
    pub(crate) var: Arc<str>,
    /// The label of the op that deletes it, `del y'`.
    pub(crate) deletion: Arc<str>,
}

impl LocalNames {
    /// The names of a local called `name` in the source.
    pub(crate) fn of(&mut self, name: &str) -> &Names {
        if !self.by_name.contains_key(name) {
            let var: Arc<str> = Arc::from(format!("{name}'"));
            let deletion = Arc::from(format!("del {var}"));
            let name: Arc<str> = Arc::from(name);
            let names = Names {
                name: name.clone(),
                var,
                deletion,
            };
            self.by_name.insert(name, names);
        }
        &self.by_name[name]
    }

    /// The label of the deletion of the variable named `var`, if it is a local's of that name
    /// made here.
    pub(crate) fn deletion_of(&self, var: &str) -> Option<&Arc<str>> {
        let names = self.by_name.get(var.strip_suffix('\'')?)?;
        (*names.var == *var).then_some(&names.deletion)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_locals_names_are_made_once_and_found_by_its_variables_name() {
        let mut names = LocalNames::default();
        let first = names.of("y").var.clone();
        assert_eq!(&*first, "y'");
        assert!(Arc::ptr_eq(&first, &names.of("y").var), "made once");
        assert_eq!(&*names.of("y").name, "y");
        assert_eq!(names.of("y").deletion.as_ref(), "del y'");
        assert_eq!(
            names.deletion_of("y'").map(|label| &**label),
            Some("del y'")
        );
        assert_eq!(names.deletion_of("y"), None, "a global of the same name");
        assert_eq!(names.deletion_of("z'"), None, "no local of that name made");
        assert_eq!(names.deletion_of("f.x#3"), None);
    }
}
