#!/usr/bin/env bash
# Data loader: llm.c order, shuffling, state round trip, and every bad-shard error.
set -eu
cd "$(dirname "$0")/.."
make -s build/test_dataloader
# a scratch TMPDIR that goes away even if the test dies in a CHECK
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
TMPDIR="$scratch" ./build/test_dataloader
