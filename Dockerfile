# syntax=docker/dockerfile:1
# The karpenter-rs controller image: one static `karpenter` binary on distroless/static, run as
# UID/GID 65532 with nothing else in the image (no shell, no package manager, no libc). Build with
# `cargo xtask image` (or `docker build -t IMAGE .`); the chart runs it as `karpenter controller`
# with a read-only root file system.

ARG RUST_VERSION=1.95

# ---- build: a static musl binary, release profile ----
FROM rust:${RUST_VERSION}-bookworm AS build
# musl-gcc links the binary statically; cmake and clang build aws-lc (the AWS SDK's TLS crypto).
# Versions come with the pinned Rust image's Debian release: pinning them again breaks on its
# point releases.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends musl-tools cmake clang \
    && rm -rf /var/lib/apt/lists/*
ARG TARGETARCH
RUN case "${TARGETARCH:-amd64}" in \
        amd64) echo x86_64-unknown-linux-musl > /rust-target ;; \
        arm64) echo aarch64-unknown-linux-musl > /rust-target ;; \
        *) echo "unsupported TARGETARCH ${TARGETARCH}" >&2; exit 1 ;; \
    esac \
    && rustup target add "$(cat /rust-target)"
WORKDIR /src
COPY . .
# The revision `karpenter_build_info{commit}` reports (`cargo xtask image` passes `git rev-parse
# HEAD`; empty without it).
ARG KARPENTER_COMMIT=""
ENV KARPENTER_COMMIT=${KARPENTER_COMMIT}
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --package karpenter-cli --bin karpenter \
        --target "$(cat /rust-target)" \
    && cp "target/$(cat /rust-target)/release/karpenter" /karpenter

# ---- run: the binary alone ----
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /karpenter /karpenter
USER 65532:65532
ENTRYPOINT ["/karpenter"]
CMD ["controller"]
