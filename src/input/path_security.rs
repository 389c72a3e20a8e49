//! Keeps user-supplied dataset paths inside an allowed directory, with the
//! semantics of `@mlx-node/trl`'s path-security helpers so that callers moving
//! from the JS package see the same accept/reject decisions and messages.
//!
//! Resolution is lexical, like Node's `path.resolve`: `.` and `..` are folded
//! without consulting the filesystem, and the current directory is passed in
//! explicitly (instead of read from the process) so every decision is a pure
//! function of its arguments unless `follow_symlinks: Some(false)` is asked for.
//! Paths are treated with POSIX rules (macOS and Linux are the targets).

use std::error::Error;
use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Error code shared by every rejection, stable for JS callers.
pub const PATH_TRAVERSAL: &str = "PATH_TRAVERSAL";

/// Environment variable the reference consults for the default allowed root.
pub const DATA_ROOT_ENV: &str = "MLX_NODE_DATA_ROOT";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathOptions {
    /// Returned verbatim by [`allowed_root`] when non-empty (not resolved, as
    /// in the reference, so a relative root also appears relative in messages).
    pub allowed_root: Option<String>,
    /// Extension over the reference, which never looks at the filesystem:
    /// `Some(false)` additionally requires the real location of the path
    /// (symlinks resolved) to lie inside the real location of the root.
    /// `None` and `Some(true)` keep the reference's lexical-only check.
    pub follow_symlinks: Option<bool>,
}

/// Rejection of a path. `resolved_path` and `allowed_root` hold the two
/// arguments exactly as the check received them, mirroring the properties of
/// the reference's `PathTraversalError`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathError {
    pub code: &'static str,
    pub message: String,
    pub resolved_path: PathBuf,
    pub allowed_root: PathBuf,
}

impl PathError {
    fn new(message: String, path: &Path, root: &Path) -> Self {
        PathError {
            code: PATH_TRAVERSAL,
            message,
            resolved_path: path.to_path_buf(),
            allowed_root: root.to_path_buf(),
        }
    }

    fn outside(path: &Path, root: &Path) -> Self {
        let message = format!(
            "Path traversal detected: \"{}\" is outside allowed directory \"{}\"",
            path.to_string_lossy(),
            root.to_string_lossy()
        );
        PathError::new(message, path, root)
    }
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error for PathError {}

/// Root that dataset paths must stay within: a non-empty `opts.allowed_root`
/// as given, else a non-empty `env_value` (the value of [`DATA_ROOT_ENV`])
/// resolved against `cwd`, else `cwd`. Empty strings count as unset because
/// the reference tests them for truthiness.
pub fn allowed_root(opts: &PathOptions, env_value: Option<&str>, cwd: &Path) -> PathBuf {
    if let Some(root) = opts.allowed_root.as_deref().filter(|r| !r.is_empty()) {
        return PathBuf::from(root);
    }
    match env_value.filter(|v| !v.is_empty()) {
        Some(env_root) => resolve(cwd, &[Path::new(env_root)]),
        None => cwd.to_path_buf(),
    }
}

/// Checks that `path` lies within `root` (or is `root`); relative arguments
/// are taken relative to `cwd`, which must be absolute.
///
/// Deliberate correction: the reference flags a path as escaping when the
/// text of its root-relative form starts with `..`, so it also rejects
/// entries such as `..foo.jsonl` or `...` that sit directly inside the root.
/// Here only a genuine `..` component counts as leaving the root, so those
/// names are accepted; every other decision matches the reference.
pub fn validate_containment(
    path: &Path,
    root: &Path,
    cwd: &Path,
    opts: &PathOptions,
) -> Result<(), PathError> {
    let abs_path = resolve(cwd, &[path]);
    let abs_root = resolve(cwd, &[root]);
    // Component-wise, so a sibling such as `/a/root2` is not inside `/a/root`.
    if !abs_path.starts_with(&abs_root) {
        return Err(PathError::outside(path, root));
    }
    if opts.follow_symlinks == Some(false) {
        check_real_containment(&abs_path, &abs_root, path, root)?;
    }
    Ok(())
}

/// Resolves `path` against `root` (itself resolved against `cwd`), checks
/// containment with [`validate_containment`] and returns the absolute,
/// normalized path (no `.`/`..`, no trailing separator). On rejection the
/// error reports the resolved path and `root` as given.
pub fn resolve_and_validate(
    path: &str,
    root: &Path,
    cwd: &Path,
    opts: &PathOptions,
) -> Result<PathBuf, PathError> {
    let resolved = resolve(cwd, &[root, Path::new(path)]);
    validate_containment(&resolved, root, cwd, opts)?;
    Ok(resolved)
}

/// Lexical equivalent of Node's `path.resolve(...segments)` with `cwd` as the
/// process directory: the last absolute segment restarts the path, empty
/// segments are ignored, and `..` at the filesystem root stays at the root.
fn resolve(cwd: &Path, segments: &[&Path]) -> PathBuf {
    let mut joined = cwd.to_path_buf();
    for segment in segments {
        joined.push(segment);
    }
    normalize(&joined)
}

fn normalize(path: &Path) -> PathBuf {
    let mut prefix: Vec<Component<'_>> = Vec::new();
    let mut parts: Vec<Component<'_>> = Vec::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => prefix.push(component),
            Component::CurDir => {}
            Component::ParentDir => match parts.last() {
                Some(Component::Normal(_)) => {
                    parts.pop();
                }
                // Above the root there is nowhere to go, as in Node; a relative
                // path keeps the leading `..`.
                _ if !prefix.is_empty() => {}
                _ => parts.push(component),
            },
            Component::Normal(_) => parts.push(component),
        }
    }
    prefix.iter().chain(parts.iter()).collect()
}

fn check_real_containment(
    abs_path: &Path,
    abs_root: &Path,
    path: &Path,
    root: &Path,
) -> Result<(), PathError> {
    let unresolvable = |at: &Path, err: io::Error| {
        let message = format!(
            "Path traversal check failed: cannot resolve the real location of \"{}\": {}",
            at.to_string_lossy(),
            err
        );
        PathError::new(message, path, root)
    };
    let real_root = real_location(abs_root).map_err(|(at, err)| unresolvable(&at, err))?;
    let real_path = real_location(abs_path).map_err(|(at, err)| unresolvable(&at, err))?;
    if real_path.starts_with(&real_root) {
        return Ok(());
    }
    let message = format!(
        "Path traversal detected: \"{}\" resolves to \"{}\", outside the real location \"{}\" of allowed directory \"{}\"",
        path.to_string_lossy(),
        real_path.to_string_lossy(),
        real_root.to_string_lossy(),
        root.to_string_lossy()
    );
    Err(PathError::new(message, path, root))
}

/// Canonical location of an absolute, normalized path whose trailing
/// components may not exist yet (a dataset file named before it is written):
/// the deepest existing ancestor is canonicalized and the missing names are
/// appended, since names that do not exist cannot be symlinks. Anything that
/// exists but cannot be canonicalized (a dangling or looping link, a
/// permission error) is reported with the offending ancestor so the caller
/// can fail closed.
fn real_location(abs: &Path) -> Result<PathBuf, (PathBuf, io::Error)> {
    let mut existing = abs;
    let mut missing: Vec<OsString> = Vec::new();
    loop {
        match fs::symlink_metadata(existing) {
            Ok(_) => {
                let mut real =
                    fs::canonicalize(existing).map_err(|err| (existing.to_path_buf(), err))?;
                real.extend(missing.iter().rev());
                return Ok(real);
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                match (existing.parent(), existing.file_name()) {
                    (Some(parent), Some(name)) => {
                        missing.push(name.to_os_string());
                        existing = parent;
                    }
                    _ => return Err((existing.to_path_buf(), err)),
                }
            }
            Err(err) => return Err((existing.to_path_buf(), err)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const ROOT: &str = "/home/user/data";
    const CWD: &str = "/work/proj";

    fn lexical() -> PathOptions {
        PathOptions::default()
    }

    fn strict() -> PathOptions {
        PathOptions {
            allowed_root: None,
            follow_symlinks: Some(false),
        }
    }

    fn check(path: &str, root: &str) -> Result<(), PathError> {
        validate_containment(Path::new(path), Path::new(root), Path::new(CWD), &lexical())
    }

    fn outside_message(path: &str, root: &str) -> String {
        format!("Path traversal detected: \"{path}\" is outside allowed directory \"{root}\"")
    }

    fn assert_outside(result: Result<(), PathError>, path: &str, root: &str) {
        let err = result.expect_err("path should be rejected");
        assert_eq!(err.code, "PATH_TRAVERSAL");
        assert_eq!(err.message, outside_message(path, root));
        assert_eq!(err.to_string(), outside_message(path, root));
        assert_eq!(err.resolved_path, PathBuf::from(path));
        assert_eq!(err.allowed_root, PathBuf::from(root));
    }

    #[test]
    fn allowed_root_prefers_option_verbatim() {
        let opts = PathOptions {
            allowed_root: Some("rel/../root/".to_string()),
            follow_symlinks: None,
        };
        assert_eq!(
            allowed_root(&opts, Some("/env/data/root"), Path::new(CWD)),
            PathBuf::from("rel/../root/")
        );
    }

    #[test]
    fn allowed_root_resolves_env_against_cwd() {
        assert_eq!(
            allowed_root(&lexical(), Some("/env/data/root/"), Path::new(CWD)),
            PathBuf::from("/env/data/root")
        );
        assert_eq!(
            allowed_root(&lexical(), Some("data/./x/../sets"), Path::new(CWD)),
            PathBuf::from("/work/proj/data/sets")
        );
    }

    #[test]
    fn allowed_root_treats_empty_strings_as_unset() {
        let empty = PathOptions {
            allowed_root: Some(String::new()),
            follow_symlinks: None,
        };
        assert_eq!(
            allowed_root(&empty, Some("/env"), Path::new(CWD)),
            PathBuf::from("/env")
        );
        assert_eq!(
            allowed_root(&empty, Some(""), Path::new(CWD)),
            PathBuf::from(CWD)
        );
        assert_eq!(
            allowed_root(&lexical(), None, Path::new(CWD)),
            PathBuf::from(CWD)
        );
    }

    #[test]
    fn accepts_paths_inside_root_and_root_itself() {
        assert_eq!(check("/home/user/data/subdir/file.txt", ROOT), Ok(()));
        assert_eq!(check("/home/user/data/file.txt", ROOT), Ok(()));
        assert_eq!(check(ROOT, ROOT), Ok(()));
        assert_eq!(check("/home/user/data/./subdir/../file.txt", ROOT), Ok(()));
        assert_eq!(check("/home//user/data//x", ROOT), Ok(()));
        assert_eq!(check("/etc/passwd", "/"), Ok(()));
    }

    #[test]
    fn trailing_separators_do_not_matter() {
        assert_eq!(check("/home/user/data/", ROOT), Ok(()));
        assert_eq!(check(ROOT, "/home/user/data/"), Ok(()));
        assert_eq!(check("/home/user/data/sub/", "/home/user/data//"), Ok(()));
    }

    #[test]
    fn accepts_names_that_only_start_with_dots() {
        assert_eq!(check("/home/user/data/..foo.jsonl", ROOT), Ok(()));
        assert_eq!(check("/home/user/data/...", ROOT), Ok(()));
        assert_eq!(check("/home/user/data/..hidden/x.jsonl", ROOT), Ok(()));
    }

    #[test]
    fn rejects_parent_traversal() {
        let escaped = "/home/user/data/../../../etc/passwd";
        assert_outside(check(escaped, ROOT), escaped, ROOT);
        assert_outside(
            check("/home/user/data/..", ROOT),
            "/home/user/data/..",
            ROOT,
        );
        assert_outside(
            check("/home/user/etc/passwd", ROOT),
            "/home/user/etc/passwd",
            ROOT,
        );
    }

    #[test]
    fn rejects_absolute_paths_outside() {
        assert_outside(check("/etc/passwd", ROOT), "/etc/passwd", ROOT);
        assert_outside(check("/", ROOT), "/", ROOT);
    }

    #[test]
    fn rejects_sibling_with_common_prefix() {
        assert_outside(check("/a/root2", "/a/root"), "/a/root2", "/a/root");
        assert_outside(
            check("/a/root2/x.jsonl", "/a/root/"),
            "/a/root2/x.jsonl",
            "/a/root/",
        );
        assert_outside(
            check("/a/root/../root2", "/a/root"),
            "/a/root/../root2",
            "/a/root",
        );
    }

    #[test]
    fn relative_arguments_resolve_against_cwd() {
        assert_eq!(check("data/train.jsonl", "data"), Ok(()));
        assert_eq!(check("/work/proj/data/train.jsonl", "data/"), Ok(()));
        assert_eq!(check("train.jsonl", "."), Ok(()));
        assert_eq!(check("", CWD), Ok(()));
        assert_outside(check("../other/x", "."), "../other/x", ".");
        assert_outside(
            check("/work/proj/other", "data"),
            "/work/proj/other",
            "data",
        );
    }

    #[test]
    fn resolve_returns_normalized_absolute_path() {
        let ok = |p: &str, root: &str| {
            resolve_and_validate(p, Path::new(root), Path::new(CWD), &lexical())
        };
        assert_eq!(
            ok("subdir/file.txt", ROOT),
            Ok(PathBuf::from("/home/user/data/subdir/file.txt"))
        );
        assert_eq!(
            ok("/home/user/data/file.txt", ROOT),
            Ok(PathBuf::from("/home/user/data/file.txt"))
        );
        assert_eq!(ok("", ROOT), Ok(PathBuf::from(ROOT)));
        assert_eq!(
            ok("./a//b/../c/", ROOT),
            Ok(PathBuf::from("/home/user/data/a/c"))
        );
        assert_eq!(
            ok("..foo.jsonl", ROOT),
            Ok(PathBuf::from("/home/user/data/..foo.jsonl"))
        );
        assert_eq!(
            ok("x.jsonl", "data"),
            Ok(PathBuf::from("/work/proj/data/x.jsonl"))
        );
        assert_eq!(ok("/x", "/"), Ok(PathBuf::from("/x")));
    }

    #[test]
    fn resolve_reports_resolved_path_and_root_as_given() {
        let run = |p: &str, root: &str| {
            resolve_and_validate(p, Path::new(root), Path::new(CWD), &lexical()).map(|_| ())
        };
        assert_outside(run("../../../etc/passwd", ROOT), "/etc/passwd", ROOT);
        assert_outside(
            run("/etc/passwd", "/home/user/data/"),
            "/etc/passwd",
            "/home/user/data/",
        );
        assert_outside(run("../data2/x", ROOT), "/home/user/data2/x", ROOT);
        assert_outside(run("../x", "data"), "/work/proj/x", "data");
    }

    #[test]
    fn normalize_keeps_leading_parents_of_relative_paths() {
        assert_eq!(normalize(Path::new("../a/./b/..")), PathBuf::from("../a"));
        assert_eq!(normalize(Path::new("/../../a")), PathBuf::from("/a"));
    }

    /// A scratch directory under the system temp dir, removed on drop.
    struct Scratch {
        dir: PathBuf,
    }

    impl Scratch {
        fn new(name: &str) -> Scratch {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let unique = format!(
                "pathsec-{}-{}-{}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed),
                name
            );
            let dir = std::env::temp_dir().join(unique);
            fs::create_dir_all(dir.join("root/sub")).expect("create root");
            fs::create_dir_all(dir.join("outside")).expect("create outside");
            fs::write(dir.join("outside/secret.jsonl"), "{}\n").expect("write secret");
            fs::write(dir.join("root/sub/train.jsonl"), "{}\n").expect("write train");
            Scratch { dir }
        }

        fn root(&self) -> PathBuf {
            self.dir.join("root")
        }

        fn real(&self, rel: &str) -> PathBuf {
            fs::canonicalize(&self.dir)
                .expect("canonical scratch")
                .join(rel)
        }

        fn link(&self, target: &Path, at: &str) {
            std::os::unix::fs::symlink(target, self.dir.join(at)).expect("symlink");
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }

    fn resolve_in(
        s: &Scratch,
        p: &str,
        root: &Path,
        opts: &PathOptions,
    ) -> Result<PathBuf, PathError> {
        resolve_and_validate(p, root, &s.dir, opts)
    }

    #[test]
    fn symlink_escape_is_allowed_by_default_and_rejected_when_strict() {
        let s = Scratch::new("escape");
        s.link(&s.dir.join("outside"), "root/leak");
        let root = s.root();
        let lexical_path = root.join("leak/secret.jsonl");

        assert_eq!(
            resolve_in(&s, "leak/secret.jsonl", &root, &lexical()),
            Ok(lexical_path.clone())
        );
        let opted_in = PathOptions {
            allowed_root: None,
            follow_symlinks: Some(true),
        };
        assert_eq!(
            resolve_in(&s, "leak/secret.jsonl", &root, &opted_in),
            Ok(lexical_path.clone())
        );

        let err = resolve_in(&s, "leak/secret.jsonl", &root, &strict()).expect_err("escape");
        assert_eq!(err.code, "PATH_TRAVERSAL");
        assert_eq!(
            err.message,
            format!(
                "Path traversal detected: \"{}\" resolves to \"{}\", outside the real location \"{}\" of allowed directory \"{}\"",
                lexical_path.display(),
                s.real("outside/secret.jsonl").display(),
                s.real("root").display(),
                root.display()
            )
        );
        assert_eq!(err.resolved_path, lexical_path);
        assert_eq!(err.allowed_root, root);
    }

    #[test]
    fn strict_mode_rejects_links_to_missing_files_outside() {
        let s = Scratch::new("missing-target");
        s.link(&s.dir.join("outside"), "root/leak");
        let root = s.root();
        let err = resolve_in(&s, "leak/new/out.jsonl", &root, &strict()).expect_err("escape");
        assert_eq!(
            err.message,
            format!(
                "Path traversal detected: \"{}\" resolves to \"{}\", outside the real location \"{}\" of allowed directory \"{}\"",
                root.join("leak/new/out.jsonl").display(),
                s.real("outside/new/out.jsonl").display(),
                s.real("root").display(),
                root.display()
            )
        );
    }

    #[test]
    fn strict_mode_accepts_links_and_missing_files_inside() {
        let s = Scratch::new("inside");
        s.link(&s.dir.join("root/sub"), "root/alias");
        s.link(Path::new("sub/train.jsonl"), "root/rel-link.jsonl");
        let root = s.root();
        for (input, expected) in [
            ("alias/train.jsonl", "alias/train.jsonl"),
            ("rel-link.jsonl", "rel-link.jsonl"),
            ("sub/not-yet/written.jsonl", "sub/not-yet/written.jsonl"),
            ("..foo.jsonl", "..foo.jsonl"),
            ("", ""),
        ] {
            let want = if expected.is_empty() {
                root.clone()
            } else {
                root.join(expected)
            };
            assert_eq!(resolve_in(&s, input, &root, &strict()), Ok(want), "{input}");
        }
    }

    #[test]
    fn strict_mode_compares_against_the_real_root() {
        let s = Scratch::new("linked-root");
        s.link(&s.dir.join("root"), "root-link");
        let root = s.dir.join("root-link");
        assert_eq!(
            resolve_in(&s, "sub/train.jsonl", &root, &strict()),
            Ok(root.join("sub/train.jsonl"))
        );
        let outside = s.dir.join("outside/secret.jsonl");
        let err = validate_containment(&outside, &root, &s.dir, &strict()).expect_err("outside");
        assert_eq!(
            err.message,
            outside_message(&outside.to_string_lossy(), &root.to_string_lossy())
        );
    }

    #[test]
    fn strict_mode_fails_closed_on_dangling_links() {
        let s = Scratch::new("dangling");
        s.link(&s.dir.join("gone"), "root/dangling");
        let root = s.root();
        let err = resolve_in(&s, "dangling/x.jsonl", &root, &strict()).expect_err("dangling");
        assert_eq!(err.code, "PATH_TRAVERSAL");
        assert_eq!(
            err.message,
            format!(
                "Path traversal check failed: cannot resolve the real location of \"{}\": No such file or directory (os error 2)",
                root.join("dangling").display()
            )
        );
        assert_eq!(
            resolve_in(&s, "dangling/x.jsonl", &root, &lexical()),
            Ok(root.join("dangling/x.jsonl"))
        );
    }
}
