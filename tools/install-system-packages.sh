#!/usr/bin/env bash
# Debian packages the course needs: bubblewrap (the grading sandbox), util-linux (setpriv,
# prlimit: the sandbox drops to an unprivileged user with resource limits), chromium (the
# book's tests open the built pages in headless Chromium) and graphviz (the book's diagrams are
# Graphviz sources, drawn at build time), git and passwd (the course hub: nbgitpuller clones with
# git, `hub start --create-users` runs useradd), e2fsprogs and mount (the hub gives each user a
# home of fixed size: an ext4 image, mounted), openssl (the hub's test serves HTTPS with a
# self-signed certificate) and, where npm is missing, nodejs and npm (the book's offline assets and
# the hub's proxy come from npm). apt-get install is idempotent.
# Runs as root on CI and the course machines; elsewhere it asks sudo, or says what to install.
set -euo pipefail
packages=(bubblewrap util-linux chromium graphviz git passwd e2fsprogs mount openssl)
command -v npm >/dev/null || packages+=(nodejs npm)
if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}"
elif command -v sudo >/dev/null; then
    sudo apt-get update -qq
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}"
else
    echo "please install the Debian packages: ${packages[*]}" >&2
    exit 1
fi
