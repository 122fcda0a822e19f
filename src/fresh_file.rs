//! Output files created afresh: a view's file that already exists is replaced by a new file of
//! the same name, not truncated in place.
//!
//! Truncating a large file costs its writer twice on Linux: the truncation frees every cached
//! page of the old contents in the `open` call, before the run starts, and ext4 (like XFS)
//! flushes a file truncated to zero when it is closed, at the end of the run, so that a crash
//! cannot leave it empty (ext4's `auto_da_alloc`). Rerunning `dep run --trace t.json` over a
//! 1 GB trace paid about 0.6 s for both. Here the old file is unlinked while a descriptor keeps
//! it alive, a new file takes its name (with its permissions), and the descriptor is closed on a
//! thread of its own, where the kernel frees the old pages while the run goes.
//!
//! Files that are not plain files with one name (links, devices, named pipes, a file with other
//! hard links) are opened and truncated as before: replacing them would change what the name
//! points to.

use std::fs::{self, File};
use std::io;
#[cfg(unix)]
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Creates `path` for writing, empty: a plain file already there is replaced by a new one (see
/// the module's documentation); anything else is truncated as [`File::create`] does.
pub(crate) fn create(path: &Path) -> io::Result<File> {
    match replace(path) {
        Some(file) => Ok(file),
        None => File::create(path),
    }
}

/// Writes `contents` to a file created by [`create`].
pub(crate) fn write(path: &Path, contents: &[u8]) -> io::Result<()> {
    io::Write::write_all(&mut create(path)?, contents)
}

/// The new file that replaced a plain file of one name at `path`; `None` when there is no such
/// file or it could not be replaced (the caller then truncates).
fn replace(path: &Path) -> Option<File> {
    let metadata = fs::symlink_metadata(path).ok()?;
    if !metadata.file_type().is_file() || !has_one_name(&metadata) {
        return None;
    }
    // Held open, the old file outlives its name; its pages are freed when this closes. Opened
    // for writing, as truncating it would be: a file this user may not write is left to
    // `File::create`, which refuses it as before (its directory may allow the unlink).
    let old = File::options().write(true).open(path).ok()?;
    fs::remove_file(path).ok()?;
    let new = File::options()
        .write(true)
        .create_new(true)
        .open(path)
        .ok()?;
    // The new file is the user's as the old one was; a failure here leaves the default mode.
    let _ = new.set_permissions(metadata.permissions());
    let closing = std::thread::Builder::new()
        .name("dep-old-file".into())
        .spawn(move || drop(old));
    // Without a thread, the old file closes here (the truncation's cost, no worse).
    drop(closing);
    Some(new)
}

/// Whether the file has no other hard link (replacing it would leave the others behind).
#[cfg(unix)]
fn has_one_name(metadata: &fs::Metadata) -> bool {
    metadata.nlink() == 1
}

/// Whether the file has no other hard link: not known here, so it is truncated in place.
#[cfg(not(unix))]
fn has_one_name(_metadata: &fs::Metadata) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(unix)]
    use std::io::Write;

    #[cfg(unix)]
    #[test]
    fn an_existing_file_is_replaced_by_a_new_one_with_its_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        fs::write(&path, "old contents, longer than the new").unwrap();
        let mut permissions = fs::metadata(&path).unwrap().permissions();
        permissions.set_mode(0o640);
        fs::set_permissions(&path, permissions.clone()).unwrap();
        let old_inode = inode(&path);
        let mut file = create(&path).unwrap();
        file.write_all(b"new").unwrap();
        drop(file);
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        assert_ne!(
            inode(&path),
            old_inode,
            "a new file, not the old one truncated"
        );
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o640
        );
    }

    #[test]
    fn a_missing_file_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.json");
        write(&path, b"{}").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "{}");
    }

    #[cfg(unix)]
    #[test]
    fn a_file_with_another_hard_link_is_truncated_so_both_names_see_the_new_contents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let other = dir.path().join("other.json");
        fs::write(&path, "old contents").unwrap();
        fs::hard_link(&path, &other).unwrap();
        write(&path, b"new").unwrap();
        assert_eq!(fs::read_to_string(&other).unwrap(), "new");
        assert_eq!(inode(&path), inode(&other));
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_is_written_through_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.json");
        let link = dir.path().join("t.json");
        fs::write(&target, "old contents").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write(&link, b"new").unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
    }

    #[cfg(unix)]
    fn inode(path: &Path) -> u64 {
        fs::metadata(path).unwrap().ino()
    }
}
