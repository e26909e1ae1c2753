//! The command-line tool on a manifest that claims far more cells than its
//! files hold (the library's reads of it: tests/hostile_manifest.rs): every
//! command that reads it exits with an error naming the claim, none aborts.

mod common;

use common::hostile;
use deltacells::format::manifest::Manifest;
use deltacells::storage::Store;

#[test]
fn the_cli_refuses_the_hostile_manifest_without_aborting() {
    for (name, lie) in [("true-bytes", None), ("lying-bytes", Some(1u64 << 40))] {
        let dir =
            std::env::temp_dir().join(format!("deltacells-hostile-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("tiles")).unwrap();
        let (store, manifest) = hostile(lie);
        let key = Manifest::tile_key(0);
        std::fs::write(dir.join(&key), store.get(&key).unwrap().unwrap().as_bytes()).unwrap();
        std::fs::write(dir.join("manifest.json"), manifest).unwrap();
        let d = dir.to_str().unwrap();
        for args in [
            vec!["bench", d, "--reps", "1"],
            vec!["cat", d, "--cells", "0:"],
            vec!["cat", d, "--cells", "68719476735", "--format", "mtx"],
            vec!["verify", d],
        ] {
            let (code, _, stderr) = common::run_cli_code(&args);
            assert_eq!(code, Some(1), "{args:?}: {stderr}");
            assert!(
                stderr.contains("68719476736 cells") || stderr.contains("bytes, the manifest says"),
                "{args:?}: {stderr}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
