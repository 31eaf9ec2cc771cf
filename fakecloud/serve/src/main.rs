//! The `fakecloud` binary: `fakecloud serve --listen ADDR [--seed N] [--cluster NAME]` serves an
//! account ready for cluster NAME until stopped (Ctrl-C or SIGTERM).

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "fakecloud",
    about = "A fake AWS account for Karpenter, on the real wire protocols"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serves EC2, SQS (JSON and Query), SSM, IAM, EKS and Pricing on one endpoint.
    Serve {
        /// Address to listen on (port 0: any free port).
        #[arg(long, default_value = "127.0.0.1:4566")]
        listen: SocketAddr,
        /// Seeds every id and random draw of the fake.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The cluster the account is ready for (discovery tags, node role, queue, EKS cluster).
        #[arg(long, default_value = "karpenter")]
        cluster: String,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let Command::Serve {
        listen,
        seed,
        cluster,
    } = Cli::parse().command;
    let world = fakecloud_serve::World::for_cluster(&cluster, seed);
    let server = match fakecloud_serve::serve(world.clone(), listen).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("fakecloud: cannot listen on {listen}: {e}");
            return ExitCode::from(2);
        }
    };
    let endpoint = server.endpoint();
    let account = &world.account;
    println!(
        "fakecloud: serving EC2, SQS, SSM, IAM, EKS and Pricing for cluster {cluster} (region {}, account {}, seed {seed})",
        account.region(),
        account.account_id()
    );
    println!("AWS_ENDPOINT_URL={endpoint}");
    println!(
        "queue: {endpoint}/{}/{}",
        account.account_id(),
        account.queue_name()
    );
    println!("control API: {endpoint}/fakecloud/");
    wait_for_stop().await;
    server.shutdown().await;
    println!("fakecloud: stopped");
    ExitCode::SUCCESS
}

async fn wait_for_stop() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
