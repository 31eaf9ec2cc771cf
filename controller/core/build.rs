//! Records the compiler's version for `karpenter_build_info`'s `goversion` label
//! (`crate::metrics::cloudprovider::BuildInfo`): the Rust build's counterpart of upstream's
//! `runtime.Version()`.

fn main() {
    println!("cargo:rerun-if-env-changed=RUSTC");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let Ok(output) = std::process::Command::new(rustc).arg("--version").output() else {
        return;
    };
    if output.status.success() {
        let version = String::from_utf8_lossy(&output.stdout);
        println!("cargo:rustc-env=KARPENTER_RUSTC_VERSION={}", version.trim());
    }
}
