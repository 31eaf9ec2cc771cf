//! `KARPENTER_SIM_LOG`: the stderr logger the binary and the tests install, so a seed's run can
//! be read with the controller's own logs (`KARPENTER_SIM_LOG=karpenter_core=debug`).

/// The environment variable naming what to log, in `tracing_subscriber`'s `Targets` syntax
/// (`karpenter_sim=debug,karpenter_core=info`).
pub const LOG_ENV: &str = "KARPENTER_SIM_LOG";

/// Installs the stderr logger [`LOG_ENV`] asks for, if it is set; a malformed value, or a logger
/// already installed, is an error naming it.
pub fn install_from_env() -> Result<(), String> {
    let Ok(spec) = std::env::var(LOG_ENV) else {
        return Ok(());
    };
    let targets: tracing_subscriber::filter::Targets = spec
        .parse()
        .map_err(|err| format!("{LOG_ENV}={spec:?}: {err}"))?;
    use tracing_subscriber::layer::SubscriberExt;
    let subscriber = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false),
        )
        .with(targets);
    tracing::subscriber::set_global_default(subscriber).map_err(|err| err.to_string())
}
