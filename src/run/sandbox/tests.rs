use super::*;

fn policy(lab: &Path) -> Policy {
    Policy {
        hidden: vec![lab.to_path_buf(), "/no/such/folder".into()],
        read_only: vec!["/no/such/tools".into()],
        writable: vec![],
        system: System {
            dirs: vec!["/usr".into(), "/etc".into()],
            links: vec![("usr/bin".into(), "/bin".into())],
            masked_files: vec!["/etc/hostname".into()],
            masked_dirs: vec!["/etc/ssl/private".into()],
            link_targets: vec![],
        },
        files: Some(SandboxFiles {
            passwd: lab.join("sandbox/passwd"),
            group: lab.join("sandbox/group"),
            empty: lab.join("sandbox/empty"),
        }),
        userns: true,
        homes: vec![],
        tmp_bytes: Some(1 << 20),
    }
}

#[test]
fn hidden_places_are_covered_before_the_run_s_own_come_back() {
    let tmp = tempfile::tempdir().unwrap();
    let lab = tmp.path().canonicalize().unwrap().join("lab");
    let ws = lab.join("workspaces/7");
    let home = lab.join("runs/7/home");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let policy = policy(&lab);
    let a = RunSandbox {
        policy: &policy,
        workspace: &ws,
        workspace_writable: true,
        read_only: &["/bin/sh".into()],
        read_only_files: &[],
        writable: std::slice::from_ref(&home),
        network: true,
        operator_paths: true,
    }
    .args();
    let at = |flag: &str, p: &str| {
        a.windows(2)
            .position(|w| w[0] == flag && w[1] == p)
            .unwrap_or_else(|| panic!("{flag} {p} in {a:?}"))
    };
    // Deny-by-default: the system folders only, never the whole machine.
    assert!(!a.windows(2).any(|w| w[0] == "--ro-bind" && w[1] == "/"));
    assert!(at("--ro-bind", "/usr") < at("--tmpfs", &s(&lab)));
    assert!(at("--tmpfs", &s(&lab)) < at("--bind", &s(&ws)));
    assert!(at("--tmpfs", &s(&lab)) < at("--bind", &s(&home)));
    assert_eq!(a.last().map(String::as_str), Some("--"));
    assert!(a.contains(&"--unshare-pid".to_owned()));
    assert!(!a.contains(&"--unshare-net".to_owned()));
    assert!(a.windows(2).any(|w| w[0] == "--cap-drop" && w[1] == "ALL"));
    assert!(a.windows(2).any(|w| w[0] == "--uid" && w[1] == "1000"));
    // The size cap goes right before the /tmp it caps.
    let tmp_at = at("--tmpfs", "/tmp");
    assert_eq!(a[tmp_at - 2..tmp_at], ["--size", "1048576"]);
    // A secret file is covered by the empty one; a secret folder by a tmpfs.
    assert!(
        a.windows(3)
            .any(|w| w[0] == "--ro-bind" && w[2] == "/etc/hostname")
    );
    at("--tmpfs", "/etc/ssl/private");
    assert!(a.windows(3).any(|w| w[0] == "--symlink" && w[2] == "/bin"));
    // A path that does not exist is not bound (bwrap would fail).
    assert!(!a.iter().any(|x| x.starts_with("/no/such/tools")), "{a:?}");
}

#[test]
fn a_jail_has_no_network_and_a_read_only_workspace() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().canonicalize().unwrap();
    let policy = policy(&ws.join("lab"));
    let a = RunSandbox {
        policy: &policy,
        workspace: &ws,
        workspace_writable: false,
        read_only: &[],
        read_only_files: &[],
        writable: &[],
        network: false,
        operator_paths: false,
    }
    .args();
    assert!(a.contains(&"--unshare-net".to_owned()));
    let ws = ws.to_string_lossy().into_owned();
    assert!(
        a.windows(3)
            .any(|w| w[0] == "--ro-bind" && w[1] == ws && w[2] == ws)
    );
    assert!(!a.windows(2).any(|w| w[0] == "--bind" && w[1] == ws));
}

#[test]
fn the_walk_masks_what_others_may_not_read() {
    let s = System::probe();
    if Path::new("/etc/shadow").exists() {
        assert!(
            s.masked_files.contains(&"/etc/shadow".into()),
            "{:?}",
            s.masked_files
        );
    }
    assert!(!s.masked_files.contains(&"/etc/hostname".into()));
    assert!(s.dirs.contains(&"/usr".into()));
}

#[test]
fn an_npm_install_is_bound_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let pkg = root.join("node_modules/@x/cli");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::create_dir_all(root.join("node_modules/.bin")).unwrap();
    std::fs::write(pkg.join("cli.js"), "").unwrap();
    let link = root.join("node_modules/.bin/cli");
    std::os::unix::fs::symlink("../@x/cli/cli.js", &link).unwrap();
    let none = Policy::default();
    let (real, dir) = install_of(&link, &none).unwrap();
    assert_eq!(real, pkg.join("cli.js"));
    assert_eq!(dir, root.join("node_modules"));
    // A program of the system is bound alone, not its folder.
    let (real, dir) = install_of(Path::new("/bin/sh"), &none).unwrap();
    assert_eq!(dir, real);
}

/// Issue 40 §10: a CLI that is one file in a folder binds the file, never
/// its neighbours; a native installer's version folder is bound whole; a
/// folder that is or holds the operator's home or a hidden place is
/// refused with why.
#[test]
fn a_cli_binds_its_program_never_its_neighbours() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let home = root.join("home");
    let lab = root.join("lab");
    for d in [home.join("bin"), home.join(".ssh"), lab.clone()] {
        std::fs::create_dir_all(d).unwrap();
    }
    let policy = Policy {
        hidden: vec![lab.clone()],
        homes: vec![home.clone()],
        ..Policy::default()
    };
    // `<home>/bin/claude` beside other tools, and a wrapper in the home.
    for program in [home.join("bin/claude"), home.join("claude")] {
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        let (real, bound) = install_of(&program, &policy).unwrap();
        assert_eq!((&real, &bound), (&program, &program));
    }
    // The native installer: a link to `…/versions/<version>`.
    let version = home.join(".local/share/claude/versions/2.1.332");
    std::fs::create_dir_all(version.parent().unwrap()).unwrap();
    std::fs::write(&version, "ELF").unwrap();
    let link = home.join(".local/bin/claude");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&version, &link).unwrap();
    assert_eq!(install_of(&link, &policy).unwrap().1, version);
    let folder = home.join(".local/share/codex/versions/0.171.0/bin");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("codex"), "ELF").unwrap();
    assert_eq!(
        install_of(&folder.join("codex"), &policy).unwrap().1,
        folder.parent().unwrap()
    );
    // An npm install that holds the operator's home: refused.
    let wide = Policy {
        homes: vec![root.join("node_modules/me")],
        ..Policy::default()
    };
    let cli = root.join("node_modules/@x/cli.js");
    std::fs::create_dir_all(cli.parent().unwrap()).unwrap();
    std::fs::create_dir_all(root.join("node_modules/me")).unwrap();
    std::fs::write(&cli, "").unwrap();
    let why = install_of(&cli, &wide).unwrap_err();
    assert!(
        why.contains("which holds") && why.contains("node_modules/me"),
        "{why}"
    );
    // A program in lab's data dir: refused.
    std::fs::write(lab.join("claude"), "").unwrap();
    let why = install_of(&lab.join("claude"), &policy).unwrap_err();
    assert!(why.contains("which no run may see"), "{why}");
    assert!(
        install_of(&root.join("nope"), &policy)
            .unwrap_err()
            .contains("cannot find")
    );
}
